"""The work queue: one entry per key, no key handed out twice, events during a run collapse."""

from __future__ import annotations

import asyncio

import pytest

from runner.control.queue import WorkQueue


class Clock:
    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def run(coro):  # type: ignore[no-untyped-def]
    return asyncio.run(coro)


def test_duplicates_merge_and_earliest_due_wins() -> None:
    async def go() -> None:
        clock = Clock()
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
