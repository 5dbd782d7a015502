"""Fairness: events are never queued behind periodic resyncs, and resyncs are spread."""

from __future__ import annotations

import asyncio
import random
from dataclasses import dataclass, field
from typing import cast

import pytest
from fake_api import FakeClock

from runner.control.controller import RESYNC_JITTER, Controller, background_limit
from runner.control.queue import EVENT_BURST, Lane, WorkQueue
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.interface import Outcome
from runner.reconcile.reconciler import Reconciler
from runner.watches import GVK, Watch

THINGS = Resource("example.com", "v1", "things", "Thing", True)


def ref(name: str) -> ObjectRef:
    return ObjectRef(THINGS, "ns", name)


def test_a_due_event_is_handed_out_before_every_due_background_key() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock)
        for i in range(100):
            q.add(f"resync-{i}", lane=Lane.BACKGROUND)
        clock.now += 10  # the resyncs have waited 10 s
        q.add("new")
        assert q.due(Lane.BACKGROUND) == 100 and q.due(Lane.EVENT) == 1
        assert await q.get() == "new"
        assert [await q.get() for _ in range(3)] == ["resync-0", "resync-1", "resync-2"]

    asyncio.run(go())


def test_background_keys_hold_at_most_their_limit_of_workers() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue(background_limit=1)
        q.add("resync-a", lane=Lane.BACKGROUND)
        q.add("resync-b", lane=Lane.BACKGROUND)
        assert await q.get() == "resync-a"
        with pytest.raises(TimeoutError):  # the second one waits for the first to end
            await asyncio.wait_for(q.get(), 0.05)
        q.add("event")
        assert await asyncio.wait_for(q.get(), 1) == "event"  # an event does not wait
        q.done("resync-a")
        assert await asyncio.wait_for(q.get(), 1) == "resync-b"

    asyncio.run(go())


def test_an_event_moves_a_waiting_key_from_the_background_lane() -> None:
    clock = FakeClock()
    q: WorkQueue[str] = WorkQueue(clock)
    q.add("a", delay=3600, lane=Lane.BACKGROUND)
    q.add("b", lane=Lane.BACKGROUND)
    assert q.lane_of("a") is Lane.BACKGROUND
    q.add("a")
    assert q.lane_of("a") is Lane.EVENT and len(q) == 2
    q.add("a", delay=5, lane=Lane.BACKGROUND)  # a resync never moves an event back
    assert q.lane_of("a") is Lane.EVENT and q.due(Lane.EVENT) == 1
    assert q.lane_of("missing") is None


def test_an_event_during_a_background_run_reruns_in_the_event_lane() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a", lane=Lane.BACKGROUND)
        assert await q.get() == "a"
        q.add("a", lane=Lane.BACKGROUND)
        q.add("a")
        q.done("a")
        assert q.lane_of("a") is Lane.EVENT

    asyncio.run(go())


def test_background_limit_leaves_one_worker_for_events() -> None:
    assert [background_limit(n) for n in (1, 2, 4, 16)] == [1, 1, 3, 15]
    with pytest.raises(ValueError, match="background_limit"):
        WorkQueue(background_limit=0)


@dataclass
class Recording:
    """A reconciler that takes `seconds` per run and records the order of its runs."""

    seconds: float
    outcome: Outcome = field(default_factory=Outcome)
    order: list[str] = field(default_factory=list)
    watch: Watch = field(default_factory=lambda: Watch(gvk=GVK("x", "v1", "Thing"), role="thing"))

    async def reconcile(self, key: ObjectRef) -> Outcome:
        self.order.append(key.name)
        await asyncio.sleep(self.seconds)
        return self.outcome


def test_a_new_cr_runs_next_while_a_thousand_resyncs_are_due() -> None:
    async def go() -> list[str]:
        reconciler = Recording(seconds=0.002)
        controller = Controller(cast(Reconciler, reconciler), workers=2)
        for i in range(1000):
            controller.queue.add(ref(f"old-{i}"), lane=Lane.BACKGROUND)
        controller.start()
        while len(reconciler.order) < 10:  # some resyncs have run, most still wait
            await asyncio.sleep(0.001)
        controller.on_event(ref("new"), "ADDED", {"metadata": {"generation": 1}})
        started = len(reconciler.order)
        while "new" not in reconciler.order:
            await asyncio.sleep(0.001)
        await controller.stop(1)
        return reconciler.order[started:]

    after = asyncio.run(go())
    # the one background run going on the other worker may start first, not more
    assert "new" in after[:2], after[:5]


def test_periodic_resyncs_are_spread_in_the_background_lane() -> None:
    controller = Controller(cast(Reconciler, Recording(0)), workers=2, rng=random.Random(7))
    period = 600.0
    for i in range(200):
        controller._requeue(ref(f"cr-{i}"), Outcome(requeue_after=period, periodic=True))
    slots = [controller.queue._due[ref(f"cr-{i}")] for i in range(200)]
    assert {slot.lane for slot in slots} == {Lane.BACKGROUND}
    now = controller.queue._clock()
    delays = [slot.due - now for slot in slots]
    assert all(period * (1 - RESYNC_JITTER) - 1 <= d <= period + 1 for d in delays)
    assert max(delays) - min(delays) > period * RESYNC_JITTER / 2, "spread over the jitter"


def test_requeue_after_is_an_event_and_a_retry_is_background() -> None:
    controller = Controller(cast(Reconciler, Recording(0)), workers=2)
    controller._requeue(ref("asked"), Outcome(requeue_after=5.0))
    controller._requeue(ref("failed"), Outcome(failed=True))
    assert controller.queue.lane_of(ref("asked")) is Lane.EVENT
    assert controller.queue.lane_of(ref("failed")) is Lane.BACKGROUND


def test_the_initial_listing_is_background_and_changes_are_events() -> None:
    controller = Controller(cast(Reconciler, Recording(0)), workers=2)
    body = {"metadata": {"generation": 1}}
    controller.on_event(ref("listed"), None, body)
    assert controller.queue.lane_of(ref("listed")) is Lane.BACKGROUND
    controller.on_event(ref("created"), "ADDED", body)
    assert controller.queue.lane_of(ref("created")) is Lane.EVENT
    controller.queue.forget(ref("listed"))
    controller.on_event(ref("listed"), None, {"metadata": {"generation": 2}})  # changed meanwhile
    assert controller.queue.lane_of(ref("listed")) is Lane.EVENT


def test_a_steady_stream_of_events_does_not_starve_the_background_lane() -> None:
    async def go() -> list[str]:
        q: WorkQueue[str] = WorkQueue()
        q.add("resync", lane=Lane.BACKGROUND)
        served = []
        for i in range(20):  # events that keep coming back (CRs requeueing themselves)
            q.add(f"event-{i % 3}")
            q.add(f"event-{(i + 1) % 3}")
            key = await asyncio.wait_for(q.get(), 1)
            served.append(key)
            q.done(key)
        return served

    served = asyncio.run(go())
    assert "resync" in served[: EVENT_BURST + 1], served
