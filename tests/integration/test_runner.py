"""The runner end to end: real API server, real operator process, real ansible-runner and roles."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .conftest import Cluster
from .kit import Env, condition, crd, install_crd, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

GROUP = "test.operator-runner.dev"
KINDS = (
    "Basic",
    "Unsafe",
    "Finalized",
    "Unmanaged",
    "Selected",
    "Requeue",
    "Broken",
    "Paused",
    "Noisy",
)
FINALIZER = f"{GROUP}/finalizer"


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Env]:
    """The operator, once with the warm executor and once with plain ansible-runner runs:
    both paths must pass the same tests."""
    tmp = tmp_path_factory.mktemp("runner")
    with cluster.api_client() as api:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        _delete_crd(api, "lates." + GROUP)
        with temporary_namespace(cluster, "rt") as namespace:
            environment = Env(cluster, api, namespace, tmp, group=GROUP)
            try:
                environment.start(args=(f"--executor={request.param}",))
                yield environment
            finally:
                environment.stop()
                _cleanup(cluster, api, namespace)


def _delete_crd(api: client.ApiClient, name: str) -> None:
    try:
        client.ApiextensionsV1Api(api).delete_custom_resource_definition(name)
    except ApiException as err:
        if err.status != 404:
            raise


def _cleanup(cluster: Cluster, api: client.ApiClient, namespace: str) -> None:
    custom = client.CustomObjectsApi(api)
    for obj in custom.list_namespaced_custom_object(GROUP, "v1", namespace, "finalizeds")["items"]:
        custom.patch_namespaced_custom_object(
            GROUP,
            "v1",
            namespace,
            "finalizeds",
            obj["metadata"]["name"],
            {"metadata": {"finalizers": None}},
        )
    for kind in (*KINDS, "Late"):
        _delete_crd(api, f"{kind.lower()}s.{GROUP}")


@pytest.mark.lines
def test_success_sets_conditions_and_vars_reach_the_role(env: Env) -> None:
    env.create("Basic", "ok", {"message": "hello", "sizeK8sBuckets": 3})
    obj = env.wait_condition("Basic", "ok", "Successful")
    successful = condition(obj, "Successful")
    running = condition(obj, "Running")
    failure = condition(obj, "Failure")
    assert successful and successful["reason"] == "Successful"
    # operator-sdk's Running after a success: True, reason Successful (kubectl waits rely on it)
    assert running and running["status"] == "True" and running["reason"] == "Successful"
    assert failure and failure["status"] == "False"
    ready = condition(obj, "Ready")
    assert ready and ready["status"] == "True"
    assert ready["observedGeneration"] == obj["metadata"]["generation"]
    result = running["ansibleResult"]
    assert result["failures"] == 0 and result["ok"] >= 2 and result["completion"]
    assert obj["status"]["roleWrote"] == "hello", "keys the role wrote are kept"
    data = env.config_map_data("ok-vars")
    assert data is not None
    assert data["message"] == "hello"
    assert data["size_k8s_buckets"] == "3"
    assert data["watch_var"] == "from-watches"
    assert data["via_spec"] == "hello"
    # the CR carries nothing of the framework's
    meta = obj["metadata"]
    assert not [a for a in meta.get("annotations") or {} if "kopf" in a]
    assert not meta.get("finalizers")
    lines = [line for line in env.op.log_lines() if line.get("name") == "ok"]
    assert lines and all(
        line.get("kind") == "Basic" and line.get("namespace") == env.ns for line in lines
    )


@pytest.mark.lines
def test_failure_is_reported_then_recovers(env: Env) -> None:
    env.create("Basic", "bad", {"fail": True, "failReason": "size too big"})
    obj = env.wait_condition("Basic", "bad", "Failure", idle=True)  # retried with backoff
    failure = condition(obj, "Failure")
    assert failure and failure["reason"] == "Failed"
    assert "spec.fail is set: size too big" in failure["message"]
    successful = condition(obj, "Successful")
    assert successful and successful["status"] == "False" and successful["reason"] == "Failed"
    warning = wait_for(
        lambda: [e for e in env.events("bad") if e.type == "Warning"],
        timeout=30,
        what="a Warning Event",
    )
    assert warning[0].reason == "ReconcileFailed"
    assert "size too big" in warning[0].message

    env.patch_spec("Basic", "bad", {"fail": False})
    env.wait_condition("Basic", "bad", "Successful")
    normal = wait_for(
        lambda: [e for e in env.events("bad") if e.type == "Normal"],
        timeout=30,
        what="a Normal Event on recovery",
    )
    assert normal[0].reason == "Reconciled"


PAYLOAD = "{{ lookup('pipe', 'id') }}"


@pytest.mark.lines
def test_jinja_in_spec_is_never_evaluated(env: Env) -> None:
    env.create(
        "Basic", "inject", {"message": PAYLOAD, "nestedValue": {"deepList": ["{{ 7 * 6 }}"]}}
    )
    env.wait_condition("Basic", "inject", "Successful")
    data = env.config_map_data("inject-vars")
    assert data is not None
    assert data["message"] == PAYLOAD
    assert data["via_object"] == PAYLOAD
    assert data["via_spec"] == PAYLOAD
    assert data["nested"] == '["{{ 7 * 6 }}"]'


@pytest.mark.lines
def test_mark_unsafe_false_restores_operator_sdk_behaviour(env: Env) -> None:
    env.create("Unsafe", "evaluated", {"message": "{{ 7 * 6 }}"})
    env.wait_condition("Unsafe", "evaluated", "Successful")
    data = env.config_map_data("evaluated-vars")
    assert data is not None and data["message"] == "42"


@pytest.mark.lines
def test_run_without_result_is_a_failure_not_stuck_running(env: Env) -> None:
    env.create("Broken", "broken")
    obj = env.wait_condition("Broken", "broken", "Failure", idle=True)
    message = condition(obj, "Failure")["message"]  # type: ignore[index]
    assert "ended without a result" in message


def test_pause_works_under_both_executors(env: Env) -> None:
    """`ansible.builtin.pause` asks the run's terminal (tcgetpgrp, raw mode): the warm executor
    hands its job the pty that the plain path's ansible-playbook gets from ansible-runner."""
    env.create("Paused", "paused")
    obj = env.wait_condition("Paused", "paused", "Successful", timeout=60)
    failure = condition(obj, "Failure")
    assert failure and failure["status"] == "False", failure
    running = condition(obj, "Running")
    assert running and running["ansibleResult"]["failures"] == 0


