"""List then watch (runner/kube/listwatch.py) against a collection served over HTTP: the watch
starts at the listing's resourceVersion and goes on from the last event or bookmark, 410 Gone
lists again, other failures are retried after a backoff."""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from fake_api import WatchServer

from runner.kube.client import AsyncUpstream
from runner.kube.credentials import Credentials
from runner.kube.listwatch import Event, Listed, ListWatch

PATH = "/api/v1/namespaces/ns/configmaps"


def cm(name: str, version: str, **data: str) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "ns", "resourceVersion": version}, "data": data}


def run(
    test: Callable[[WatchServer, AsyncIterator[Listed | Event]], Awaitable[None]],
    **options: Any,
) -> None:
    """`test(server, changes)`: the changes of a ListWatch of the server's collection (the
    ListWatch made with `options`)."""

    async def go() -> None:
        server = WatchServer()
        upstream = AsyncUpstream(Credentials(server=await server.start()))
        watch = ListWatch(upstream, PATH, backoff=(0.01, 0.02), timeout_seconds=5, **options)
        changes = watch.changes()
        try:
            async with asyncio.timeout(10):
                await test(server, changes)
        finally:
            await changes.aclose()  # type: ignore[attr-defined]
            await upstream.close()
            await server.stop()

    asyncio.run(go())


async def next_change(changes: AsyncIterator[Listed | Event]) -> Listed | Event:
    return await anext(changes)


def test_the_watch_starts_where_the_list_ended() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.items = [cm("a", "5")]
        server.resource_version = "7"
        server.scripts = [[("event", "ADDED", cm("b", "8")), ("event", "MODIFIED", cm("a", "9"))]]
        assert await next_change(changes) == Listed([cm("a", "5")], relist=False)
        assert await next_change(changes) == Event("ADDED", cm("b", "8"))
        assert await next_change(changes) == Event("MODIFIED", cm("a", "9"))
        [watch] = server.watches()
        assert watch["resourceVersion"] == "7"
        assert watch["allowWatchBookmarks"] == "true" and watch["timeoutSeconds"] == "5"

    run(test)


def test_an_ended_stream_goes_on_from_the_last_event_or_bookmark_without_a_list() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        bookmark = {"metadata": {"resourceVersion": "20"}}
        server.scripts = [
            [("event", "ADDED", cm("b", "8")), ("end",)],
            [("event", "BOOKMARK", bookmark), ("end",)],
            [("event", "DELETED", cm("b", "21"))],
        ]
        assert isinstance(await next_change(changes), Listed)
        assert await next_change(changes) == Event("ADDED", cm("b", "8"))
        assert await next_change(changes) == Event("DELETED", cm("b", "21")), "no bookmark"
        assert [w["resourceVersion"] for w in server.watches()] == ["1", "8", "20"]
        assert len(server.lists()) == 1

    run(test)


@pytest.mark.parametrize(
    "script",
    [
        [[("event", "ADDED", cm("b", "8")), ("error", 410)]],  # an ERROR event in the stream
        [[("event", "ADDED", cm("b", "8")), ("end",)], [("status", 410)]],  # the answer
    ],
    ids=["event", "answer"],
)
def test_410_gone_lists_again(script: list[list[tuple[Any, ...]]]) -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.scripts = [*script, [("event", "MODIFIED", cm("b", "32"))]]
        assert await next_change(changes) == Listed([], relist=False)
        assert await next_change(changes) == Event("ADDED", cm("b", "8"))
        server.items, server.resource_version = [cm("b", "30")], "31"
        assert await next_change(changes) == Listed([cm("b", "30")], relist=True)
        assert await next_change(changes) == Event("MODIFIED", cm("b", "32"))
        assert len(server.lists()) == 2
        assert server.watches()[-1]["resourceVersion"] == "31"

    run(test)


