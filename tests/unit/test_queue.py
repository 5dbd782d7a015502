"""The work queue: one entry per key, no key handed out twice, events during a run collapse."""

from __future__ import annotations

import asyncio

import pytest
from fake_api import FakeClock

from runner.control.queue import WorkQueue


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_duplicates_merge_and_earliest_due_wins() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock)
        q.add("a", delay=10)
        q.add("a", delay=5)
        q.add("a", delay=30)
        assert len(q) == 1
        clock.now += 5
        assert await asyncio.wait_for(q.get(), 1) == "a"
        assert len(q) == 0

    run(go())


def test_key_in_progress_is_not_handed_out_and_reruns_once_after_done() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("a")
        assert await q.get() == "a"
        for _ in range(5):  # five events during the run
            q.add("a")
        assert len(q) == 0 and q.processing == 1
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(q.get(), 0.05)
        q.done("a")
        assert await asyncio.wait_for(q.get(), 1) == "a"
        q.done("a")
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(q.get(), 0.05)

    run(go())


def test_other_keys_are_served_while_one_is_in_progress() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("slow")
        q.add("fast")
        first = await q.get()
        second = await q.get()
        assert {first, second} == {"slow", "fast"}

    run(go())


def test_delayed_key_waits_until_due() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("later", delay=0.2)
        q.add("now")
        assert await q.get() == "now"
        loop = asyncio.get_running_loop()
        start = loop.time()
        assert await asyncio.wait_for(q.get(), 2) == "later"
        assert loop.time() - start >= 0.15

    run(go())


def test_forget_drops_waiting_key_and_close_releases_getters() -> None:
    async def go() -> None:
        q: WorkQueue[str] = WorkQueue()
        q.add("gone", delay=0.05)
        q.forget("gone")
        getter = asyncio.create_task(q.get())
        await asyncio.sleep(0.1)
        assert not getter.done()
        q.close()
        assert await asyncio.wait_for(getter, 1) is None

    run(go())


# -- order and starvation (#15): keys are served in the order they became due -------------


def test_keys_are_served_in_the_order_they_became_due() -> None:
    async def go() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock)
        q.add("resync-a", delay=1)
        q.add("resync-b", delay=2)
        clock.now += 5  # both overdue: a backlog
        q.add("new")  # due now: behind the two that were due before it
        q.add("resync-a", delay=15)  # a resync of a waiting key does not push it back
        assert [await q.get() for _ in range(3)] == ["resync-a", "resync-b", "new"]

    run(go())


def test_a_key_added_during_its_run_keeps_its_place() -> None:
    """Due since it was added again, not since its run ended: keys that became due while it
    ran do not overtake it."""

    async def go() -> None:
        clock = FakeClock()
        q: WorkQueue[str] = WorkQueue(clock)
        q.add("x")
        assert await q.get() == "x"
        clock.now += 1
        q.add("x")  # an event during the run: due now, handed out once the run is done
        clock.now += 1
        q.add("y")  # became due after x's event
        clock.now += 10  # x's run ends
        q.done("x")
        assert await q.get() == "x"
        assert await q.get() == "y"

    run(go())


def test_no_key_is_starved_by_a_backlog_that_never_drains() -> None:
    """One worker, runs of 1 s, 20 keys resynced every 5 s: the backlog never drains (20 s of
    work every 5 s). A new key is still served, after at most the keys due before it."""

    async def go() -> None:
        clock = FakeClock()
        waits: list[float] = []
        q: WorkQueue[str] = WorkQueue(clock, on_wait=waits.append)
        keys = [f"cr-{i:02}" for i in range(20)]
        for key in keys:
            q.add(key)
        served: list[str] = []
        for turn in range(200):
            if turn == 50:
                q.add("new")
                due_before_it = len(q) - 1
            key = await asyncio.wait_for(q.get(), 1)
            assert key is not None
            served.append(key)
            clock.now += 1.0  # the run
            q.done(key)
            q.add(key, delay=5.0)  # resync
        assert "new" in served
        assert served.index("new") - 50 <= due_before_it
        for key in keys:  # and every old key keeps being served, round after round
            assert served[-40:].count(key) >= 1
        assert q.longest_wait() > 5, "the backlog shows: keys wait longer than the period"
        assert max(waits) >= 14, "and so do the waits reported"

    run(go())


def test_waits_are_reported_from_when_a_key_became_due() -> None:
    async def go() -> None:
        clock = FakeClock()
        waits: list[float] = []
        q: WorkQueue[str] = WorkQueue(clock, on_wait=waits.append)
        q.add("a", delay=2)
        assert q.longest_wait() == 0
        clock.now += 5
        assert q.longest_wait() == 3
        assert await q.get() == "a"
        assert waits == [3]
        assert q.longest_wait() == 0

    run(go())
