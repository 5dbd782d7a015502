"""What stays of the runs across all CRs: a global cap in bytes and in runs, and no job events.

Each CR keeps at most `maxRunnerArtifacts` runs (artifacts.finish_run); with many CRs that is
still unbounded, and ansible-runner's `job_events/` (a JSON file per event) is most of each run.
So, after every run, the runs' folders under the artifacts root (`<CR's folder>/artifacts/<id>`,
whatever the CR) are counted and measured, and while there are more than `max_runs` or they
take more than `max_bytes`, the run that finished first goes. Never removed: what a CR's
`artifacts/latest` or `artifacts/first-failed` points at, and a run still being written (this
process holds the root alone: artifacts.claim). 0 switches a cap off.

`job_events` False keeps no job events: the runs' event handler answers False, which is
ansible-runner's public way (`event_handler`: "return True to keep the event") to not write an
event's file; the runner still sees every event (results, logs, metrics). ansible-runner's
`omit_event_data` settings would empty `event_data`, which the runner reads, so they are not used.

A finished run's folder does not change: its size is measured once (by its path and mtime),
so a sweep of a root of 1,000 runs stats 1,000 folders and reads no file.
"""

from __future__ import annotations

import logging
import os
import shutil
import threading
from collections.abc import Collection, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from runner.ansible.artifacts import FAILED, LATEST, finish_run

log = logging.getLogger("runner.artifacts")

# Not CRs' folders: the root's own (.lock, .ansible-tmp) and the webhooks' runs (admission).
_NOT_CRS = frozenset({"admission", "reconcile"})


@dataclass(frozen=True)
class Caps:
    """What the operator keeps of its runs, across all CRs (0: no cap)."""

    max_bytes: int = 0
    max_runs: int = 0
    job_events: bool = True

    @property
    def capped(self) -> bool:
        return self.max_bytes > 0 or self.max_runs > 0


@dataclass(frozen=True)
class RunFolder:
    path: Path
    finished: float  # its mtime: artifacts.finish_run sets it when the run ends
    size: int  # bytes of its files


def select(
    runs: Sequence[RunFolder], kept: Collection[Path], max_bytes: int, max_runs: int
) -> list[RunFolder]:
    """The runs to remove, first finished first, until the rest is within `max_runs` runs and
    `max_bytes` bytes (0: no cap); the runs in `kept` are never chosen but count. When the
    kept runs alone are over a cap, every other one goes and the cap stays exceeded."""
    count = len(runs)
    total = sum(r.size for r in runs)
    chosen: list[RunFolder] = []
    for run in sorted(runs, key=lambda r: (r.finished, r.path.name)):
        if not ((max_runs and count > max_runs) or (max_bytes and total > max_bytes)):
            break
        if run.path in kept:
            continue
        chosen.append(run)
        count -= 1
        total -= run.size
    return chosen


def runs_dirs(root: Path) -> Iterator[Path]:
    """The `artifacts` folders of the CRs' folders under `root`."""
    stack = [root]
    while stack:
        folder = stack.pop()
        try:
            entries = [e for e in os.scandir(folder) if e.is_dir(follow_symlinks=False)]
        except OSError:
            continue
        if any(e.name == "artifacts" for e in entries):
            yield folder / "artifacts"
            continue  # a CR's folder: no CR below it
        for entry in entries:
            if entry.name.startswith(".") or (folder == root and entry.name in _NOT_CRS):
                continue
            stack.append(Path(entry.path))


def pointed(runs: Path) -> set[Path]:
    """The runs of a CR's `artifacts` folder that its `latest` and `first-failed` point at."""
    kept = set()
    for name in (LATEST, FAILED):
        try:
            kept.add(runs / os.readlink(runs / name))
        except OSError:
            continue
    return kept


def tree_size(path: Path) -> int:
    total = 0
    stack = [path]
    while stack:
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    stack.append(Path(entry.path))
                else:
                    total += entry.stat(follow_symlinks=False).st_size
            except OSError:
                continue
    return total


class Retention:
    """The global cap of the runs under `root` and the job events switch (see the module)."""

    def __init__(self, root: Path | None = None, caps: Caps | None = None) -> None:
        self.root = root
        self.caps = caps or Caps()
        self._writing: set[Path] = set()
        self._lock = threading.Lock()  # the runs being written; one sweep at a time
        self._sizes: dict[Path, tuple[int, int]] = {}  # run folder -> (mtime_ns, size)

    @property
    def job_events(self) -> bool:
        return self.caps.job_events

    @contextmanager
    def writing(self, folder: Path) -> Iterator[None]:
        """While a run writes `folder`: no sweep removes it."""
        with self._lock:
            self._writing.add(folder)
        try:
            yield
        finally:
            with self._lock:
                self._writing.discard(folder)

    def finished(self, private: Path, ident: str, keep: int, failed: bool | None) -> int:
        """A run ended: the CR's own rotation (artifacts.finish_run), then the global cap;
        how many runs the global cap removed. The rotation holds the lock: a sweep in the
        thread of another CR's run must not remove a folder it is looking at."""
        with self._lock:
            finish_run(private, ident, keep, failed)
        return self.sweep()

    def sweep(self) -> int:
        """Remove the runs over the caps, first finished first; how many went."""
        if self.root is None or not self.caps.capped:
            return 0
        with self._lock:
            runs, kept = self._scan(self.root)
            chosen = select(runs, kept | self._writing, self.caps.max_bytes, self.caps.max_runs)
            for run in chosen:
                shutil.rmtree(run.path, ignore_errors=True)
                self._sizes.pop(run.path, None)
        if chosen:
            log.debug("artifacts: removed %d runs over the global cap", len(chosen))
        return len(chosen)

    def _scan(self, root: Path) -> tuple[list[RunFolder], set[Path]]:
        runs: list[RunFolder] = []
        kept: set[Path] = set()
        seen: set[Path] = set()
        for runs_dir in runs_dirs(root):
            kept |= pointed(runs_dir)
            try:
                entries = list(os.scandir(runs_dir))
            except OSError:
                continue
            for entry in entries:
                if entry.name.startswith(".") or not entry.is_dir(follow_symlinks=False):
                    continue
                path = Path(entry.path)
                try:
                    mtime = entry.stat(follow_symlinks=False).st_mtime_ns
                except OSError:  # its CR was deleted meanwhile
                    continue
                known = self._sizes.get(path)
                if known is None or known[0] != mtime:
                    known = (mtime, tree_size(path))
                    self._sizes[path] = known
                seen.add(path)
                runs.append(RunFolder(path, mtime / 1e9, known[1]))
        for gone in self._sizes.keys() - seen:  # a CR removed, a rotation
            del self._sizes[gone]
        return runs, kept
