"""The module server's lazily loaded kubernetes.client (runner/ansible/lazykube.py)."""

from __future__ import annotations

import textwrap

import fresh_python

from runner.ansible.warm.patches.lazykube import parse_init


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
        from runner.ansible.warm.patches import lazykube
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
    assert fresh_python.run(probe) == "ok"


def test_deferred_modules_run_when_an_attribute_is_first_asked_for() -> None:
    probe = textwrap.dedent("""
        import sys
        from runner.ansible.warm.patches import lazykube
        assert lazykube.install()
        import kubernetes
        import kubernetes.config.kube_config as kube_config
        import google.auth.transport.requests as transport
        assert transport.__name__ == "google.auth.transport.requests"
        assert transport.__spec__.name == transport.__name__
        assert "google.oauth2" not in sys.modules, "ran at import"
        import google.auth.transport.requests  # imported again: still not run
        assert "google.oauth2" not in sys.modules
        assert "stream" in vars(kubernetes) and "kubernetes.stream.ws_client" not in sys.modules
        # kube_config's own use, through its parent package
        request = kube_config.google.auth.transport.requests.Request()
        assert type(request).__module__ == "google.auth.transport.requests"
        assert "google.oauth2" in sys.modules
        assert sys.modules["google.auth.transport.requests"] is transport
        from google.auth.transport.requests import AuthorizedSession
        assert AuthorizedSession is transport.AuthorizedSession
        assert "__getattr__" not in vars(transport)
        try:
            transport.NoSuchName
        except AttributeError as err:
            assert "NoSuchName" in str(err)
        else:
            raise AssertionError("NoSuchName")
        from kubernetes.stream import stream  # what k8s_exec imports
        assert callable(stream) and "kubernetes.stream.ws_client" in sys.modules
        from kubernetes import watch
        assert watch.Watch().__class__.__module__ == "kubernetes.watch.watch"
        print("ok")
        """)
    assert fresh_python.run(probe) == "ok"
