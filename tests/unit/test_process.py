"""Tests of runner.app.process (limits.py, capacity.py) against fake cgroup v1 and v2 trees."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runner.app.process.limits import cgroup_cpu_limit, memory_limit_bytes, usable_cpus

V1_UNLIMITED = 9223372036854771712


def cpus(n: int) -> Callable[[], set[int]]:
    """Return a fake affinity function allowing ``n`` CPUs."""
    return lambda: set(range(n))


def write(path: Path, text: str) -> None:
    """Write ``text`` to ``path``, creating parent directories."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text + "\n")


class FakeHost:
    """A fake ``/sys/fs/cgroup`` and ``/proc/self/cgroup`` under a temporary directory."""

    def __init__(self, tmp_path: Path) -> None:
        self.root = tmp_path / "sys" / "fs" / "cgroup"
        self.root.mkdir(parents=True)
        self.proc = tmp_path / "proc" / "self" / "cgroup"

    def v2(self, cgroup: str) -> FakeHost:
        """Make the root a cgroup v2 mount and put this process in ``cgroup``."""
        write(self.root / "cgroup.controllers", "cpuset cpu io memory pids")
        write(self.proc, f"0::{cgroup}")
        (self.root / cgroup.lstrip("/")).mkdir(parents=True, exist_ok=True)
        return self

    def v1(self, cgroup: str, mount_cgroup: str | None = None) -> FakeHost:
        """Mount cpu,cpuacct and memory v1 hierarchies and put this process in ``cgroup``.

        The directories are created for ``mount_cgroup`` (default: ``cgroup``); a different
        value mimics a container that sees the host's path but has its own cgroup mounted.
        """
        write(
            self.proc,
            "\n".join(
                [
                    "12:pids:/whatever",
                    f"4:cpu,cpuacct:{cgroup}",
                    f"3:memory:{cgroup}",
                    "1:name=systemd:/init.scope",
                    "0::/init.scope",
                ]
            ),
        )
        for controller in ("cpu,cpuacct", "memory"):
            rel = (mount_cgroup if mount_cgroup is not None else cgroup).lstrip("/")
            (self.root / controller / rel).mkdir(parents=True, exist_ok=True)
        return self

    def usable(self, n: int) -> int:
        """Return ``usable_cpus`` for this fake host with ``n`` CPUs of affinity."""
        return usable_cpus(cgroup_root=self.root, affinity=cpus(n), proc_self_cgroup=self.proc)

    def memory(self) -> int | None:
        """Return ``memory_limit_bytes`` for this fake host."""
        return memory_limit_bytes(cgroup_root=self.root, proc_self_cgroup=self.proc)


@pytest.fixture
def host(tmp_path: Path) -> FakeHost:
    return FakeHost(tmp_path)


# ------------------------------------------------------------------------------ cgroup v2


@pytest.mark.parametrize(
    ("cpu_max", "expected"),
    [
        ("max 100000", 8),
        ("max", 8),
        ("200000 100000", 2),
        ("150000 100000", 2),
        ("250000 100000", 3),
        ("50000 100000", 1),
        ("1000 100000", 1),
        ("100000 100000", 1),
        ("400000", 4),  # period defaults to 100000
        ("2000000 100000", 8),  # quota above affinity: affinity wins
    ],
)
def test_v2_cpu_max(host: FakeHost, cpu_max: str, expected: int) -> None:
    host.v2("/kubepods/pod1/ctr")
    write(host.root / "kubepods/pod1/ctr/cpu.max", cpu_max)
    assert host.usable(8) == expected


def test_v2_tightest_ancestor_wins(host: FakeHost) -> None:
    host.v2("/kubepods/pod1/ctr")
    write(host.root / "kubepods/cpu.max", "max 100000")
    write(host.root / "kubepods/pod1/cpu.max", "300000 100000")
    write(host.root / "kubepods/pod1/ctr/cpu.max", "max 100000")
    assert host.usable(16) == 3
    write(host.root / "kubepods/cpu.max", "100000 100000")
    assert host.usable(16) == 1


def test_v2_child_tighter_than_parent(host: FakeHost) -> None:
    host.v2("/a/b")
    write(host.root / "a/cpu.max", "800000 100000")
    write(host.root / "a/b/cpu.max", "200000 100000")
    assert host.usable(16) == 2


def test_v2_sibling_limits_do_not_apply(host: FakeHost) -> None:
    host.v2("/a/b")
    write(host.root / "a/other/cpu.max", "100000 100000")
    write(host.root / "other/cpu.max", "100000 100000")
    assert host.usable(6) == 6


def test_v2_cgroup_namespace_root(host: FakeHost) -> None:
    # Inside a container with its own cgroup namespace: "0::/" and limits at the mount root.
    host.v2("/")
    write(host.root / "cpu.max", "150000 100000")
    assert host.usable(8) == 2


def test_v2_host_path_not_visible_falls_back_to_mount(host: FakeHost) -> None:
    host.v2("/")
    write(host.proc, "0::/system.slice/docker-abc.scope")
    write(host.root / "cpu.max", "100000 100000")
    assert host.usable(8) == 1


def test_v2_unreadable_proc_self_cgroup_reads_mount_root(host: FakeHost) -> None:
    host.v2("/")
    host.proc.unlink()
    write(host.root / "cpu.max", "200000 100000")
    assert host.usable(8) == 2


def test_v2_garbage_cpu_max_means_no_limit(host: FakeHost) -> None:
    host.v2("/a")
    write(host.root / "a/cpu.max", "lots 100000")
    assert host.usable(4) == 4
    write(host.root / "a/cpu.max", "100000 0")
    assert host.usable(4) == 4
    write(host.root / "a/cpu.max", "")
    assert host.usable(4) == 4


