"""The module server's lazily loaded kubernetes.client (runner/ansible/lazykube.py)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

from runner.ansible.lazykube import parse_init


def test_parse_init_reads_the_generated_statements() -> None:
    source = textwrap.dedent('''
        # coding: utf-8

        """
            Kubernetes
        """

        from __future__ import absolute_import

        __version__ = "33.1.0"

        # import apis into sdk package
        from kubernetes.client.api.core_v1_api import CoreV1Api
        from kubernetes.client.models.v1_pod import V1Pod
        ''')
    names, version = parse_init(source) or ({}, None)
    assert names == {
        "CoreV1Api": "kubernetes.client.api.core_v1_api",
        "V1Pod": "kubernetes.client.models.v1_pod",
    }
    assert version == "33.1.0"


def test_parse_init_refuses_any_other_statement() -> None:
    assert parse_init("from kubernetes.client.models.v1_pod import V1Pod\nx = 1\n") is None
    assert parse_init("import os\n") is None


def test_install_gives_every_name_and_imports_only_what_is_used() -> None:
    probe = textwrap.dedent("""
        import sys
        from runner.ansible import lazykube
        assert lazykube.install()
        import kubernetes, kubernetes.client
        from kubernetes.client import Configuration, ApiClient, ApiException
        loaded = [m for m in sys.modules if m.startswith("kubernetes.client.models.")]
        assert loaded == [], loaded
        from kubernetes.client import V1Pod, CoreV1Api
        import kubernetes.client.models as models
        assert models.V1Pod is V1Pod and V1Pod.__module__ == "kubernetes.client.models.v1_pod"
        assert kubernetes.client.CoreV1Api is CoreV1Api
        assert kubernetes.client.__version__ == kubernetes.__version__
        assert "V1Service" in dir(models) and "V1Service" in models.__all__
        assert kubernetes.client.rest.ApiException is ApiException
        try:
            models.NoSuchModel
        except AttributeError:
            pass
        else:
            raise AssertionError("NoSuchModel")
        # the client still deserializes into models it has not imported yet
        client = ApiClient()
        meta = client._ApiClient__deserialize({"name": "x"}, "V1ObjectMeta")
        assert type(meta).__name__ == "V1ObjectMeta" and meta.name == "x"
        assert not lazykube.install()  # once only
        print("ok")
        """)
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=False)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok"
