"""`operator-runner reconcile`: one run of a CR's role in the foreground, against a real API
server, with the operator's extra vars, owner references and status; --check changes nothing."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from .conftest import Cluster
from .kit import PROJECT, Env, condition, crd, install_crd, temporary_namespace

pytestmark = pytest.mark.integration

GROUP = "test.operator-runner.dev"
EXE = Path(sys.executable).parent / "operator-runner"


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("reconcile-command")
    with cluster.api_client() as api:
        install_crd(api, crd(GROUP, "Basic"))
        with temporary_namespace(cluster, "rc") as namespace:
            yield Env(cluster, api, namespace, tmp, group=GROUP)


def reconcile(env: Env, *args: str) -> subprocess.CompletedProcess[str]:
    """`operator-runner reconcile ARGS` as a user runs it: no ANSIBLE_COLLECTIONS_PATH."""
    environ = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    environ["KUBECONFIG"] = str(env.cluster.kubeconfig)
    return subprocess.run(
        [
            str(EXE),
            "reconcile",
            f"--watches-file={PROJECT / 'watches.yaml'}",
            f"--artifacts-dir={env.tmp / 'artifacts'}",
            *args,
        ],
        capture_output=True,
        text=True,
        env=environ,
        timeout=180,
    )


def test_one_run_reconciles_the_cr_as_the_operator_would(env: Env) -> None:
    cr = env.create("Basic", "b1", {"message": "hello", "sizeK8sBuckets": 3})
    proc = reconcile(env, "basic/b1", "-n", env.ns)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "Record the variables the run got" in proc.stdout  # each task's result is printed
    data = env.config_map_data("b1-vars")
    assert data is not None
    assert (data["message"], data["size_k8s_buckets"], data["watch_var"]) == (
        "hello",
        "3",
        "from-watches",
    )
    owner = env.config_map("b1-vars").metadata.owner_references[0]  # type: ignore[union-attr]
    assert (owner.kind, owner.name, owner.uid) == ("Basic", "b1", cr["metadata"]["uid"])
    obj = env.get("Basic", "b1")
    assert obj is not None
    assert condition(obj, "Successful")["status"] == "True"  # type: ignore[index]
    assert obj["status"]["roleWrote"] == "hello"


def test_check_and_diff_show_the_change_and_change_nothing(env: Env) -> None:
    env.create("Basic", "b2", {"message": "before"})
    assert reconcile(env, "Basic.test.operator-runner.dev/b2", "-n", env.ns).returncode == 0
    env.patch_spec("Basic", "b2", {"message": "after"})
    cr_before = env.get("Basic", "b2")
    assert cr_before is not None
    proc = reconcile(env, "basics/b2", "-n", env.ns, "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert "-    message: before" in proc.stdout or '-        "message": "before"' in proc.stdout
    assert "after" in proc.stdout
    assert "check mode: nothing changed" in proc.stderr
    assert env.config_map_data("b2-vars")["message"] == "before"  # type: ignore[index]
    cr_after = env.get("Basic", "b2")
    assert cr_after is not None
    assert cr_after["metadata"]["resourceVersion"] == cr_before["metadata"]["resourceVersion"]


def test_check_with_a_file_cr_that_is_not_in_the_cluster(env: Env) -> None:
    path = env.tmp / "new.yaml"
    cr = {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Basic",
        "metadata": {"name": "unsaved", "namespace": env.ns},
        "spec": {"message": "from the file"},
    }
    path.write_text(yaml.safe_dump(cr))
    proc = reconcile(env, "-f", str(path), "--check", "--diff")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # kubernetes.core gives no diff for an object it would create: the task says "changed"
    assert "changed: [localhost]" in proc.stdout
    assert env.config_map("unsaved-vars") is None and env.get("Basic", "unsaved") is None
    proc = reconcile(env, "-f", str(path))  # without --check it must be in the cluster
    assert proc.returncode == 1 and "not found" in proc.stderr


def test_exit_status_2_when_the_run_fails_1_for_usage_errors(env: Env) -> None:
    env.create("Basic", "b3", {"fail": True, "fail_reason": "asked to"})
    proc = reconcile(env, "basic/b3", "-n", env.ns)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert "asked to" in proc.stdout + proc.stderr
    failure = condition(env.get("Basic", "b3") or {}, "Failure")
    assert failure is not None and failure["status"] == "True"
    unknown = reconcile(env, "nosuchkind/x", "-n", env.ns)
    assert unknown.returncode == 1 and "no watch of kind 'nosuchkind'" in unknown.stderr
    missing = reconcile(env, "basic/nope", "-n", env.ns)
    assert missing.returncode == 1 and "not found" in missing.stderr
