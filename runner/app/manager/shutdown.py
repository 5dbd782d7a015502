"""How the operator process stops.

- A signal (SIGTERM, SIGINT; `take_signals`): the workers stop taking keys at once, the runs in
  progress get the grace period (`--graceful-shutdown-timeout`), then the runs still going are
  cancelled (`begin_shutdown`, `drained`); kopf is told to stop meanwhile (`stop_flag`). The
  process is ended 2 s after the grace period at the latest, whatever still holds it up: that
  deadline is kept by a thread of its own (`deadline`), since by then the event loop may be
  blocked in a synchronous close or already gone (asyncio.run joins the threads the cancelled
  runs ran in before it returns).
- The right to run is gone (the leader's Lease, or a shard's, not renewed in time: `lose`): every
  run is cancelled and the workers stopped at once, kopf is told to stop, and the process exits
  1; if that takes longer than the margin before others may take over, it is ended with
  `os._exit(1)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import threading
from collections.abc import Callable

from runner.app.serving.health import Health
from runner.control.controller import Controller, drain

log = logging.getLogger("runner.production")

#: After the grace period, what cancelled runs, the Lease's release and the endpoints may take
#: before the process is ended anyway.
OVERDUE_AFTER_GRACE = 1.8


class Shutdown:
    """The stop of one operator process: its signals, the controllers' drain, its exit code."""

    def __init__(
        self, health: Health, cancel_runs: Callable[[], None], graceful_timeout: float = 30.0
    ) -> None:
        self.health = health
        self.graceful_timeout = graceful_timeout
        self.stop_flag = asyncio.Event()  # kopf's stop_flag; set on SIGTERM too
        self.exit_code = 0
        self.hard_exit: Callable[[float], None] = _hard_exit  # replaceable in tests
        self.overdue_exit: Callable[[float, int], None] = _overdue_exit  # replaceable in tests
        #: calls its function after that many seconds, whatever the event loop is doing
        #: (replaceable in tests that run on a fake clock)
        self.deadline: Callable[[float, Callable[[], None]], None] = _thread_deadline
        self._cancel_runs = cancel_runs
        self._controllers: list[Controller] = []
        self._stoppers: list[asyncio.Task[bool]] = []
        self._drain: asyncio.Task[bool] | None = None

    def track(self, controller: Controller) -> None:
        """Stop this controller with the others (at the signal, or at once when `lose`)."""
        self._controllers.append(controller)

    # -- signals ----------------------------------------------------------------------------

    def take_signals(self) -> None:
        """SIGTERM/SIGINT are ours. Call before standing by, and again once kopf has installed
        its own handlers (in kopf.spawn_tasks), so that the workers stop taking keys the moment
        the signal arrives, not once kopf's own shutdown is over."""
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.stop_flag.is_set():
            log.info("signal %s: already stopping", name)
            return
        busy = sum(c.busy for c in self._controllers)
        log.info(
            "signal %s: stopping: no new runs; %d running get up to %g s to finish",
            name,
            busy,
            self.graceful_timeout,
        )
        self.begin_shutdown()
        self.stop_flag.set()  # kopf's shutdown, meanwhile (its watches, its cleanup handlers)

    # -- no new runs, the grace period for those running, then out --------------------------

    def begin_shutdown(self) -> asyncio.Task[bool]:
        """Stop every worker taking keys now and give the runs in progress the grace period,
        once (the signal, kopf's cleanup and the manager all wait for the same drain). The
        process is gone 2 s after the grace period at the latest (`overdue_exit`)."""
        if self._drain is None:
            self.health.stopping()
            for controller in self._controllers:
                controller.stop_taking()
            self._drain = asyncio.get_running_loop().create_task(
                drain(self._controllers, self.graceful_timeout, self._cancel_runs, log),
                name="shutdown-drain",
            )
            late = self.graceful_timeout + OVERDUE_AFTER_GRACE
            self.deadline(late, lambda: self._overdue(late))
        return self._drain

    def _overdue(self, after: float) -> None:
        self.overdue_exit(after, self.exit_code)

    async def drained(self) -> bool:
        """Once the runs in progress ended (or were cancelled after the grace period)."""
        return await asyncio.shield(self.begin_shutdown())

    def stopping(self) -> None:
        """Shutdown began: not ready any more."""
        self.health.stopping()

    # -- the right to run is gone -----------------------------------------------------------

    def lose(self, reason: str, margin: float) -> None:
        """The right to run is gone (leadership, or a shard's Lease): cancel every run, stop,
        exit 1; within `margin` s (less 1 s), before others may take over, at the latest."""
        log.error("%s; stopping every reconcile now and exiting", reason)
        self.exit_code = 1
        self.health.lost()
        self._cancel_runs()
        for controller in self._controllers:
            self._stoppers.append(asyncio.create_task(controller.stop(0)))
        self.stop_flag.set()
        margin = max(1.0, margin - 1.0)
        self.deadline(margin, lambda: self.hard_exit(margin))

    async def stopped(self) -> None:
        """Once the controllers stopped after `lose` (at once: their runs were cancelled)."""
        if self._stoppers:
            await asyncio.gather(*self._stoppers, return_exceptions=True)


def _thread_deadline(after: float, fn: Callable[[], None]) -> None:
    """`fn` in `after` s on a daemon thread: it fires while the event loop is blocked, and
    while the interpreter joins other threads at exit; a process that ends first ends it too."""
    timer = threading.Timer(after, fn)
    timer.daemon = True
    timer.name = "shutdown-deadline"
    timer.start()


def _overdue_exit(after: float, code: int) -> None:
    log.warning("still not stopped %g s after shutdown began: exiting now", after)
    logging.shutdown()
    os._exit(code)


def _hard_exit(margin: float) -> None:
    log.critical("lost the Lease and still not stopped after %g s: exiting now", margin)
    logging.shutdown()
    os._exit(1)
