"""One fake clock for the unit tests, and an event loop that runs on it (virtual time).

`FakeClock` is monotonic seconds that move only when the test moves them (`clock.now += 5`),
and the wall time that goes with them (`clock.wall()`): pass it where the code takes a `clock`
(`time.monotonic`) and its `wall` where it takes a `now` (`datetime.now(UTC)`).

`run(main, clock)` runs a coroutine as `asyncio.run` does, on a loop whose time is the clock's:
whenever every task waits for a timer (`asyncio.sleep`, `wait_for`'s timeout, `call_later`),
the clock jumps to the next one at once. So a test that lets 30 s pass (`await
asyncio.sleep(30)`) takes microseconds, and what happens at which moment is exact and the same
on every run. Only timers jump: the loop still sees sockets and threads, but a thread's work
takes no virtual time (the loop does not wait for it before the next timer), so code under
`run` should wait on timers and in-memory fakes, not on real I/O.
"""

from __future__ import annotations

import asyncio
import selectors
from collections.abc import Coroutine
from datetime import UTC, datetime, timedelta
from typing import Any, TypeVar

T = TypeVar("T")

#: The wall time of a new clock (any fixed moment: runs are the same every time).
EPOCH = datetime(2030, 1, 2, 3, 4, 5, tzinfo=UTC)


class FakeClock:
    """Monotonic seconds (`clock()`, or `clock.now`) and the wall time that goes with them."""

    def __init__(self, start: float = 1000.0, wall_start: datetime = EPOCH) -> None:
        self.now = start
        self._start = start
        self._wall_start = wall_start

    def __call__(self) -> float:
        return self.now

    def wall(self) -> datetime:
        """The UTC time at `now`: `wall_start` moved on as far as the clock moved."""
        return self._wall_start + timedelta(seconds=self.now - self._start)


class _VirtualTimeSelector(selectors.DefaultSelector):
    """A real selector that, where the loop would block until its next timer and nothing is
    ready, moves the clock to that timer instead of waiting."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__()
        self._clock = clock

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:  # no timer at all: only a socket or a thread can wake the loop
            return super().select(None)
        self._clock.now += timeout
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose time is `clock`'s (see the module's docstring)."""

    def __init__(self, clock: FakeClock) -> None:
        super().__init__(_VirtualTimeSelector(clock))
        self.clock = clock

    def time(self) -> float:
        return self.clock.now

    async def shutdown_default_executor(self, timeout: float | None = None) -> None:
        """Joins the threads without a timeout: a virtual one would expire at once."""
        await super().shutdown_default_executor()


def run(main: Coroutine[Any, Any, T], clock: FakeClock | None = None) -> T:
    """`asyncio.run(main)` on virtual time: the loop's time is `clock` (a new one if not given)."""
    virtual = clock if clock is not None else FakeClock()
    with asyncio.Runner(loop_factory=lambda: VirtualTimeLoop(virtual)) as runner:
        return runner.run(main)
