"""CPU, memory and Ansible runs of a process tree, read from /proc every 100 ms.

The tree is rooted at the launcher (bench/launch.py), a child subreaper, so that orphaned
grandchildren stay inside it. For one sample:

- CPU seconds = the launcher's cutime+cstime (descendants it reaped, with their own reaped
  children) + for every live descendant utime+stime+cutime+cstime (cutime/cstime hold the
  descendant's own reaped children). The launcher's own utime/stime are left out (measuring
  overhead). A child reaped between reading it and reading its parent would be missed for one
  sample, so the reported figure never goes down (running maximum).
- RSS = the sum of the RSS of the live descendants (shared pages count once per process, as
  `ps` shows them), also split into the operator's main process and everything under it.
- Ansible runs = distinct `ansible-playbook` processes (pid + start time) whose parent is not an
  `ansible-playbook` process (its forked workers). Runs are longer than the sampling interval.
"""

from __future__ import annotations

import contextlib
import os
import threading
import time
from dataclasses import dataclass, field

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")


@dataclass
class Proc:
    pid: int
    comm: str
    ppid: int
    utime: int
    stime: int
    cutime: int
    cstime: int
    start: int
    rss_pages: int


def read_proc(pid: int) -> Proc | None:
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            raw = f.read()
    except OSError:
        return None
    lpar, rpar = raw.index(b"("), raw.rindex(b")")
    comm = raw[lpar + 1 : rpar].decode(errors="replace")
    rest = raw[rpar + 2 :].split()
    # rest[0] = state (field 3); field n is rest[n - 3]
    return Proc(
        pid=pid,
        comm=comm,
        ppid=int(rest[1]),
        utime=int(rest[11]),
        stime=int(rest[12]),
        cutime=int(rest[13]),
        cstime=int(rest[14]),
        start=int(rest[19]),
        rss_pages=int(rest[21]),
    )


def all_procs() -> dict[int, Proc]:
    procs = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            p = read_proc(int(entry))
            if p is not None:
                procs[p.pid] = p
    return procs


def is_playbook(comm: str) -> bool:
    return comm.startswith("ansible-playboo")  # comm is cut at 15 characters


@dataclass
class Sample:
    t: float
    cpu: float  # seconds, whole tree (monotonic)
    cpu_main: float  # seconds, the operator's main process alone (utime+stime)
    rss: int  # bytes, whole tree
    rss_main: int  # bytes, the operator's main process
    runs: int  # ansible-playbook runs seen so far
    running: int  # ansible-playbook runs alive now
    nprocs: int  # processes in the tree (the launcher not counted)


@dataclass
class TreeSampler:
    """Samples the tree under `root` (the launcher) in a thread; `main` is the operator's pid."""

    root: int
    interval: float = 0.1
    samples_kept: int = 200_000
    peak_rss: int = 0
    peak_rss_main: int = 0
    last: Sample | None = None
    _seen_runs: set[tuple[int, int]] = field(default_factory=set)
    _stop: threading.Event = field(default_factory=threading.Event)
    _lock: threading.Lock = field(default_factory=threading.Lock)
    _cpu_max: float = 0.0
    history: list[Sample] = field(default_factory=list)

    def start(self) -> None:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="proctree", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            with contextlib.suppress(Exception):  # a sampler must never take the benchmark down
                self.sample()

    def sample(self) -> Sample | None:
        procs = all_procs()
        root = procs.get(self.root)
        if root is None:
            return self.last
        children: dict[int, list[Proc]] = {}
        for p in procs.values():
            children.setdefault(p.ppid, []).append(p)
        ticks = root.cutime + root.cstime
        rss = 0
        main_ticks, main_rss = 0, 0
        running = 0
        count = 0
        direct = children.get(self.root, [])
        stack = list(direct)
        while stack:
            p = stack.pop()
            count += 1
            ticks += p.utime + p.stime + p.cutime + p.cstime
            rss += p.rss_pages
            if is_playbook(p.comm):
                parent = procs.get(p.ppid)
                if parent is None or not is_playbook(parent.comm):
                    running += 1
                    with self._lock:
                        self._seen_runs.add((p.pid, p.start))
            stack.extend(children.get(p.pid, []))
        if direct:
            main = min(direct, key=lambda p: p.start)
            main_ticks, main_rss = main.utime + main.stime, main.rss_pages
        with self._lock:
            self._cpu_max = max(self._cpu_max, ticks / CLK_TCK)
            s = Sample(
                t=time.monotonic(),
                cpu=self._cpu_max,
                cpu_main=main_ticks / CLK_TCK,
                rss=rss * PAGE,
                rss_main=main_rss * PAGE,
                runs=len(self._seen_runs),
                running=running,
                nprocs=count,
            )
            self.peak_rss = max(self.peak_rss, s.rss)
            self.peak_rss_main = max(self.peak_rss_main, s.rss_main)
            self.last = s
            if len(self.history) < self.samples_kept:
                self.history.append(s)
        return s

    def now(self) -> Sample:
        """A fresh sample (taken now, not the last periodic one)."""
        s = self.sample()
        assert s is not None, "the launcher is gone"
        return s

    def pss(self) -> tuple[int, int]:
        """Proportional set size (bytes) of the tree and of the operator's main process, now.

        RSS counts a page shared by N processes N times (forked workers, fork servers); PSS
        counts 1/N of it in each. Read from smaps_rollup: too slow for the 100 ms loop, so only
        taken at the idle measurements."""
        procs = all_procs()
        children: dict[int, list[Proc]] = {}
        for p in procs.values():
            children.setdefault(p.ppid, []).append(p)
        direct = children.get(self.root, [])
        main = min(direct, key=lambda p: p.start).pid if direct else -1
        total = main_pss = 0
        stack = list(direct)
        while stack:
            p = stack.pop()
            stack.extend(children.get(p.pid, []))
            try:
                with open(f"/proc/{p.pid}/smaps_rollup", encoding="ascii") as f:
                    for line in f:
                        if line.startswith("Pss:"):
                            kib = int(line.split()[1]) * 1024
                            total += kib
                            if p.pid == main:
                                main_pss = kib
                            break
            except OSError:
                continue
        return total, main_pss

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_rss = self.last.rss if self.last else 0
            self.peak_rss_main = self.last.rss_main if self.last else 0

    def mean_rss(self, since: float) -> tuple[float, float]:
        with self._lock:
            window = [s for s in self.history if s.t >= since]
        if not window:
            return 0.0, 0.0
        return (
            sum(s.rss for s in window) / len(window),
            sum(s.rss_main for s in window) / len(window),
        )
