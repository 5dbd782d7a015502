from __future__ import annotations

import os
import stat
import subprocess
import sys
from pathlib import Path
from typing import Any, cast

import pytest

from runner.ansible.artifacts import (
    Artifacts,
    default_artifacts_dir,
    finish_run,
    latest_stdout,
    private_root,
)
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.annotations import MAX_RUNNER_ARTIFACTS_ANNOTATION, max_artifacts
from runner.reconcile.interface import Reconciles
from runner.reconcile.reconciler import Options, Reconciler
from runner.watches import GVK, Watch

ECHO = Resource("app.my.domain", "v1", "echoes", "Echo")


def ref(ns: str, name: str) -> ObjectRef:
    return ObjectRef(ECHO, ns, name)


def test_private_dirs_are_0700_and_removed_with_the_cr(tmp_path: Path) -> None:
    artifacts = Artifacts(tmp_path / "root")
    path = artifacts.private_dir(ref("ns", "a"))
    assert stat.S_IMODE(path.stat().st_mode) == 0o700
    assert stat.S_IMODE((tmp_path / "root").stat().st_mode) == 0o700
    artifacts.remove(ref("ns", "a"))
    assert not path.exists()


def test_the_folders_are_operator_sdks(tmp_path: Path) -> None:
    """<root>/<group>/<version>/<kind>/<namespace>/<name>, empty parts left out (Go's Join)."""
    artifacts = Artifacts(tmp_path)
    assert artifacts.private_dir(ref("ns", "a")) == tmp_path / "app.my.domain/v1/Echo/ns/a"
    core = ObjectRef(Resource("", "v1", "configmaps", "ConfigMap"), "ns", "c")
    assert artifacts.private_dir(core) == tmp_path / "v1/ConfigMap/ns/c"
    cluster = ObjectRef(Resource("x.io", "v1", "things", "Thing", namespaced=False), None, "t")
    assert artifacts.private_dir(cluster) == tmp_path / "x.io/v1/Thing/t"


def test_sweep_removes_only_crs_that_are_gone(tmp_path: Path) -> None:
    artifacts = Artifacts(tmp_path)
    for name in ("alive", "gone"):
        (artifacts.private_dir(ref("ns", name)) / "artifacts").mkdir()
    other = ObjectRef(Resource("x.io", "v1", "things", "Thing"), "ns", "gone")
    artifacts.private_dir(other)
    assert artifacts.sweep("app.my.domain", "v1", "Echo", {ref("ns", "alive")}) == 1
    assert artifacts.private_dir(ref("ns", "alive")).exists()
    assert not (tmp_path / "app.my.domain" / "v1" / "Echo" / "ns" / "gone").exists()
    assert (tmp_path / "x.io" / "v1" / "Thing" / "ns" / "gone").exists(), "other kinds untouched"


def test_sweep_of_cluster_scoped_and_of_an_unknown_scope(tmp_path: Path) -> None:
    things = Resource("x.io", "v1", "things", "Thing", namespaced=False)
    artifacts = Artifacts(tmp_path)
    alive, gone = (ObjectRef(things, None, n) for n in ("alive", "gone"))
    for r in (alive, gone):
        artifacts.private_dir(r)
    assert artifacts.sweep("x.io", "v1", "Thing", {alive}, namespaced=False) == 1
    assert artifacts.private_dir(alive).exists()
    assert artifacts.sweep("x.io", "v1", "Thing", set(), namespaced=None) == 1  # none alive


def test_the_reconciler_forgets_the_crs_gone_while_unwatched(tmp_path: Path) -> None:
    """What a controller's sweep asks of its reconciler (Reconciles.forget_gone)."""
    artifacts = Artifacts(tmp_path)
    for name in ("alive", "gone"):
        artifacts.private_dir(ref("ns", name))
    watch = Watch(gvk=GVK("app.my.domain", "v1", "Echo"), role="echo")
    none = cast(Any, None)  # no API, runs or Events in a sweep
    reconciler: Reconciles = Reconciler(
        watch, Options(reconcile_period=None), none, none, artifacts, none
    )
    assert reconciler.forget_gone({ref("ns", "alive")}, namespaced=True) == 1
    assert artifacts.private_dir(ref("ns", "alive")).exists()
    assert not (tmp_path / "app.my.domain" / "v1" / "Echo" / "ns" / "gone").exists()


def make_run(private: Path, ident: str, mtime: float) -> None:
    run = private / "artifacts" / ident
    run.mkdir(parents=True)
    (run / "stdout").write_text(f"run {ident}\n")
    os.utime(run, (mtime, mtime))


def test_latest_points_at_the_last_run_and_old_runs_go(tmp_path: Path) -> None:
    for i in range(1, 5):
        make_run(tmp_path, f"{i:03d}", 1000.0 + i)
        finish_run(tmp_path, f"{i:03d}", keep=2)
        assert latest_stdout(tmp_path).read_text() == f"run {i:03d}\n"
    names = sorted(p.name for p in (tmp_path / "artifacts").iterdir())
    assert names == ["003", "004", "latest"]
    assert os.readlink(tmp_path / "artifacts" / "latest") == "004"  # relative


def test_keep_zero_keeps_every_run(tmp_path: Path) -> None:
    for i in range(1, 25):
        make_run(tmp_path, f"{i:03d}", 1000.0 + i)
        finish_run(tmp_path, f"{i:03d}", keep=0)
    assert len(list((tmp_path / "artifacts").iterdir())) == 25  # 24 runs and latest


@pytest.mark.parametrize(("value", "expected"), [(None, 20), ("3", 3), ("1", 1), ("0", 0)])
def test_max_artifacts_annotation(value: str | None, expected: int) -> None:
    """ "0" keeps all runs, as operator-sdk reads it (ansible-runner's --rotate-artifacts 0)."""
    annotations = {} if value is None else {MAX_RUNNER_ARTIFACTS_ANNOTATION: value}
    assert max_artifacts(annotations, 20) == expected


@pytest.mark.parametrize("value", ["-1", "many"])
def test_bad_max_artifacts_annotation(value: str) -> None:
    with pytest.raises(ValueError, match="max-runner-artifacts"):
        max_artifacts({MAX_RUNNER_ARTIFACTS_ANNOTATION: value}, 20)


def test_operator_sdks_root_goes_to_one_operator_at_a_time(tmp_path: Path) -> None:
    """The first operator on a host takes operator-sdk's root (flock); others get their own."""
    shared = tmp_path / "ansible-operator" / "runner"
    code = (
        "import sys, time\n"
        "from pathlib import Path\n"
        "from runner.ansible.artifacts import claim\n"
        "print(claim(Path(sys.argv[1])), flush=True)\n"
        "time.sleep(60)\n"
    )
    holder = subprocess.Popen(
        [sys.executable, "-c", code, str(shared)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "True"
        own = default_artifacts_dir(tmp_path / "a" / "watches.yaml", tmp="/t", shared=shared)
        assert own.parent == Path("/t/operator-runner")
        assert own == private_root(tmp_path / "a" / "watches.yaml", tmp="/t")  # stable
        assert own != private_root(tmp_path / "b" / "watches.yaml", tmp="/t")
    finally:
        holder.kill()
        holder.wait()
    assert default_artifacts_dir(tmp_path / "a" / "watches.yaml", shared=shared) == shared
