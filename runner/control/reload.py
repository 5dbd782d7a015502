"""Live reload (`operator-runner run --watch-roles`): an edit of a role re-runs its CRs.

The files of each watch (runner/watches/sources.py: its role or playbook and what they include
from the project) are polled every `interval` s (mtime, size, the set of files; no new
dependency, no inotify). A change re-runs every CR of the watch, also the healthy ones, once
the files have been still for `settle` s (a burst of saves, an editor's write-and-rename, a
`git checkout`: one re-run), and at most once every `min_gap` s per watch.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

from runner.watches import Watch

log = logging.getLogger("runner.reload")

Snapshot = frozenset[tuple[str, int, int]]


class Rerunnable(Protocol):
    """A controller: its watch, and a way to re-run every CR of it (Controller.enqueue_all)."""

    watch: Watch

    def enqueue_all(self) -> int: ...


def snapshot(files: Iterable[Path]) -> Snapshot:
    entries = []
    for path in files:
        try:
            st = path.stat()
        except OSError:
            continue
        entries.append((str(path), st.st_mtime_ns, st.st_size))
    return frozenset(entries)


@dataclass
class _State:
    last: Snapshot
    changed_at: float | None = None  # a change not acted on yet, last seen then
    fired_at: float = float("-inf")


class RoleReloader:
    def __init__(
        self,
        controllers: Iterable[Rerunnable],
        files_of: Callable[[Watch], set[Path]],
        *,
        interval: float = 0.5,
        settle: float = 0.25,
        min_gap: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.controllers = list(controllers)
        self.files_of = files_of
        self.interval = interval
        self.settle = settle
        self.min_gap = min_gap
        self.clock = clock
        self._states = [_State(snapshot(files_of(c.watch))) for c in self.controllers]

    def poll(self) -> list[Rerunnable]:
        """One look at the files; re-run (and return) the controllers whose time has come."""
        now = self.clock()
        fired = []
        for controller, state in zip(self.controllers, self._states, strict=True):
            current = snapshot(self.files_of(controller.watch))
            if current != state.last:
                changed = sorted({p for p, *_ in current ^ state.last})
                state.last = current
                state.changed_at = now
                log.debug("changed: %s", ", ".join(changed))
                continue  # wait until the files are still
            if state.changed_at is None or now - state.changed_at < self.settle:
                continue
            if now - state.fired_at < self.min_gap:
                continue
            state.changed_at = None
            state.fired_at = now
            count = controller.enqueue_all()
            gvk = controller.watch.gvk
            log.info(
                "files of the %s role or playbook changed: re-running %d %s CR(s)",
                gvk.kind,
                count,
                gvk.kind,
            )
            fired.append(controller)
        return fired

    @property
    def pending(self) -> bool:
        return any(state.changed_at is not None for state in self._states)

    async def run(self) -> None:
        """Poll until cancelled; after a change, look again as soon as it may have settled."""
        while True:
            await asyncio.sleep(max(self.settle, 0.05) if self.pending else self.interval)
            try:
                self.poll()  # a few stat calls and small reads: cheap enough for the loop
            except Exception as err:  # a file vanishing mid-scan, say: try again next time
                log.debug("role files could not be read: %s", err)
