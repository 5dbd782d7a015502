"""What stays of the runs: the per-CR rotation with the first failed run kept, the global cap."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest
from fake_api import FakeClock

from runner.ansible.artifacts import FAILED, LATEST, finish_run
from runner.ansible.retention import Caps, Retention, RunFolder, runs_dirs, select
from runner.app.cli.runflags import byte_size


def folder(name: str, finished: float, size: int = 100) -> RunFolder:
    return RunFolder(Path("/r") / name, finished, size)


# -- the pure selection ---------------------------------------------------------------------


def test_the_first_finished_go_first_until_within_the_run_cap() -> None:
    clock = FakeClock()
    runs = []
    for name in ("a", "b", "c", "d", "e"):
        clock.now += 10
        runs.append(folder(name, clock()))
    shuffled = [runs[3], runs[0], runs[4], runs[2], runs[1]]
    assert [r.path.name for r in select(shuffled, set(), 0, 3)] == ["a", "b"]


def test_the_byte_cap_removes_until_the_rest_fits() -> None:
    runs = [folder("a", 1, 500), folder("b", 2, 300), folder("c", 3, 300), folder("d", 4, 100)]
    # 1200 bytes, cap 700: a (500) goes -> 700 fits
    assert [r.path.name for r in select(runs, set(), 700, 0)] == ["a"]
    # cap 600: a then b go -> 400
    assert [r.path.name for r in select(runs, set(), 600, 0)] == ["a", "b"]


def test_both_caps_the_stricter_wins_and_zero_is_no_cap() -> None:
    runs = [folder(n, i, 100) for i, n in enumerate("abcdef")]
    assert [r.path.name for r in select(runs, set(), 250, 5)] == ["a", "b", "c", "d"]
    assert select(runs, set(), 0, 0) == []
    assert select(runs, set(), 600, 6) == []  # exactly at the caps


def test_kept_runs_count_but_are_never_chosen() -> None:
    runs = [folder(n, i) for i, n in enumerate("abcde")]
    kept = {Path("/r/a"), Path("/r/c")}
    assert [r.path.name for r in select(runs, kept, 0, 3)] == ["b", "d"]
    # kept runs alone over the cap: every other run goes, the kept stay
    assert [r.path.name for r in select(runs, kept, 0, 1)] == ["b", "d", "e"]


def test_equal_finish_times_go_by_name() -> None:
    runs = [folder("2", 5), folder("1", 5), folder("3", 5)]
    assert [r.path.name for r in select(runs, set(), 0, 1)] == ["1", "2"]


# -- a CR's own rotation: the first failed run ---------------------------------------------


def make_run(private: Path, ident: str, size: int = 10) -> Path:
    run = private / "artifacts" / ident
    (run / "job_events").mkdir(parents=True)
    (run / "stdout").write_text("x" * size)
    return run


def test_the_first_failed_run_is_kept_until_a_run_succeeds(tmp_path: Path) -> None:
    runs = tmp_path / "artifacts"
    make_run(tmp_path, "000")
    finish_run(tmp_path, "000", keep=2, failed=False)
    for ident in ("001", "002", "003", "004"):
        make_run(tmp_path, ident)
        finish_run(tmp_path, ident, keep=2, failed=True)
        # where the CR started failing; `latest` is the last failed run
        assert os.readlink(runs / FAILED) == "001"
        assert os.readlink(runs / LATEST) == ident
    assert sorted(p.name for p in runs.iterdir()) == ["001", "003", "004", FAILED, LATEST]
    make_run(tmp_path, "005")
    finish_run(tmp_path, "005", keep=2, failed=None)  # cancelled: neither
    assert os.readlink(runs / FAILED) == "001"
    make_run(tmp_path, "006")
    finish_run(tmp_path, "006", keep=2, failed=False)
    # 006 succeeded: the link went, and 001 went with the rotation
    assert not (runs / FAILED).is_symlink()
    assert sorted(p.name for p in runs.iterdir()) == ["005", "006", LATEST]
    make_run(tmp_path, "007")
    finish_run(tmp_path, "007", keep=2, failed=True)  # failing again: a new streak
    assert os.readlink(runs / FAILED) == "007"


# -- the global sweep -------------------------------------------------------------------------


def cr(root: Path, ns: str, name: str) -> Path:
    return root / "app.my.domain" / "v1" / "Echo" / ns / name


def fill(root: Path, clock: FakeClock, count: int, size: int = 100) -> list[Path]:
    """`count` finished runs spread over three CRs, one per 10 s of `clock`, in that order."""
    made = []
    for i in range(count):
        private = cr(root, "ns", f"cr{i % 3}")
        run = make_run(private, f"{i:04d}", size)
        finish_run(private, f"{i:04d}", keep=0, failed=False)
        clock.now += 10
        t = clock()  # seconds since 1970: long before any real run
        os.utime(run, (t, t))
        made.append(run)
    return made


def test_runs_dirs_finds_the_crs_and_skips_the_roots_own(tmp_path: Path) -> None:
    make_run(cr(tmp_path, "a", "x"), "1")
    make_run(tmp_path / "v1" / "ConfigMap" / "cm", "1")  # core group, cluster-scoped
    make_run(tmp_path / ".ansible-tmp" / "x", "1")
    make_run(tmp_path / "admission" / "x", "1")
    found = {p.relative_to(tmp_path).as_posix() for p in runs_dirs(tmp_path)}
    assert found == {"app.my.domain/v1/Echo/a/x/artifacts", "v1/ConfigMap/cm/artifacts"}


def test_the_sweep_removes_the_oldest_across_crs(tmp_path: Path) -> None:
    made = fill(tmp_path, FakeClock(), 12)
    retention = Retention(tmp_path, Caps(max_runs=6))
    assert retention.sweep() == 6
    left = sorted(p.name for p in made if p.exists())
    assert left == [f"{i:04d}" for i in range(6, 12)]
    assert retention.sweep() == 0  # within the cap now


def test_latest_failed_and_writing_runs_stay(tmp_path: Path) -> None:
    clock = FakeClock()
    made = fill(tmp_path, clock, 9)
    # cr0's runs are 0000, 0003, 0006; make 0000 its first failed run
    private0 = cr(tmp_path, "ns", "cr0")
    os.symlink("0000", private0 / "artifacts" / FAILED)
    writing = make_run(cr(tmp_path, "ns", "cr1"), "9999")
    t = clock() - 1000  # an old mtime: only the registry protects it
    os.utime(writing, (t, t))
    retention = Retention(tmp_path, Caps(max_runs=1))
    with retention.writing(writing):
        retention.sweep()
        assert writing.exists()
    left = {p.name for p in [*made, writing] if p.exists()}
    # the first failed (0000), each CR's latest (0006, 0007, 0008), the run being written
    assert left == {"0000", "0006", "0007", "0008", "9999"}


def test_the_byte_cap_bounds_the_root(tmp_path: Path) -> None:
    fill(tmp_path, FakeClock(), 30, size=1000)
    retention = Retention(tmp_path, Caps(max_bytes=10_000))
    removed = retention.sweep()
    runs = [p for d in runs_dirs(tmp_path) for p in d.iterdir() if not p.is_symlink()]
    total = sum(f.stat().st_size for r in runs for f in r.rglob("*") if f.is_file())
    assert total <= 10_000
    assert removed == 30 - len(runs) and len(runs) == 10


def test_no_cap_no_sweep(tmp_path: Path) -> None:
    made = fill(tmp_path, FakeClock(), 5)
    assert Retention(tmp_path, Caps()).sweep() == 0
    assert Retention(None, Caps(max_runs=1)).sweep() == 0
    assert all(p.exists() for p in made)


def test_finished_rotates_the_cr_then_caps_the_root(tmp_path: Path) -> None:
    fill(tmp_path, FakeClock(), 6)  # old runs, finished long ago by the fake clock
    private = cr(tmp_path, "ns", "new")
    make_run(private, "new")
    retention = Retention(tmp_path, Caps(max_runs=4))
    assert retention.finished(private, "new", keep=20, failed=True) == 3
    assert os.readlink(private / "artifacts" / FAILED) == "new"
    assert (private / "artifacts" / "new").exists()


# -- the flags --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [("0", 0), ("1048576", 1048576), ("1Gi", 2**30), ("500Mi", 500 * 2**20), ("2G", 2 * 10**9)],
)
def test_byte_sizes(text: str, expected: int) -> None:
    assert byte_size(text) == expected


@pytest.mark.parametrize("text", ["", "1.5Gi", "-1", "1GB", "lots"])
def test_bad_byte_sizes(text: str) -> None:
    with pytest.raises(argparse.ArgumentTypeError, match="expected a size"):
        byte_size(text)


def test_the_flags_defaults_and_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    from runner.app.cli.commands import build_parser

    args = build_parser().parse_args(["run"])
    assert (args.max_artifacts_bytes, args.max_artifacts_runs) == (2**30, 2000)
    assert args.artifacts_job_events is True
    monkeypatch.setenv("OPERATOR_RUNNER_MAX_ARTIFACTS_BYTES", "0")
    monkeypatch.setenv("OPERATOR_RUNNER_ARTIFACTS_JOB_EVENTS", "false")
    args = build_parser().parse_args(["run", "--max-artifacts-runs=5"])
    assert (args.max_artifacts_bytes, args.max_artifacts_runs) == (0, 5)
    assert args.artifacts_job_events is False
