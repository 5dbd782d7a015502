"""An operator-sdk project's own `make run`, unchanged, runs operator-runner.

tests/integration/sdk-operator keeps the Makefile operator-sdk scaffolds: its `run` target runs
`bin/ansible-operator` when there is one, else `ansible-operator` from PATH, else downloads
operator-sdk's Go binary. `pip install operator-runner` puts `ansible-operator` on the
virtualenv's PATH (the same program as `operator-runner`), so the project's `make run`, with the
virtualenv active as a user has it, runs us: against the real API server, the project's CRD and
role (with the collection its requirements.yml names, installed by ansible-galaxy first, as its
users do), a Greeting reconciled, nothing downloaded."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from .conftest import Cluster
from .kit import Env, condition, install_crd, temporary_namespace, wait_for
from .kit.images import SDK_OPERATOR, collection_tarballs

pytestmark = pytest.mark.integration

BIN = Path(sys.executable).parent  # the virtualenv's bin/, where pip put the console scripts
GROUP = "demo.sdk.example.com"


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A copy of the project, with the collection of its requirements.yml installed."""
    copy = tmp_path / "sdk-operator"
    shutil.copytree(SDK_OPERATOR, copy)
    tarballs = sorted(collection_tarballs(copy / "collection").glob("*.tar.gz"))
    subprocess.run(
        [str(BIN / "ansible-galaxy"), "collection", "install", "-p", str(tmp_path / "c")]
        + [str(t) for t in tarballs],
        check=True,
        capture_output=True,
        timeout=300,
    )
    return copy


@pytest.fixture
def env(cluster: Cluster, project: Path, tmp_path: Path) -> Iterator[Env]:
    with cluster.api_client() as api:
        for path in sorted((project / "config" / "crd" / "bases").glob("*.yaml")):
            install_crd(api, yaml.safe_load(path.read_text()))
        with temporary_namespace(cluster, "make-run") as namespace:
            yield Env(cluster, api, namespace, tmp_path, group=GROUP, version="v1alpha1")


def test_an_operator_sdk_projects_make_run_runs_operator_runner(
    env: Env, project: Path, tmp_path: Path
) -> None:
    assert (BIN / "ansible-operator").is_file()
    environ = {
        **os.environ,
        "PATH": f"{BIN}{os.pathsep}{os.environ.get('PATH', '')}",  # the virtualenv, active
        "KUBECONFIG": str(env.cluster.kubeconfig),
        "WATCH_NAMESPACE": env.ns,
        "ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "c"),
    }
    environ.pop("MAKEFLAGS", None)
    log_path = tmp_path / "make-run.log"
    with log_path.open("wb") as log:
        make = subprocess.Popen(
            ["make", "run"],
            cwd=project,
            env=environ,
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # make and the operator: one process group to signal
        )
    try:
        env.create("Greeting", "hello", {"who": "make run"})

        def successful() -> dict[str, Any] | None:
            obj = env.get("Greeting", "hello")
            cond = condition(obj, "Successful") if obj else None
            return obj if cond and cond.get("status") == "True" else None

        try:
            done = wait_for(successful, timeout=180, what="Greeting hello Successful")
        except AssertionError:
            print(log_path.read_text(errors="replace")[-5000:])
            raise
        assert done["status"]["message"] == "Hello, make run!"
        assert env.config_map_data("hello-greeting") == {"message": "Hello, make run!"}
        operator = _child(make.pid)
        os.kill(operator, signal.SIGTERM)  # as `kubectl delete pod` would: the operator only
        assert make.wait(timeout=90) == 0  # the operator's clean exit is make's
    finally:
        if make.poll() is None:
            os.killpg(make.pid, signal.SIGKILL)
            make.wait(timeout=30)
    text = log_path.read_text(errors="replace")
    # make ran the program pip installed, found on PATH; nothing was downloaded
    assert f"{BIN / 'ansible-operator'} run" in text, text[:2000]
    assert not (project / "bin").exists()
    assert "watching Greeting demo.sdk.example.com/v1alpha1" in text, text[-3000:]
    assert "signal SIGTERM: stopping" in text, text[-3000:]


def _child(pid: int) -> int:
    """The one process `make` runs (the recipe's command, run without a shell)."""
    children = Path(f"/proc/{pid}/task/{pid}/children").read_text().split()
    assert len(children) == 1, children
    return int(children[0])
