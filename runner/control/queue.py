"""The work queue between the watches and the reconcilers.

Semantics of client-go's workqueue, which controller-runtime (and so operator-sdk) uses:

- one entry per key: adding a key that is already waiting merges the two (the earlier due
  time wins);
- a key being processed is never handed out twice; if it is added meanwhile, it is marked dirty
  and handed out again once `done` is called, so events that arrive during a run collapse into
  exactly one follow-up run;
- `add(key, delay)` schedules a key for later (periodic resync, backoff, requeue_after).

Two lanes (fairness, what operator-sdk lacks: its users see new CRs wait hours behind periodic
resyncs). `Lane.EVENT` holds what someone is waiting for: a create, a spec change, a delete, a
dependent's change, a role's `requeue_after`. `Lane.BACKGROUND` holds the housekeeping: periodic
resyncs, the initial listing of CRs already there at start-up, retries after a failure. A due
event key is handed out before a due background key (except that after `EVENT_BURST` of them in a
row the background lane gets one turn, so a steady stream of events cannot starve it), and at
most `background_limit` background keys are processed at once, so with several workers one stays
free for events however many resyncs fall due. A key is in one lane at a time; adding it to the
event lane while it waits in the background lane moves it there.

Within a lane keys are served in the order they became due (ties: the order they were added).
A key keeps its place: a resync or another event for a key already waiting never moves it back,
and a key that was added again during its run is handed out again as due since then, not since
its run ended. So with a backlog no key waits behind keys of its lane that became due after it,
however long the backlog stays; background keys wait only while events are due. How long keys
waited is reported (`on_wait`, and `longest_wait` for the one waiting longest now): the metrics
show a backlog that does not drain.

Pure asyncio, no I/O; the clock is injectable for tests.
"""

from __future__ import annotations

import asyncio
import contextlib
import heapq
import itertools
import time
from collections.abc import Callable, Hashable
from enum import Enum
from typing import Generic, NamedTuple, TypeVar

K = TypeVar("K", bound=Hashable)


class Lane(Enum):
    EVENT = "event"  # first: creates, changes, deletes, dependents, requeue_after
    BACKGROUND = "background"  # after: periodic resyncs, the initial listing, retries


#: While both lanes have due keys, one background key is handed out after this many event keys:
#: a steady stream of events (CRs that requeue themselves) must not starve resyncs for good.
EVENT_BURST = 4


class _Slot(NamedTuple):
    due: float
    lane: Lane


def _merge(current: _Slot | None, new: _Slot) -> _Slot:
    """One entry per key: the earlier due time, and the event lane if either is in it."""
    if current is None:
        return new
    lane = Lane.EVENT if Lane.EVENT in (current.lane, new.lane) else Lane.BACKGROUND
    return _Slot(min(current.due, new.due), lane)


class WorkQueue(Generic[K]):
    def __init__(
        self,
        clock: Callable[[], float] = time.monotonic,
        on_wait: Callable[[float], None] | None = None,
        background_limit: int | None = None,
    ) -> None:
        if background_limit is not None and background_limit < 1:
            raise ValueError(f"background_limit must be >= 1, not {background_limit}")
        self._clock = clock
        self._on_wait = on_wait  # called with how long each key handed out waited, once due
        self._background_limit = background_limit  # None: no limit
        self._heaps: dict[Lane, list[tuple[float, int, K]]] = {lane: [] for lane in Lane}
        self._due: dict[K, _Slot] = {}  # waiting keys (the heaps may hold stale rows)
        self._processing: dict[K, Lane] = {}
        self._dirty: dict[K, _Slot] = {}  # processing keys added again
        self._seq = itertools.count()
        self._events_in_a_row = 0  # event keys handed out while a background key was due
        self._changed = asyncio.Event()
        self._closed = False

    def __len__(self) -> int:
        """Keys waiting (due or not), not counting those being processed."""
        return len(self._due)

    @property
    def processing(self) -> int:
        return len(self._processing)

    def due(self, lane: Lane | None = None) -> int:
        """Keys waiting that are due now (client-go's workqueue depth), of `lane` or of both."""
        now = self._clock()
        return sum(
            1 for slot in self._due.values() if slot.due <= now and lane in (None, slot.lane)
        )

    def longest_wait(self) -> float:
        """How long the key that has been due the longest has waited (0 when none is due)."""
        now = self._clock()
        return max((now - slot.due for slot in self._due.values() if slot.due <= now), default=0.0)

    def in_progress(self, key: K) -> bool:
        """True while `key` is handed out and not yet `done`."""
        return key in self._processing

    def lane_of(self, key: K) -> Lane | None:
        """The lane `key` waits in (None when it is not waiting)."""
        slot = self._due.get(key)
        return None if slot is None else slot.lane

    def add(self, key: K, delay: float = 0.0, lane: Lane = Lane.EVENT) -> None:
        self._add_at(key, _Slot(self._clock() + max(delay, 0.0), lane))

    def _add_at(self, key: K, slot: _Slot) -> None:
        if self._closed:
            return
        if key in self._processing:
            self._dirty[key] = _merge(self._dirty.get(key), slot)
            return
        current = self._due.get(key)
        merged = _merge(current, slot)
        if merged == current:
            return
        self._due[key] = merged
        heapq.heappush(self._heaps[merged.lane], (merged.due, next(self._seq), key))
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
                return key
            self._changed.clear()
            # asyncio.timeout, not wait_for: no hidden task per wait (kopf waits for those)
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._changed.wait()
        return None

    def done(self, key: K) -> None:
        self._processing.pop(key, None)
        slot = self._dirty.pop(key, None)
        if slot is not None:
            self._add_at(key, slot)  # due since it was added, not since the run ended
        self._changed.set()  # a background slot may be free: a worker may wait for that only

    def close(self) -> None:
        self._closed = True
        self._changed.set()

    def _background_full(self) -> bool:
        if self._background_limit is None:
            return False
        busy = sum(1 for lane in self._processing.values() if lane is Lane.BACKGROUND)
        return busy >= self._background_limit

    def _head(self, lane: Lane) -> tuple[float, K] | None:
        """The first live row of `lane` (stale rows dropped on the way), due or not."""
        heap = self._heaps[lane]
        while heap:
            due, _, key = heap[0]
            if self._due.get(key) == (due, lane):
                return due, key
            heapq.heappop(heap)  # stale: merged, moved, forgotten or handed out
        return None

    def _pop_due(self) -> tuple[K | None, float | None]:
        """The next due key (events first), now processing; else how long until one is due
        (None: nothing waits, or only background keys while their limit is reached)."""
        now = self._clock()
        event = self._head(Lane.EVENT)
        background = None if self._background_full() else self._head(Lane.BACKGROUND)
        event_due = event is not None and event[0] <= now
        background_due = background is not None and background[0] <= now
        if event_due and background_due and self._events_in_a_row >= EVENT_BURST:
            event_due = False  # the background lane's turn: it is never starved for good
        if event_due:
            self._events_in_a_row = self._events_in_a_row + 1 if background_due else 0
            return self._take(Lane.EVENT, now), None
        if background_due:
            self._events_in_a_row = 0
            return self._take(Lane.BACKGROUND, now), None
        waits = [head[0] - now for head in (event, background) if head is not None]
        return None, min(waits, default=None)

    def _take(self, lane: Lane, now: float) -> K:
        due, _, key = heapq.heappop(self._heaps[lane])
        del self._due[key]
        self._processing[key] = lane
        if self._on_wait is not None:
            self._on_wait(now - due)
        return key