def test_a_cut_stream_resumes_from_the_last_event_after_a_backoff(
    caplog: pytest.LogCaptureFixture,
) -> None:
    caplog.set_level(logging.INFO, logger="runner.listwatch")

    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.scripts = [[("event", "ADDED", cm("b", "8")), ("cut",)], [("error", 500)]]
        server.scripts.append([("event", "MODIFIED", cm("b", "9"))])
        assert isinstance(await next_change(changes), Listed)
        assert await next_change(changes) == Event("ADDED", cm("b", "8"))
        assert await next_change(changes) == Event("MODIFIED", cm("b", "9"))
        assert [w["resourceVersion"] for w in server.watches()] == ["1", "8", "8"]
        assert len(server.lists()) == 1, "no list: the watch goes on where it was"

    run(test)
    restarts = [r.getMessage() for r in caplog.records if "restarts" in r.getMessage()]
    assert len(restarts) == 2 and all(m.startswith(f"watch {PATH} restarts: ") for m in restarts)


def test_a_failed_list_is_tried_again() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.list_status = 503
        first = asyncio.create_task(next_change(changes))
        while len(server.lists()) < 3:
            await asyncio.sleep(0.01)
        assert not first.done()
        server.list_status = 200
        assert await first == Listed([], relist=False)

    run(test)


def test_an_event_larger_than_aiohttps_line_limit_is_read() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        big = cm("big", "8", payload="x" * 1_000_000)  # a ConfigMap near its 1 MiB limit
        server.scripts = [[("event", "ADDED", big)]]
        assert isinstance(await next_change(changes), Listed)
        assert await next_change(changes) == Event("ADDED", big)

    run(test)


def test_a_listing_comes_a_page_at_a_time_and_the_watch_starts_after_the_last() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.items = [cm(name, "5") for name in "abcde"]
        server.resource_version = "7"
        server.scripts = [[("event", "ADDED", cm("f", "8"))]]
        pages = [await next_change(changes) for _ in range(3)]
        assert pages == [
            Listed([cm("a", "5"), cm("b", "5")], relist=False, first=True, last=False),
            Listed([cm("c", "5"), cm("d", "5")], relist=False, first=False, last=False),
            Listed([cm("e", "5")], relist=False, first=False, last=True),
        ]
        assert await next_change(changes) == Event("ADDED", cm("f", "8"))
        assert [(r.get("limit"), r.get("continue")) for r in server.lists()] == [
            ("2", None),
            ("2", "2"),
            ("2", "4"),
        ]
        assert server.watches()[0]["resourceVersion"] == "7"

    run(test, page_size=2)


def test_an_expired_continue_token_lists_again_from_the_first_page() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.items = [cm(name, "5") for name in "abc"]
        server.continue_status = 410
        assert await next_change(changes) == Listed(
            [cm("a", "5"), cm("b", "5")], relist=False, first=True, last=False
        )
        again_task = asyncio.create_task(next_change(changes))
        while len(server.lists()) < 3:  # the first page, the expired next one, the first again
            await asyncio.sleep(0.01)
        server.continue_status = 200
        again = await again_task
        assert again == Listed([cm("a", "5"), cm("b", "5")], relist=False, first=True, last=False)
        assert await next_change(changes) == Listed([cm("c", "5")], relist=False, first=False)
        assert not server.watches(), "no watch before a listing is whole"

    run(test, page_size=2)


def test_a_selector_goes_with_the_list_and_the_watch() -> None:
    async def test(server: WatchServer, changes: AsyncIterator[Listed | Event]) -> None:
        server.scripts = [[("event", "ADDED", cm("a", "8"))]]
        assert isinstance(await next_change(changes), Listed)
        assert isinstance(await next_change(changes), Event)
        [listing], [watch] = server.lists(), server.watches()
        assert listing["labelSelector"] == watch["labelSelector"] == "app=web,tier in (a,b)"

    run(test, params={"labelSelector": "app=web,tier in (a,b)"})
