"""How many CPUs and how much memory this process may really use (affinity and cgroups).

``os.cpu_count()`` counts the host's CPUs, not what a container is allowed to use. This module
reads the CPU affinity and the cgroup (v2 or v1) limits of this process's cgroup and of its
ancestors, where the tightest limit wins. Reading those files is its only I/O; every path is
injectable so tests can use fake cgroup trees. Unreadable or malformed files mean "no limit".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

DEFAULT_CGROUP_ROOT = Path("/sys/fs/cgroup")
DEFAULT_PROC_SELF_CGROUP = Path("/proc/self/cgroup")

#: cgroup v1 reports "no memory limit" as a huge number (about 2**63, page aligned).
V1_UNLIMITED_MEMORY_THRESHOLD = 2**62

_V2_DEFAULT_PERIOD = 100_000


@dataclass(frozen=True)
class _CgroupEntry:
    """One line of ``/proc/self/cgroup``: ``hierarchy-id:controllers:path``."""

    hierarchy: str
    controllers: tuple[str, ...]
    path: str


def _read_text(path: Path) -> str | None:
    """Return the stripped content of ``path``, or None if it cannot be read."""
    try:
        return path.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return None


def _read_int(path: Path) -> int | None:
    """Return the integer in ``path``, or None if it cannot be read or parsed."""
    text = _read_text(path)
    if text is None:
        return None
    try:
        return int(text)
    except ValueError:
        return None


def _parse_proc_cgroup(proc_self_cgroup: Path) -> list[_CgroupEntry]:
    """Parse ``/proc/self/cgroup``; an unreadable file gives no entries."""
    text = _read_text(proc_self_cgroup)
    if text is None:
        return []
    entries = []
    for line in text.splitlines():
        parts = line.split(":", 2)
        if len(parts) == 3:
            controllers = tuple(c for c in parts[1].split(",") if c)
            entries.append(_CgroupEntry(parts[0], controllers, parts[2]))
    return entries


def _walk_up(mount: Path, cgroup_path: str) -> Iterator[Path]:
    """Yield the directory of ``cgroup_path`` under ``mount`` and its ancestors up to ``mount``.

    If that directory does not exist (a container that sees the host's cgroup path but has its
    own cgroup mounted at ``mount``), or the path is suspicious, only ``mount`` is yielded.
    """
    parts = [p for p in cgroup_path.split("/") if p]
    start = mount.joinpath(*parts)
    if ".." in parts or not start.is_dir():
        start = mount
    yield start
    current = start
    while current != mount and mount in current.parents:
        current = current.parent
        yield current


def _v2_dirs(cgroup_root: Path, entries: list[_CgroupEntry]) -> list[Path]:
    """Return the cgroup v2 directories that bound this process (none if v2 is not mounted)."""
    if not (cgroup_root / "cgroup.controllers").is_file():
        return []
    paths = [e.path for e in entries if e.hierarchy == "0" and not e.controllers]
    return list(_walk_up(cgroup_root, paths[0] if paths else "/"))


def _v1_dirs(cgroup_root: Path, entries: list[_CgroupEntry], controller: str) -> list[Path]:
    """Return the cgroup v1 directories of ``controller`` that bound this process."""
    for entry in entries:
        if controller not in entry.controllers:
            continue
        for name in (",".join(entry.controllers), controller):
            mount = cgroup_root / name
            if mount.is_dir():
                return list(_walk_up(mount, entry.path))
    return []


def _ceil_div(numerator: int, denominator: int) -> int:
    """Return ``ceil(numerator / denominator)`` for positive integers, exactly."""
    return -(-numerator // denominator)


def _v2_cpu_limit(directory: Path) -> int | None:
    """Return the CPUs allowed by ``cpu.max`` in ``directory`` (rounded up), None if unlimited."""
    text = _read_text(directory / "cpu.max")
    if text is None:
        return None
    fields = text.split()
    if not fields or fields[0] == "max":
        return None
    try:
        quota = int(fields[0])
        period = int(fields[1]) if len(fields) > 1 else _V2_DEFAULT_PERIOD
    except ValueError:
        return None
    return _ceil_div(quota, period) if quota > 0 and period > 0 else None


def _v1_cpu_limit(directory: Path) -> int | None:
    """Return the CPUs allowed by ``cpu.cfs_quota_us`` (rounded up), None if unlimited (-1)."""
    quota = _read_int(directory / "cpu.cfs_quota_us")
    period = _read_int(directory / "cpu.cfs_period_us")
    if quota is None or period is None or quota <= 0 or period <= 0:
        return None
    return _ceil_div(quota, period)


def _tightest(values: Iterable[int | None]) -> int | None:
    """Return the smallest of the known ``values``, or None if none is known."""
    known = [v for v in values if v is not None]
    return min(known) if known else None


def cgroup_cpu_limit(
    *,
    cgroup_root: Path = DEFAULT_CGROUP_ROOT,
    proc_self_cgroup: Path = DEFAULT_PROC_SELF_CGROUP,
) -> int | None:
    """Return the CPU quota of this process's cgroups, rounded up to whole CPUs, or None."""
    entries = _parse_proc_cgroup(proc_self_cgroup)
    v2 = (_v2_cpu_limit(d) for d in _v2_dirs(cgroup_root, entries))
    v1 = (_v1_cpu_limit(d) for d in _v1_dirs(cgroup_root, entries, "cpu"))
    return _tightest([*v2, *v1])