def test_a_failing_tasks_reason_survives_a_huge_result(env: Env) -> None:
    """1 MB of output is more than ansible-runner keeps of a result in its event: the reason
    still reaches the Failure condition and the Event, bounded."""
    env.create("Noisy", "noisy", {"reason": "the disk is on fire"})
    obj = env.wait_condition("Noisy", "noisy", "Failure")
    message = condition(obj, "Failure")["message"]  # type: ignore[index]
    assert message.startswith("Print a lot, then fail (role noisy, tasks/main.yml:4): ")
    # "non-zero return code" up to 2.20, "The command exited with a non-zero return code." on 2.21
    assert "non-zero return code" in message.splitlines()[0]
    assert message.endswith("the disk is on fire"), message[:2000]
    assert len(message) < 4000
    warning = wait_for(
        lambda: [e for e in env.events("noisy") if e.type == "Warning"],
        timeout=30,
        what="a Warning Event",
    )
    assert "the disk is on fire" in warning[0].message


@pytest.mark.lines
def test_finalizer_runs_on_delete(env: Env) -> None:
    env.create("Finalized", "fin")
    obj = env.wait_condition("Finalized", "fin", "Successful")
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    assert env.config_map_data("fin-marker") == {"state": "present"}
    env.delete("Finalized", "fin")
    wait_for(lambda: env.get("Finalized", "fin") is None, timeout=60, what="CR gone")
    trace = env.core.read_namespaced_config_map(f"{env.ns}-fin-finalized", "default")
    env.core.delete_namespaced_config_map(f"{env.ns}-fin-finalized", "default")
    # written across namespaces: the primary-resource annotations, not an ownerReference
    assert trace.metadata.annotations["operator-sdk/primary-resource"] == f"{env.ns}/fin"
    assert trace.metadata.annotations["operator-sdk/primary-resource-type"] == (
        "Finalized.test.operator-runner.dev"
    )
    assert not trace.metadata.owner_references


@pytest.mark.lines
def test_failing_finalizer_keeps_the_cr_until_it_succeeds(env: Env) -> None:
    env.create("Finalized", "stuck", {"blockFinalizer": True})
    env.wait_condition("Finalized", "stuck", "Successful")
    env.delete("Finalized", "stuck")
    obj = env.wait_condition("Finalized", "stuck", "Failure", generation=False)
    assert "finalizer blocked" in condition(obj, "Failure")["message"]  # type: ignore[index]
    assert obj["metadata"]["finalizers"] == [FINALIZER]
    wait_for(
        lambda: [e for e in env.events("stuck") if e.reason == "FinalizerFailed"],
        timeout=30,
        what="a FinalizerFailed Event",
    )
    env.patch_spec("Finalized", "stuck", {"blockFinalizer": False})
    wait_for(lambda: env.get("Finalized", "stuck") is None, timeout=90, what="CR finalized")


def test_selector_filters_crs(env: Env) -> None:
    env.create("Selected", "ignored")
    env.create("Selected", "chosen", labels={"reconcile": "yes"})
    env.wait_condition("Selected", "chosen", "Successful")
    ignored = env.get("Selected", "ignored")
    assert ignored is not None and not ignored.get("status")
    assert env.config_map_data("ignored-vars") is None


