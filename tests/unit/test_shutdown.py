"""SIGTERM: the workers stop taking keys at once, running reconciles get the grace period,
and the process is gone soon after it (runner/app/manager/shutdown.py, on fakes)."""

from __future__ import annotations

import asyncio
import signal
import threading
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from runner.app.manager import shutdown as shutdown_module
from runner.app.manager.shutdown import Shutdown
from runner.app.serving.health import Health
from runner.control.controller import Controller
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.interface import Outcome
from runner.reconcile.reconciler import Reconciler
from runner.watches import GVK

RESOURCE = Resource("example.com", "v1", "things", "Thing", True)


@dataclass
class SlowReconciler:
    seconds: float
    started: list[str] = field(default_factory=list)
    finished: list[str] = field(default_factory=list)
    watch: Any = field(
        default_factory=lambda: type("W", (), {"gvk": GVK("example.com", "v1", "Thing")})()
    )

    async def reconcile(self, ref: ObjectRef) -> Outcome:
        self.started.append(ref.name)
        await asyncio.sleep(self.seconds)
        self.finished.append(ref.name)
        return Outcome()


def _shutdown(grace: float, cancelled: list[bool]) -> Shutdown:
    shutdown = Shutdown(Health(), lambda: cancelled.append(True), graceful_timeout=grace)
    shutdown.health.leading()
    return shutdown


async def _until(probe: Any, timeout: float = 5.0) -> None:
    async with asyncio.timeout(timeout):
        while not probe():
            await asyncio.sleep(0.01)


def test_no_run_starts_after_the_signal_and_running_ones_finish() -> None:
    async def go() -> None:
        cancelled: list[bool] = []
        shutdown = _shutdown(5.0, cancelled)
        overdue: list[tuple[float, int]] = []
        shutdown.overdue_exit = lambda after, code: overdue.append((after, code))
        reconciler = SlowReconciler(0.3)
        controller = Controller(cast(Reconciler, reconciler), 2)
        shutdown.track(controller)
        controller.start()
        for i in range(10):
            controller.enqueue(ObjectRef(RESOURCE, "ns", f"cr-{i}"))
        await _until(lambda: len(reconciler.started) == 2)

        shutdown._on_signal(signal.SIGTERM)
        assert shutdown.stop_flag.is_set(), "kopf is told to stop too"
        assert not shutdown.health.readiness()[0]
        assert await asyncio.wait_for(shutdown.drained(), 2) is True
        assert reconciler.started == ["cr-0", "cr-1"], "no run started after the signal"
        assert reconciler.finished == ["cr-0", "cr-1"], "the running ones finished"
        assert cancelled == [] and overdue == []
        shutdown._on_signal(signal.SIGTERM)  # a second signal changes nothing
        assert await shutdown.drained() is True
        await shutdown.stopped()

    asyncio.run(go())


def test_runs_longer_than_the_grace_period_are_cancelled_and_the_exit_is_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutdown_module, "OVERDUE_AFTER_GRACE", 0.2)

    async def go() -> None:
        cancelled: list[bool] = []
        shutdown = _shutdown(0.3, cancelled)
        overdue: list[tuple[float, int]] = []
        shutdown.overdue_exit = lambda after, code: overdue.append((after, code))
        reconciler = SlowReconciler(60)
        controller = Controller(cast(Reconciler, reconciler), 1)
        shutdown.track(controller)
        controller.start()
        controller.enqueue(ObjectRef(RESOURCE, "ns", "forever"))
        await _until(lambda: reconciler.started)

        loop = asyncio.get_running_loop()
        began = loop.time()
        shutdown._on_signal(signal.SIGTERM)
        assert await asyncio.wait_for(shutdown.drained(), 2) is False
        assert 0.3 <= loop.time() - began < 1.0, "the grace period counts from the signal"
        assert cancelled == [True], "the runs still going were cancelled"
        # whatever still holds the process up after that, it is ended 0.2 s later
        await _until(lambda: overdue, timeout=2)
        assert overdue == [(0.5, 0)]
        await shutdown.stopped()

    asyncio.run(go())


def test_the_exit_deadline_holds_while_the_event_loop_is_blocked(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """After the grace period something synchronous holds the loop (a close that waits, or
    asyncio.run joining the cancelled runs' threads): the process is ended anyway."""
    monkeypatch.setattr(shutdown_module, "OVERDUE_AFTER_GRACE", 0.2)
    fired = threading.Event()
    overdue: list[tuple[float, int]] = []

    def exit_now(after: float, code: int) -> None:
        overdue.append((after, code))
        fired.set()

    async def go() -> None:
        shutdown = _shutdown(0.1, [])
        shutdown.overdue_exit = exit_now
        shutdown._on_signal(signal.SIGTERM)
        assert await asyncio.wait_for(shutdown.drained(), 2) is True  # nothing was running
        # the loop is blocked from here on: only the deadline's own thread can end the wait
        assert fired.wait(timeout=5), "the deadline did not fire while the loop was blocked"

    asyncio.run(go())
    assert [(round(after, 3), code) for after, code in overdue] == [(0.3, 0)]
