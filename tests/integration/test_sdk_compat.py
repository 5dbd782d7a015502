"""operator-sdk's surface of the runner, against the real API server: /metrics behind TLS and
controller-runtime's authentication/authorization filter (real TokenReviews and
SubjectAccessReviews, RBAC on), facts for role watches unless ANSIBLE_GATHERING=explicit, and
ANSIBLE_DEBUG_LOGS."""

from __future__ import annotations

import ssl
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import Cluster
from .kit import Env, crd, install_crd, or_none, temporary_namespace, wait_for
from .test_production import free_port, metric

pytestmark = pytest.mark.integration

GROUP = "test.operator-runner.dev"


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("sdk")
    with cluster.api_client() as api:
        install_crd(api, crd(GROUP, "Facts"))
        try:
            with temporary_namespace(cluster, "sdk") as namespace:
                yield Env(cluster, api, namespace, tmp, group=GROUP)
        finally:
            or_none(
                client.ApiextensionsV1Api(api).delete_custom_resource_definition,
                f"factss.{GROUP}",
            )


def get(url: str, token: str | None = None) -> tuple[int, str]:
    """GET over TLS without verifying the (self-signed) certificate, as Prometheus scrapes
    operator-sdk's metrics (insecure_skip_verify)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    request = urllib.request.Request(url)
    if token is not None:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(request, timeout=10, context=context) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def test_metrics_need_tls_a_valid_token_and_the_metrics_reader_role(env: Env) -> None:
    suffix = uuid.uuid4().hex[:6]
    rbac = client.RbacAuthorizationV1Api(env.api)
    reader_role = f"metrics-reader-{suffix}"  # deploy/'s metrics-reader rule, under a test name
    rbac.create_cluster_role(
        {
            "metadata": {"name": reader_role},
            "rules": [{"nonResourceURLs": ["/metrics"], "verbs": ["get"]}],
        }
    )
    for sa in ("scraper", "stranger"):
        env.core.create_namespaced_service_account(env.ns, {"metadata": {"name": sa}})
    rbac.create_cluster_role_binding(
        {
            "metadata": {"name": reader_role},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": reader_role,
            },
            "subjects": [{"kind": "ServiceAccount", "name": "scraper", "namespace": env.ns}],
        }
    )
    try:
        port = free_port()
        op = env.start(
            args=(
                f"--metrics-bind-address=127.0.0.1:{port}",
                "--metrics-secure",
                "--metrics-require-rbac",
                "--enable-http2",  # accepted, with one line that says it does nothing here
                "--proxy-port",
                str(free_port()),
            )
        )
        url = f"https://127.0.0.1:{port}/metrics"
        wait_for(lambda: get(url)[0] != 0, timeout=30, what="/metrics over TLS")
        token = env.cluster.kubectl("create", "token", "scraper", "-n", env.ns).strip()
        other = env.cluster.kubectl("create", "token", "stranger", "-n", env.ns).strip()

        assert get(url)[0] == 401, "no token"
        assert get(url, "not-a-token")[0] == 401, "a token the API server does not know"
        status, text = get(url, other)
        assert status == 403 and f"system:serviceaccount:{env.ns}:stranger" in text
        status, text = get(url, token)
        assert status == 200 and "controller_runtime_reconcile_total" in text
        assert metric(text, "controller_runtime_max_concurrent_reconciles") is not None
        status, _ = get(url, token)  # from the caches now
        assert status == 200
        plain = urllib.request.Request(f"http://127.0.0.1:{port}/metrics")
        with pytest.raises((urllib.error.URLError, OSError)):
            urllib.request.urlopen(plain, timeout=5)  # no plain HTTP on the TLS port
        log = op.log_text()
        assert "metrics: TLS with a self-signed certificate" in log
        assert log.count("--enable-http2 has no effect") == 1
        assert "API proxy for roles listening on http://127.0.0.1:" in log
        assert token not in log and other not in log, "tokens never reach the log"
    finally:
        env.stop()
        rbac.delete_cluster_role_binding(reader_role)
        rbac.delete_cluster_role(reader_role)


def test_metrics_with_a_certificate_from_a_folder(env: Env, tmp_path: Path) -> None:
    from runner.app.serving.metricstls import self_signed

    cert, key = self_signed("metrics.example")
    (tmp_path / "tls.crt").write_bytes(cert)
    (tmp_path / "tls.key").write_bytes(key)
    port = free_port()
    op = env.start(
        args=(
            f"--metrics-bind-address=127.0.0.1:{port}",
            "--metrics-secure",
            f"--metrics-cert-path={tmp_path}",
        )
    )
    try:
        url = f"https://127.0.0.1:{port}/metrics"
        wait_for(lambda: get(url)[0] == 200, timeout=30, what="/metrics over TLS")
        context = ssl.create_default_context(cadata=cert.decode())
        context.check_hostname = False  # the certificate names metrics.example
        with urllib.request.urlopen(url, timeout=10, context=context) as response:
            assert response.status == 200  # verified against the folder's certificate
        assert f"metrics: TLS with {tmp_path / 'tls.crt'}" in op.log_text()
    finally:
        env.stop()


def facts_of(env: Env, name: str) -> dict[str, str]:
    env.wait_condition("Facts", name, "Successful", timeout=120)
    data = env.config_map_data(f"{name}-facts")
    assert data is not None
    return data


def test_role_watches_gather_facts_as_operator_sdk_and_debug_logs(env: Env) -> None:
    """Without ANSIBLE_GATHERING=explicit a role gets ansible_facts (operator-sdk gathers them
    for role watches); ANSIBLE_DEBUG_LOGS puts each run's output into the operator's log."""
    op = env.start(env={"ANSIBLE_GATHERING": "implicit", "ANSIBLE_DEBUG_LOGS": "true"})
    try:
        env.create("Facts", "gathered")
        data = facts_of(env, "gathered")
        assert data["gathered"] == "true" and data["python"] == "3", data
        text = op.log_text()
        assert "Ansible Debug Result" in text and "PLAY RECAP" in text
        assert "Gathering Facts" in text
    finally:
        env.stop()
    op = env.start(env={"ANSIBLE_GATHERING": "explicit"})
    try:
        env.create("Facts", "explicit")
        assert facts_of(env, "explicit")["gathered"] == "false"
        assert "Ansible Debug Result" not in op.log_text()
    finally:
        env.stop()
