"""Admission webhooks written as Ansible (validate:, mutate:), against the real API server.

The local cluster's API server runs on this host, so the operator's `make run` webhooks (url
webhooks on 127.0.0.1, certificates made in memory) are called for real: `kubectl apply` is
refused with the role's message, mutated, dry-run; a role that writes is refused by the
read-only proxy; a late answer follows the failurePolicy, and so does the API server when the
operator is down; the certificates are rotated under a running operator; the operator's own
finalizer and status writes never wait for its webhooks. The seeds' webhooks too.
"""

from __future__ import annotations

import base64
import signal
import subprocess
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from . import kit
from .conftest import Cluster
from .kit import PROJECT, Env, crd, install_crd, temporary_namespace, wait_for, wait_logged

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
GROUP = "test.operator-runner.dev"
KINDS = ("Admitted", "Guarded", "Slow", "SlowIgnored", "Writer")
WATCHES = PROJECT / "watches-admission.yaml"
SERVED = "served for the API server at"
FLASK = kit.CrKind(
    "swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask"
)  # the operator's line once its webhooks are registered


def apply(cluster: Cluster, namespace: str, obj: dict[str, Any], *flags: str) -> Any:
    """`kubectl apply` of `obj`, as a user runs it: the whole completed process."""
    return subprocess.run(
        [
            str(cluster.bin_dir / "kubectl"),
            "--kubeconfig",
            str(cluster.kubeconfig),
            "apply",
            "-n",
            namespace,
            "-f",
            "-",
            *flags,
        ],
        input=yaml.safe_dump(obj),
        capture_output=True,
        text=True,
        timeout=60,
    )


def cr(kind: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name}, "spec": spec}


def refusal(kind: str, hook: str = "validate") -> str:
    return f'admission webhook "{hook}.{kind.lower()}.{GROUP}" denied the request: '


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("admission")
    with cluster.api_client() as api:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        with temporary_namespace(cluster, "adm") as namespace:
            environment = Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
            try:
                op = environment.start()
                wait_logged(op, SERVED, timeout=60)
                yield environment
            finally:
                environment.stop()


@pytest.fixture
def user(cluster: Cluster) -> str:
    return cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")


def test_a_refused_apply_says_the_roles_message(env: Env, user: str) -> None:
    spec = {"message": "forbidden", "sizeK8sBuckets": 3}
    refused = apply(env.cluster, env.ns, cr("Admitted", "refused", spec))
    assert refused.returncode != 0
    assert (
        refusal("Admitted") + "spec.message may not be forbidden (operation=CREATE "
        f"dry_run=False user={user} name=refused size=3 old=- hook_var=from-the-hook)"
    ) in refused.stderr, refused.stderr
    assert env.get("Admitted", "refused") is None


def test_an_allowed_apply_is_mutated_warned_and_reconciled(env: Env) -> None:
    created = apply(env.cluster, env.ns, cr("Admitted", "allowed", {"message": "warn"}))
    assert created.returncode == 0, created.stderr
    assert "Warning: spec.message says warn" in created.stderr
    obj = env.wait_condition("Admitted", "allowed")
    assert obj["metadata"]["labels"] == {"mutated-by": "admit-label"}  # mutate, on CREATE
    assert obj["spec"] == {"message": "warn", "size": 1}
    changed = apply(env.cluster, env.ns, cr("Admitted", "allowed", {"message": "forbidden"}))
    assert "operation=UPDATE" in changed.stderr and "old=warn" in changed.stderr, changed.stderr
    assert env.get("Admitted", "allowed")["spec"]["message"] == "warn"  # type: ignore[index]


def test_dry_run_requests_are_answered_and_store_nothing(env: Env) -> None:
    refused = apply(
        env.cluster, env.ns, cr("Admitted", "dry", {"message": "forbidden"}), "--dry-run=server"
    )
    assert refusal("Admitted") in refused.stderr and "dry_run=True" in refused.stderr
    allowed = apply(
        env.cluster, env.ns, cr("Admitted", "dry", {"message": "ok"}), "--dry-run=server"
    )
    assert allowed.returncode == 0 and "created (server dry run)" in allowed.stdout
    assert env.get("Admitted", "dry") is None


def test_a_role_that_writes_is_refused_by_the_read_only_proxy(env: Env) -> None:
    refused = apply(env.cluster, env.ns, cr("Writer", "w1", {}))
    assert refusal("Writer") in refused.stderr, refused.stderr
    assert (
        "operator-runner: admission roles may only read: POST "
        f"/api/v1/namespaces/{env.ns}/configmaps was refused"
    ) in refused.stderr
    assert env.config_map("w1-written-by-admission") is None and env.get("Writer", "w1") is None


