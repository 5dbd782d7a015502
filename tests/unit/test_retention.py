"""What stays of the runs: the per-CR rotation with the last failed run kept, the global cap."""

from __future__ import annotations

import os
from pathlib import Path

from runner.ansible.artifacts import FAILED, LATEST, finish_run

# -- a CR's own rotation: the last failed run ----------------------------------------------


def make_run(private: Path, ident: str, size: int = 10) -> Path:
    run = private / "artifacts" / ident
    (run / "job_events").mkdir(parents=True)
    (run / "stdout").write_text("x" * size)
    return run


def test_the_last_failed_run_is_kept_until_a_run_succeeds(tmp_path: Path) -> None:
    runs = tmp_path / "artifacts"
    make_run(tmp_path, "001")
    finish_run(tmp_path, "001", keep=2, failed=True)
    for ident in ("002", "003", "004"):
        make_run(tmp_path, ident)
        finish_run(tmp_path, ident, keep=2, failed=ident != "004")
        if ident == "003":  # 003 failed after 002: it is the last failed one now
            assert os.readlink(runs / FAILED) == "003"
    # 004 succeeded: the pointer went, and 003 is an ordinary run of the two kept
    assert not (runs / FAILED).is_symlink()
    assert sorted(p.name for p in runs.iterdir()) == ["003", "004", LATEST]


def test_a_failed_run_outlives_the_rotation_of_later_runs(tmp_path: Path) -> None:
    runs = tmp_path / "artifacts"
    make_run(tmp_path, "001")
    finish_run(tmp_path, "001", keep=2, failed=True)
    for ident in ("002", "003", "004", "005"):
        make_run(tmp_path, ident)
        finish_run(tmp_path, ident, keep=2, failed=None)  # cancelled: neither
    assert os.readlink(runs / FAILED) == "001"
    assert sorted(p.name for p in runs.iterdir()) == ["001", "004", "005", FAILED, LATEST]
