"""Private temporary folders that a killed operator does not leave behind for good.

The operator keeps per-run kubeconfigs, the warm executors' sockets and its credentials' files
in folders under the temp dir, and removes them when it stops. A SIGKILL (OOM, `kill -9`, a
node's eviction without grace) leaves them, with tokens or keys inside. So each folder's name
carries its owner: `<prefix><pid>-<start time>-<random>`; the next operator to make a folder of
that prefix removes those whose process is gone (same user only, and never one of a process
that is still running, even one that reused the PID: its start time differs).
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import tempfile
from pathlib import Path

log = logging.getLogger("runner.tempdirs")


def process_start(pid: int) -> str | None:
    """When process `pid` started (clock ticks since boot, from /proc), None if it is gone.

    "0" where /proc is not there (not Linux): then the PID alone tells."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except FileNotFoundError:
        if Path("/proc/self/stat").exists():
            return None
        return "0" if _pid_exists(pid) else None
    except OSError:
        return None
    # comm (field 2) may hold spaces and parentheses: the fields after its last ')' are fixed
    fields = stat[stat.rfind(")") + 2 :].split()
    return fields[19] if len(fields) > 19 else None  # field 22: starttime


def _pid_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def _owner_tag(pid: int) -> str:
    return f"{pid}-{process_start(pid) or '0'}-"


def _pattern(prefix: str) -> re.Pattern[str]:
    return re.compile(re.escape(prefix) + r"(\d+)-(\d+)-[^/]+$")


def owner_alive(name: str, prefix: str) -> bool | None:
    """Whether the process that made folder `name` still runs; None if the name is not ours."""
    match = _pattern(prefix).match(name)
    if not match:
        return None
    pid, start = int(match.group(1)), match.group(2)
    now = process_start(pid)
    return now is not None and (start == "0" or now == "0" or now == start)


def remove_leftovers(prefix: str, parent: Path | None = None) -> list[Path]:
    """Remove the folders `<prefix><pid>-...` in `parent` (the temp dir) whose process is
    gone and that belong to this user; the paths removed."""
    parent = parent or Path(tempfile.gettempdir())
    removed = []
    try:
        entries = list(os.scandir(parent))
    except OSError:
        return []
    uid = os.getuid()
    for entry in entries:
        if not entry.name.startswith(prefix):
            continue
        try:
            if not entry.is_dir(follow_symlinks=False) or entry.stat().st_uid != uid:
                continue
        except OSError:
            continue
        if owner_alive(entry.name, prefix) is False:
            shutil.rmtree(entry.path, ignore_errors=True)
            removed.append(Path(entry.path))
    if removed:
        log.info(
            "removed %d folder(s) %s* left by operator processes that are gone",
            len(removed),
            parent / prefix,
        )
    return removed


def private_dir(prefix: str, parent: Path | None = None) -> Path:
    """A new folder (mode 0700) `<prefix><pid>-<start>-<random>`, after removing the ones of
    `prefix` that processes which are gone left behind."""
    remove_leftovers(prefix, parent)
    path = Path(tempfile.mkdtemp(prefix=prefix + _owner_tag(os.getpid()), dir=parent))
    os.chmod(path, 0o700)
    return path
