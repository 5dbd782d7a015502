"""A warm executor patch broken on purpose, as an ansible-core release that renamed a private
name would break it: every CR still turns Successful, on the plain path, with exactly one
warning that names the patch and the ansible-core version.

The operator is started with the test-only $OPERATOR_RUNNER_WARM_TEST_RENAME
(runner/ansible/warm/patches/apply.py): PHASE:MODULE:ATTRIBUTE renamed in the fork server
before its patches are installed (`server`), or in each job it forks (`job`).
"""

from __future__ import annotations

from collections.abc import Iterator
from importlib import metadata
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.warm.jobenv import TEST_RENAME_ENV

from .conftest import Cluster
from .kit import PROJECT, Env, crd, install_crd, temporary_namespace

# every line: the fence's registry names each line's targets
pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "fallback.operator-runner.dev"
WATCHES = PROJECT / "watches-fallback.yaml"
CRS = 4
VERSION = metadata.version("ansible-core")

BROKEN = {
    # At start-up: the direct module hand-off's target is gone, its install fails.
    "start-up": ("server:ansible.plugins.connection.local:Connection.exec_command", "direct"),
    # In a run: the kept module_utils' own code reads a payload file through a function that
    # is gone; the first k8s module job records it and imports from its payload instead.
    "in-job": ("job:runner.ansible.warm.patches.collectionutils:_read", "kept-module-utils"),
}


@pytest.fixture(scope="module")
def basic_crd(cluster: Cluster) -> Iterator[None]:
    with cluster.api_client() as api:
        install_crd(api, crd(GROUP, "Basic"))
    yield
    cluster.kubectl("delete", "crd", f"basics.{GROUP}", "--wait=false", check=False)


@pytest.fixture(params=sorted(BROKEN))
def broken(
    request: pytest.FixtureRequest, cluster: Cluster, basic_crd: None, tmp_path: Path
) -> Iterator[tuple[Env, str, str]]:
    rename, patch = BROKEN[request.param]
    with cluster.api_client() as api, temporary_namespace(cluster, "wf") as namespace:
        env = Env(cluster, api, namespace, tmp_path, group=GROUP, watches=WATCHES)
        try:
            env.start(args=("--executor=warm",), env={TEST_RENAME_ENV: rename})
            yield env, patch, request.param
        finally:
            env.stop()


def _warnings(env: Env) -> list[dict[str, Any]]:
    """The executor's warnings (the warm executor's, and any task's that failed)."""
    return [
        line
        for line in env.op.log_lines()
        if line.get("level") == "warning" and line.get("logger") == "runner.executor"
    ]


def test_a_broken_patch_never_fails_a_run(broken: tuple[Env, str, str]) -> None:
    env, patch, when = broken
    names = [f"fallback-{i}" for i in range(CRS)]
    for name in names:
        env.create("Basic", name, {"message": name})
    for name in names:
        env.wait_condition("Basic", name, "Successful", timeout=180)
        assert env.config_map_data(f"{name}-vars")["message"] == name  # type: ignore[index]
    warnings = _warnings(env)
    assert len(warnings) == 1, warnings
    message = str(warnings[0]["msg"])
    assert f"patch {patch} failed" in message and f"ansible-core {VERSION}" in message, message
    assert "plain path" in message
    texts = [str(line.get("msg")) for line in env.op.log_lines()]
    warm = [t for t in texts if t.startswith("executor: warm (fork server), ansible-core")]
    redone = [t for t in texts if t == "the run is made again on the plain path"]
    if when == "start-up":  # never warm: no run to redo
        assert not warm and not redone, (warm, redone)
    else:  # warm (the canary passed) until a run's module job failed: that run redone
        assert warm and redone, texts[-40:]