def test_a_late_answer_follows_the_failure_policy(env: Env) -> None:
    started = time.monotonic()
    refused = apply(env.cluster, env.ns, cr("Slow", "late", {}))
    took = time.monotonic() - started
    assert (
        refusal("Slow") + f"validation of Slow {env.ns}/late did not finish in 2 s "
        "(failurePolicy Fail)"
    ) in refused.stderr, refused.stderr
    assert took < 10, f"answered before the API server's timeout, not after {took:.1f} s"
    allowed = apply(env.cluster, env.ns, cr("SlowIgnored", "late", {}))
    assert allowed.returncode == 0, allowed.stderr
    assert (
        f"Warning: validation of SlowIgnored {env.ns}/late did not finish in 2 s; allowed "
        "(failurePolicy Ignore)"
    ) in allowed.stderr
    env.wait_condition("SlowIgnored", "late")


def test_the_operators_own_finalizer_and_status_writes_are_not_admitted(env: Env) -> None:
    """Guarded's role denies every UPDATE: the operator still adds its finalizer, writes status,
    and removes the finalizer at deletion (a user's update is refused)."""
    env.create("Guarded", "g1", {"message": "hi"})
    obj = env.wait_condition("Guarded", "g1")
    assert obj["metadata"]["finalizers"] == [f"{GROUP}/finalizer"]
    assert obj["status"]["roleWrote"] == "hi"
    with pytest.raises(client.exceptions.ApiException) as denied:
        env.patch_spec("Guarded", "g1", {"message": "changed"})
    assert "Guarded objects may not be changed" in str(denied.value.body)
    env.delete("Guarded", "g1")
    wait_for(lambda: env.get("Guarded", "g1") is None, timeout=90, what="Guarded g1 finalized")


def _configuration(api: client.ApiClient, name: str) -> Any:
    admission = client.AdmissionregistrationV1Api(api)
    try:
        return admission.read_validating_webhook_configuration(name)
    except client.exceptions.ApiException as err:
        if err.status == 404:
            return None
        raise


def _delete_configurations(api: client.ApiClient, name: str) -> None:
    admission = client.AdmissionregistrationV1Api(api)
    for delete in (
        admission.delete_validating_webhook_configuration,
        admission.delete_mutating_webhook_configuration,
    ):
        try:
            delete(name)
        except client.exceptions.ApiException as err:
            if err.status != 404:
                raise


def test_the_api_server_applies_the_failure_policy_when_the_operator_is_down(
    cluster: Cluster, env: Env, tmp_path: Path
) -> None:
    name = f"down-{uuid.uuid4().hex[:8]}"
    with temporary_namespace(cluster, "down") as namespace:
        op = kit.launch(
            cluster,
            tmp_path,
            watches=WATCHES,
            namespaces=[namespace],
            args=(f"--webhook-configuration-name={name}",),
        )
        try:
            wait_logged(op, SERVED, timeout=60)
            op.proc.send_signal(signal.SIGKILL)  # no clean exit: its configurations stay
            op.proc.wait(timeout=30)
            assert _configuration(env.api, name) is not None
            refused = apply(cluster, namespace, cr("Slow", "s", {}))
            assert refused.returncode != 0
            assert f'failed calling webhook "validate.slow.{GROUP}"' in refused.stderr
            allowed = apply(cluster, namespace, cr("SlowIgnored", "s", {}))
            assert allowed.returncode == 0, allowed.stderr
        finally:
            op.stop()
            _delete_configurations(env.api, name)


def _bundle(api: client.ApiClient, name: str) -> list[bytes]:
    config = _configuration(api, name)
    if config is None:
        return []
    pem = base64.b64decode(config.webhooks[0].client_config.ca_bundle or "")
    return [c.strip() for c in pem.split(b"-----END CERTIFICATE-----") if b"BEGIN" in c]


def test_certificates_are_made_and_rotated_under_a_running_operator(
    cluster: Cluster, env: Env, tmp_path: Path
) -> None:
    """A CA of 20 s: at 13 s the next one joins the bundle, the serving certificate moves to it
    once that is written, the old one leaves the bundle when it expires; the webhook answers
    throughout."""
    name = f"rotate-{uuid.uuid4().hex[:8]}"
    with temporary_namespace(cluster, "rot") as namespace:
        args = (
            f"--webhook-configuration-name={name}",
            "--webhook-ca-validity=20s",
            "--webhook-cert-validity=20s",
        )
        op = kit.launch(cluster, tmp_path, watches=WATCHES, namespaces=[namespace], args=args)
        try:
            wait_logged(op, SERVED, timeout=60)
            (first,) = _bundle(env.api, name)
            refused = apply(cluster, namespace, cr("Admitted", "r1", {"message": "forbidden"}))
            assert refusal("Admitted") in refused.stderr, refused.stderr
            both = wait_for(
                lambda: b if len(b := _bundle(env.api, name)) == 2 else None,
                timeout=40,
                what="the next CA in the caBundle",
            )
            assert first in both
            wait_for(
                lambda: first not in _bundle(env.api, name) and len(_bundle(env.api, name)) == 1,
                timeout=40,
                what="the old CA out of the caBundle",
            )
            refused = apply(cluster, namespace, cr("Admitted", "r2", {"message": "forbidden"}))
            assert refusal("Admitted") in refused.stderr, refused.stderr
            assert "webhooks: serving a certificate" in op.log_text()
        finally:
            assert op.stop() == 0
            assert _configuration(env.api, name) is None  # make run's: deleted at exit


