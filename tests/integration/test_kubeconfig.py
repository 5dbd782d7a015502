"""The operator on a kubeconfig whose server is dialled by an address that its certificate does
not name, with `tls-server-name` naming one it does (as for a tunnel or a load balancer's IP).

The local API server's certificate names 127.0.0.1 and `kubernetes`, not 127.0.0.2; it listens on
every address, so https://127.0.0.2:PORT reaches it. Every client of the operator must check the
certificate against `kubernetes`: kopf's watches, our requests, the roles' API proxy and the
dependent watches."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest
import yaml

from . import kit
from .conftest import REPO, Cluster
from .kit import CrKind, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

FLASK = CrKind("swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask")
SERVER_NAME = "kubernetes"


def dialled_by_another_address(kubeconfig: Path, out: Path, server_name: str | None) -> Path:
    """The kubeconfig with its server at 127.0.0.2 (and `tls-server-name` when given)."""
    document: dict[str, Any] = yaml.safe_load(kubeconfig.read_text())
    for entry in document["clusters"]:
        url = urlsplit(entry["cluster"]["server"])
        assert url.hostname == "127.0.0.1", url
        entry["cluster"]["server"] = f"https://127.0.0.2:{url.port}"
        if server_name:
            entry["cluster"]["tls-server-name"] = server_name
    out.write_text(yaml.safe_dump(document))
    return out


def test_the_operator_serves_its_crs_through_tls_server_name(
    cluster: Cluster, tmp_path: Path
) -> None:
    named = dialled_by_another_address(cluster.kubeconfig, tmp_path / "named.yaml", SERVER_NAME)
    bare = dialled_by_another_address(cluster.kubeconfig, tmp_path / "bare.yaml", None)
    # The address alone is refused (the certificate does not name it); with the name, it answers.
    kubectl = str(cluster.bin_dir / "kubectl")
    refused = subprocess.run(
        [kubectl, "--kubeconfig", str(bare), "get", "--raw", "/readyz"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert refused.returncode != 0 and "certificate" in refused.stderr, refused.stderr
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    cluster.kubectl(
        "wait", "--for=condition=Established", "crd/echoflasks.swallowlab.com", "--timeout=60s"
    )
    with cluster.api_client() as api, temporary_namespace(cluster, "tls") as ns:
        env = kit.Env(cluster, api, ns, tmp_path, watches=REPO / "watches.yaml")
        try:
            env.start(env={"KUBECONFIG": str(named)})
            env.apply_sample("swallowlab_v1alpha1_echoflask.yaml")
            env.wait_condition(FLASK, "example-echoflask")  # kopf's watch, our status patch
            service = env.service("example-echoflask-svc")  # the role, through the proxy
            assert service is not None
            # The dependent watch sees the Service go, and the role makes it again.
            env.core.delete_namespaced_service("example-echoflask-svc", ns)
            wait_for(
                lambda: (
                    (s := env.service("example-echoflask-svc"))
                    and s.metadata.uid != service.metadata.uid
                ),
                timeout=60,
                what="the deleted Service made again (a dependent watch)",
            )
            log = env.op.log_text()
        finally:
            env.stop()
    assert "CERTIFICATE_VERIFY_FAILED" not in log, log[-3000:]


def test_a_certificate_that_does_not_verify_stops_start_up_with_one_line(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Without the name, no retry helps: the operator says what to fix and exits 1, before it
    starts anything (no outage warnings, no traceback)."""
    bare = dialled_by_another_address(cluster.kubeconfig, tmp_path / "bare.yaml", None)
    op = kit.launch(cluster, tmp_path, watches=REPO / "watches.yaml", env={"KUBECONFIG": str(bare)})
    assert op.exit_code(timeout=60) == 1, op.log_text()[-3000:]
    log = op.log_text()
    errors = [x for x in op.log_lines() if x.get("level") == "error"]
    assert len(errors) == 1, log[-3000:]
    message = errors[0]["msg"]
    assert (
        message.startswith("the API server https://127.0.0.2:")
        and "presented a certificate that does not verify for the name '127.0.0.2'" in message
    )
    assert "set tls-server-name in the cluster entry" in message, message
    assert str(bare) in message  # where the credentials come from
    assert "Traceback" not in log and "unreachable" not in log, log[-3000:]
