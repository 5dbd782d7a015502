"""runner.util.tempdirs: folders named after their process, removed once that process is gone."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from runner.util import tempdirs

PREFIX = "operator-runner-test-"


def _gone_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait()
    return proc.pid


def test_a_new_folder_names_its_process_and_is_private(tmp_path: Path) -> None:
    path = tempdirs.private_dir(PREFIX, tmp_path)
    assert path.name.startswith(f"{PREFIX}{os.getpid()}-{tempdirs.process_start(os.getpid())}-")
    assert path.stat().st_mode & 0o777 == 0o700
    assert tempdirs.owner_alive(path.name, PREFIX) is True


def test_folders_of_processes_that_are_gone_are_removed_others_kept(tmp_path: Path) -> None:
    mine = tempdirs.private_dir(PREFIX, tmp_path)
    gone = tmp_path / f"{PREFIX}{_gone_pid()}-12345-abc"
    reused = tmp_path / f"{PREFIX}{os.getpid()}-1-abc"  # our PID, but another start time
    unknown = tmp_path / f"{PREFIX}abcdef"  # not in our format (an older version's): kept
    other = tmp_path / f"operator-runner-other-{_gone_pid()}-1-abc"
    for folder in (gone, reused, unknown, other):
        folder.mkdir()
        (folder / "kubeconfig.json").write_text("{}")
    removed = tempdirs.remove_leftovers(PREFIX, tmp_path)
    assert sorted(removed) == sorted([gone, reused])
    assert mine.is_dir() and unknown.is_dir() and other.is_dir()
    assert not gone.exists() and not reused.exists()


def test_making_a_folder_removes_the_leftovers(tmp_path: Path) -> None:
    gone = tmp_path / f"{PREFIX}{_gone_pid()}-12345-abc"
    gone.mkdir()
    tempdirs.private_dir(PREFIX, tmp_path)
    assert not gone.exists()


def test_process_start_of_a_gone_process_is_none() -> None:
    assert tempdirs.process_start(_gone_pid()) is None
    assert tempdirs.process_start(os.getpid())
