from __future__ import annotations

import stat
from pathlib import Path

import pytest

from runner.ansible.artifacts import Artifacts
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.annotations import MAX_RUNNER_ARTIFACTS_ANNOTATION, max_artifacts

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


def test_sweep_removes_only_crs_that_are_gone(tmp_path: Path) -> None:
    artifacts = Artifacts(tmp_path)
    for name in ("alive", "gone"):
        (artifacts.private_dir(ref("ns", name)) / "artifacts").mkdir()
    other = ObjectRef(Resource("x.io", "v1", "things", "Thing"), "ns", "gone")
    artifacts.private_dir(other)
    assert artifacts.sweep("app.my.domain", "Echo", {ref("ns", "alive")}) == 1
    assert artifacts.private_dir(ref("ns", "alive")).exists()
    assert not (tmp_path / "app.my.domain" / "Echo" / "ns" / "gone").exists()
    assert (tmp_path / "x.io" / "Thing" / "ns" / "gone").exists(), "other kinds untouched"


@pytest.mark.parametrize(("value", "expected"), [(None, 20), ("3", 3), ("1", 1)])
def test_max_artifacts_annotation(value: str | None, expected: int) -> None:
    annotations = {} if value is None else {MAX_RUNNER_ARTIFACTS_ANNOTATION: value}
    assert max_artifacts(annotations, 20) == expected


@pytest.mark.parametrize("value", ["0", "-1", "many"])
def test_bad_max_artifacts_annotation(value: str) -> None:
    with pytest.raises(ValueError, match="max-runner-artifacts"):
        max_artifacts({MAX_RUNNER_ARTIFACTS_ANNOTATION: value}, 20)


def test_the_default_root_is_one_per_watches_file(tmp_path: Path) -> None:
    from runner.ansible.artifacts import default_artifacts_dir

    a = default_artifacts_dir(tmp_path / "a" / "watches.yaml", tmp="/t")
    b = default_artifacts_dir(tmp_path / "b" / "watches.yaml", tmp="/t")
    assert a.parent == b.parent == Path("/t/operator-runner") and a != b
    assert a == default_artifacts_dir(tmp_path / "a" / "watches.yaml", tmp="/t")  # stable