def test_the_seeds_refuse_a_taken_name_and_copy_the_team_label(
    cluster: Cluster, tmp_path: Path
) -> None:
    with cluster.api_client() as api, temporary_namespace(cluster, "seeds") as namespace:
        cluster.kubectl("apply", "-f", str(REPO / "crds"))
        cluster.kubectl("label", "namespace", namespace, "team=blue")
        env = Env(cluster, api, namespace, tmp_path, watches=REPO / "watches.yaml")
        op = env.start()
        try:
            wait_logged(op, SERVED, timeout=60)
            samples = REPO / "config" / "samples"
            flask = yaml.safe_load((samples / "swallowlab_v1alpha1_echoflask.yaml").read_text())
            echo = yaml.safe_load((samples / "app_v1_echo.yaml").read_text())
            cluster.kubectl(
                "create", "deployment", "example-echoflask-deployment", "-n", namespace,
                "--image=busybox",
            )  # fmt: skip
            refused = apply(cluster, namespace, flask)
            assert (
                'admission webhook "validate.echoflask.swallowlab.com" denied the request: '
                "Deployment example-echoflask-deployment already exists in namespace "
                f"{namespace} and is not owned by this EchoFlask"
            ) in refused.stderr, refused.stderr
            cluster.kubectl("delete", "deployment", "example-echoflask-deployment", "-n", namespace)
            cluster.kubectl("create", "service", "clusterip", "example-echoflask-svc",
                            "--tcp=80:80", "-n", namespace)  # fmt: skip
            refused = apply(cluster, namespace, flask)
            assert "Service example-echoflask-svc already exists" in refused.stderr
            cluster.kubectl("delete", "service", "example-echoflask-svc", "-n", namespace)
            created = apply(cluster, namespace, flask)
            assert created.returncode == 0, created.stderr
            obj = wait_for(
                lambda: env.get(FLASK, "example-echoflask"), timeout=30, what="the EchoFlask"
            )
            assert obj["metadata"]["labels"]["team"] == "blue"
            again = apply(cluster, namespace, flask)  # an update: its own Deployment now
            assert again.returncode == 0, again.stderr

            cluster.kubectl("run", "echo-sample", "-n", namespace, "--image=busybox")
            refused = apply(cluster, namespace, echo)
            assert (
                'admission webhook "validate.echo.app.my.domain" denied the request: Pod '
                f"echo-sample already exists in namespace {namespace} and is not owned by this "
                "Echo"
            ) in refused.stderr, refused.stderr
        finally:
            env.stop()


def test_admission_runs_take_the_plain_path_when_the_warm_executor_is_broken(
    cluster: Cluster, tmp_path: Path, user: str
) -> None:
    """The warm executor's fence holds for admission runs too: a patch that fails to install
    (as after an ansible-core release that renamed its target) leaves the warm executor given up
    with one warning, and the quick runs (and their jobs started ahead) are plain
    ansible-playbook: a refused apply still says the role's message."""
    from runner.ansible.warm.jobenv import TEST_RENAME_ENV

    rename = "server:ansible.plugins.connection.local:Connection.exec_command"  # the `direct` patch
    with cluster.api_client() as api, temporary_namespace(cluster, "admp") as namespace:
        environment = Env(cluster, api, namespace, tmp_path, group=GROUP, watches=WATCHES)
        try:
            op = environment.start(args=("--executor=warm",), env={TEST_RENAME_ENV: rename})
            wait_logged(op, SERVED, timeout=60)
            refused = apply(cluster, namespace, cr("Admitted", "plain", {"message": "forbidden"}))
            assert refusal("Admitted") in refused.stderr, refused.stderr
            assert f"user={user} name=plain" in refused.stderr, refused.stderr
            allowed = apply(cluster, namespace, cr("Admitted", "fine", {"message": "hello"}))
            assert allowed.returncode == 0, allowed.stderr
            environment.wait_condition("Admitted", "fine")
            warnings = [
                str(line.get("msg"))
                for line in op.log_lines()
                if line.get("level") == "warning" and line.get("logger") == "runner.executor"
            ]
            assert len(warnings) == 1 and "patch direct failed" in warnings[0], warnings
            assert not [
                line
                for line in op.log_lines()
                if str(line.get("msg")).startswith("executor: warm")
                and "fork server), ansible-core" in str(line.get("msg"))
            ]
        finally:
            environment.stop()