def test_v2_path_traversal_is_not_followed(host: FakeHost, tmp_path: Path) -> None:
    host.v2("/")
    write(host.proc, "0::/../../../outside")
    write(tmp_path / "outside" / "cpu.max", "100000 100000")
    assert host.usable(4) == 4


def test_v2_memory_max(host: FakeHost) -> None:
    host.v2("/a/b")
    assert host.memory() is None
    write(host.root / "a/b/memory.max", "max")
    assert host.memory() is None
    write(host.root / "a/memory.max", str(512 * 2**20))
    assert host.memory() == 512 * 2**20
    write(host.root / "a/b/memory.max", str(256 * 2**20))
    assert host.memory() == 256 * 2**20


# ------------------------------------------------------------------------------ cgroup v1


@pytest.mark.parametrize(
    ("quota", "period", "expected"),
    [
        ("-1", "100000", 8),
        ("200000", "100000", 2),
        ("50000", "100000", 1),
        ("250000", "100000", 3),
        ("150000", "100000", 2),
        ("50000", "0", 8),
    ],
)
def test_v1_cfs_quota(host: FakeHost, quota: str, period: str, expected: int) -> None:
    host.v1("/kubepods/pod1/ctr")
    write(host.root / "cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_quota_us", quota)
    write(host.root / "cpu,cpuacct/kubepods/pod1/ctr/cpu.cfs_period_us", period)
    assert host.usable(8) == expected


def test_v1_nested_tightest_wins(host: FakeHost) -> None:
    host.v1("/kubepods/pod1/ctr")
    base = host.root / "cpu,cpuacct"
    write(base / "kubepods/cpu.cfs_quota_us", "100000")
    write(base / "kubepods/cpu.cfs_period_us", "100000")
    write(base / "kubepods/pod1/ctr/cpu.cfs_quota_us", "-1")
    write(base / "kubepods/pod1/ctr/cpu.cfs_period_us", "100000")
    assert host.usable(8) == 1


def test_v1_mount_named_after_single_controller(host: FakeHost) -> None:
    # Only the "cpu" name of the co-mounted "cpu,cpuacct" hierarchy exists.
    write(host.proc, "4:cpu,cpuacct:/ctr")
    write(host.root / "cpu/ctr/cpu.cfs_quota_us", "300000")
    write(host.root / "cpu/ctr/cpu.cfs_period_us", "100000")
    assert host.usable(8) == 3


def test_v1_container_sees_host_path(host: FakeHost) -> None:
    host.v1("/kubepods/pod1/ctr", mount_cgroup="/")
    write(host.root / "cpu,cpuacct/cpu.cfs_quota_us", "200000")
    write(host.root / "cpu,cpuacct/cpu.cfs_period_us", "100000")
    assert host.usable(8) == 2


def test_v1_memory_limit(host: FakeHost) -> None:
    host.v1("/ctr")
    assert host.memory() is None
    write(host.root / "memory/ctr/memory.limit_in_bytes", str(V1_UNLIMITED))
    assert host.memory() is None
    write(host.root / "memory/ctr/memory.limit_in_bytes", str(2**30))
    assert host.memory() == 2**30
    write(host.root / "memory/memory.limit_in_bytes", str(2**29))
    assert host.memory() == 2**29


def test_v1_ignores_unified_hierarchy_without_controllers(host: FakeHost) -> None:
    # Hybrid mode: "0::/init.scope" is listed but the root is not a v2 mount.
    host.v1("/ctr")
    write(host.root / "init.scope/cpu.max", "100000 100000")
    assert host.usable(4) == 4


# ------------------------------------------------------------------------------ generic


def test_no_cgroups_at_all_uses_affinity(host: FakeHost) -> None:
    assert host.usable(5) == 5
    assert host.memory() is None
    assert cgroup_cpu_limit(cgroup_root=host.root, proc_self_cgroup=host.proc) is None


def test_never_below_one(host: FakeHost) -> None:
    assert host.usable(0) == 1


def test_affinity_limits_quota(host: FakeHost) -> None:
    host.v2("/a")
    write(host.root / "a/cpu.max", "800000 100000")
    assert host.usable(2) == 2


def test_cgroup_cpu_limit_reports_rounded_quota(host: FakeHost) -> None:
    host.v2("/a")
    write(host.root / "a/cpu.max", "250000 100000")
    assert cgroup_cpu_limit(cgroup_root=host.root, proc_self_cgroup=host.proc) == 3


def test_real_host_gives_a_sane_answer() -> None:
    assert usable_cpus() >= 1
    limit = memory_limit_bytes()
    assert limit is None or limit > 0


@pytest.mark.parametrize(
    ("cpus", "limit_mb", "expected"),
    [(4, None, 4), (8, 512, 2), (8, 256, 1), (2, 4096, 2), (8, 100, 1), (0, None, 1)],
)
def test_default_concurrency_respects_the_memory_limit(
    cpus: int, limit_mb: int | None, expected: int
) -> None:
    from runner.app.process.capacity import default_concurrency

    limit = None if limit_mb is None else limit_mb * 1024 * 1024
    assert default_concurrency(cpus, limit) == expected


@pytest.mark.parametrize(
    ("limit_mb", "expected"), [(None, None), (512, 2), (1024, 6), (256, 1), (100, 1)]
)
def test_run_slots_for_the_whole_operator(limit_mb: int | None, expected: int | None) -> None:
    from runner.app.process.capacity import run_slots

    limit = None if limit_mb is None else limit_mb * 1024 * 1024
    assert run_slots(limit) == expected