def test_manage_status_false_leaves_status_alone(env: Env) -> None:
    env.create("Unmanaged", "um")
    wait_for(
        lambda: env.config_map_data("um-unmanaged") is not None,
        timeout=60,
        what="the playbook's ConfigMap",
    )
    obj = env.get("Unmanaged", "um")
    assert obj is not None and not (obj.get("status") or {}).get("conditions")


@pytest.mark.lines
def test_requeue_after_runs_again_and_status_is_finished(env: Env) -> None:
    env.create(
        "Requeue", "rq", annotations={"ansible.sdk.operatorframework.io/max-runner-artifacts": "2"}
    )

    def runs() -> int:
        return sum(
            1
            for line in env.op.log_lines()
            if line.get("name") == "rq" and str(line.get("msg", "")).startswith("ran ")
        )

    wait_for(lambda: runs() >= 4, timeout=60, what="4 runs of the requeueing CR")
    # The CR is run again every second: a read can land inside the next run (Running=True).
    env.wait_condition("Requeue", "rq", "Successful", idle=True)
    run_dirs = _artifact_runs(env.op.artifacts, "Requeue", env.ns, "rq")
    assert 1 <= len(run_dirs) <= 2, run_dirs
    # operator-sdk's debugging path: <group>/<version>/<kind>/<ns>/<name>/artifacts/latest/stdout
    latest = _artifact_dir(env.op.artifacts, "Requeue", env.ns, "rq") / "artifacts" / "latest"
    assert "PLAY RECAP" in (latest / "stdout").read_text()
    env.delete("Requeue", "rq")
    wait_for(
        lambda: not _artifact_dir(env.op.artifacts, "Requeue", env.ns, "rq").exists(),
        timeout=30,
        what="the CR's artifacts to be removed",
    )


def _artifact_dir(root: Path, kind: str, ns: str, name: str) -> Path:
    return root / GROUP / "v1" / kind / ns / name


def _artifact_runs(root: Path, kind: str, ns: str, name: str) -> list[str]:
    """The runs' folders (without `latest`, the link to the last one)."""
    path = _artifact_dir(root, kind, ns, name) / "artifacts"
    return sorted(p.name for p in path.iterdir() if p.name != "latest") if path.is_dir() else []


def test_max_runner_artifacts_zero_keeps_every_run(env: Env) -> None:
    """The annotation's "0" keeps all runs, as operator-sdk reads it; the folder still goes
    with the CR."""
    env.create(
        "Requeue",
        "keep",
        annotations={"ansible.sdk.operatorframework.io/max-runner-artifacts": "0"},
    )
    wait_for(
        lambda: len(_artifact_runs(env.op.artifacts, "Requeue", env.ns, "keep")) >= 22,
        # a plain run costs ten times the CPU of a warm one (bench/README.md): 22 of them
        timeout=90 if env.executor == "warm" else 360,
        what="22 runs kept (the default keeps 20)",
    )
    env.delete("Requeue", "keep")
    wait_for(
        lambda: not _artifact_dir(env.op.artifacts, "Requeue", env.ns, "keep").exists(),
        timeout=30,
        what="the CR's artifacts to be removed",
    )


def test_twenty_crs_at_once_all_succeed(env: Env) -> None:
    names = [f"many-{i:02d}" for i in range(20)]
    for name in names:
        env.create("Basic", name, {"message": name})
    for name in names:
        env.wait_condition("Basic", name, "Successful", timeout=240)
    for name in names:
        assert env.config_map_data(f"{name}-vars")["message"] == name  # type: ignore[index]


def test_crd_installed_after_start_up(env: Env) -> None:
    install_crd(env.api, crd(GROUP, "Late"))
    wait_for(lambda: _create_late(env), timeout=30, what="the Late CR to be accepted")
    env.wait_condition("Late", "late", "Successful", timeout=120)


def _create_late(env: Env) -> bool:
    try:
        env.create("Late", "late", {"message": "late"})
        return True
    except ApiException as err:
        if err.status == 404:  # discovery of the new CRD is not served yet
            return False
        raise


def test_reconcile_period_and_verbosity_annotations(env: Env) -> None:
    env.create(
        "Basic",
        "periodic",
        {"message": "tick"},
        annotations={
            "ansible.sdk.operatorframework.io/reconcile-period": "1s",
            "ansible.sdk.operatorframework.io/verbosity": "3",
        },
    )

    def runs() -> int:
        return sum(
            1
            for line in env.op.log_lines()
            if line.get("name") == "periodic" and str(line.get("msg", "")).startswith("ran ")
        )

    wait_for(lambda: runs() >= 3, timeout=60, what="3 periodic runs of an unchanged CR")
    commands = list(
        _artifact_dir(env.op.artifacts, "Basic", env.ns, "periodic").glob("artifacts/*/command")
    )
    assert commands
    assert "-vvv" in json.loads(commands[0].read_text())["command"]
