"""The work queue between the watches and the reconcilers.

Semantics of client-go's workqueue, which controller-runtime (and so operator-sdk) uses:

- one entry per key: adding a key that is already waiting merges the two (the earlier due
  time wins);
- a key being processed is never handed out twice; if it is added meanwhile, it is marked dirty
  and handed out again once `done` is called, so events that arrive during a run collapse into
  exactly one follow-up run;
- `add(key, delay)` schedules a key for later (periodic resync, backoff, requeue_after).

Keys are served in the order they became due (ties: the order they were added). A key keeps
its place: a resync or another event for a key already waiting never moves it back, and a key
that was added again during its run is handed out again as due since then, not since its run
ended. So with a backlog no key waits behind keys that became due after it: none is starved,
however long the backlog stays. How long keys waited is reported (`on_wait`, and
`longest_wait` for the one waiting longest now): the metrics show a backlog that does not drain.

Pure asyncio, no I/O; the clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        on_wait: Callable[[float], None] | None = None,
    ) -> None:
        self._clock = clock
        self._on_wait = on_wait  # called with how long each key handed out waited, once due
        self._heap: list[tuple[float, int, K]] = []
        self._due: dict[K, float] = {}  # waiting keys -> due time (the heap may hold stale rows)
        self._processing: set[K] = set()
        self._dirty: dict[K, float] = {}  # processing keys added again -> due time
        self._seq = itertools.count()
        self._changed = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        """Keys waiting (due or not), not counting those being processed."""
        return len(self._due)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def due(self) -> int:
        """Keys waiting that are due now (client-go's workqueue depth); the rest wait for later."""
        now = self._clock()
        return sum(1 for due in self._due.values() if due <= now)

    def longest_wait(self) -> float:
        """How long the key that has been due the longest has waited (0 when none is due)."""
        now = self._clock()
        return max((now - due for due in self._due.values() if due <= now), default=0.0)

    def add(self, key: K, delay: float = 0.0) -> None:
        self._add_at(key, self._clock() + max(delay, 0.0))

    def _add_at(self, key: K, due: float) -> None:
        if self._closed:
            return
        if key in self._processing:
            self._dirty[key] = min(due, self._dirty.get(key, due))
            return
        current = self._due.get(key)
        if current is not None and current <= due:
            return
        self._due[key] = due
        heapq.heappush(self._heap, (due, next(self._seq), key))
        self._changed.set()

    def forget(self, key: K) -> None:
        """Drop a waiting key (the object is gone); a run in progress is not affected."""
        self._due.pop(key, None)
        self._dirty.pop(key, None)

    async def get(self) -> K | None:
        """The next due key, now marked as processing; None once the queue is closed."""
        while not self._closed:
            key, wait = self._pop_due()
            if key is not None:
                self._processing.add(key)
                return key
            self._changed.clear()
            # asyncio.timeout, not wait_for: no hidden task per wait (kopf waits for those)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()
        return None

    def done(self, key: K) -> None:
        self._processing.discard(key)
        due = self._dirty.pop(key, None)
        if due is not None:
            self._add_at(key, due)  # due since it was added, not since the run ended
        else:
            self._changed.set()  # another worker may wait for nothing but a wake-up

    def close(self) -> None:
        self._closed = True
        self._changed.set()

    def _pop_due(self) -> tuple[K | None, float | None]:
        now = self._clock()
        while self._heap:
            due, _, key = self._heap[0]
            if self._due.get(key) != due:  # stale row: merged, forgotten or handed out
                heapq.heappop(self._heap)
                continue
            if due > now:
                return None, due - now
            heapq.heappop(self._heap)
            del self._due[key]
            if self._on_wait is not None:
                self._on_wait(now - due)
            return key, None
        return None, None