def _default_affinity() -> set[int]:
    """Return the CPUs this process may run on (all CPUs where affinity is not supported)."""
    if hasattr(os, "sched_getaffinity"):
        return os.sched_getaffinity(0)
    return set(range(os.cpu_count() or 1))


def usable_cpus(
    *,
    cgroup_root: Path = DEFAULT_CGROUP_ROOT,
    affinity: Callable[[], set[int]] | None = None,
    proc_self_cgroup: Path = DEFAULT_PROC_SELF_CGROUP,
) -> int:
    """Return how many CPUs this process may really use; never less than 1.

    That is the number of CPUs in its affinity mask (``affinity()``, by default
    ``os.sched_getaffinity(0)``), lowered to the cgroup CPU quota rounded up: cgroup v2
    ``cpu.max`` or v1 ``cpu.cfs_quota_us / cpu.cfs_period_us`` of this process's cgroup (from
    ``proc_self_cgroup``) and its ancestors, the tightest one winning.
    """
    cpus = len((affinity or _default_affinity)())
    quota = cgroup_cpu_limit(cgroup_root=cgroup_root, proc_self_cgroup=proc_self_cgroup)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)


def _v2_memory_limit(directory: Path) -> int | None:
    """Return ``memory.max`` of ``directory`` in bytes, None if unlimited or unknown."""
    text = _read_text(directory / "memory.max")
    if text is None or text == "max":
        return None
    try:
        value = int(text)
    except ValueError:
        return None
    return value if value >= 0 else None


def _v1_memory_limit(directory: Path) -> int | None:
    """Return ``memory.limit_in_bytes`` of ``directory``, None if huge (unlimited) or unknown."""
    value = _read_int(directory / "memory.limit_in_bytes")
    if value is None or value < 0 or value >= V1_UNLIMITED_MEMORY_THRESHOLD:
        return None
    return value


def memory_limit_bytes(
    *,
    cgroup_root: Path = DEFAULT_CGROUP_ROOT,
    proc_self_cgroup: Path = DEFAULT_PROC_SELF_CGROUP,
) -> int | None:
    """Return the memory limit of this process's cgroups in bytes, or None if unlimited.

    Reads cgroup v2 ``memory.max`` or v1 ``memory.limit_in_bytes`` of this process's cgroup
    and its ancestors; the tightest one wins. v1 values of at least
    :data:`V1_UNLIMITED_MEMORY_THRESHOLD` mean unlimited.
    """
    entries = _parse_proc_cgroup(proc_self_cgroup)
    v2 = (_v2_memory_limit(d) for d in _v2_dirs(cgroup_root, entries))
    v1 = (_v1_memory_limit(d) for d in _v1_dirs(cgroup_root, entries, "memory"))
    return _tightest([*v2, *v1])
