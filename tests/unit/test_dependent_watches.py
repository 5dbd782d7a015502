"""runner.dependents.watcher against a collection served over HTTP: a listing read a page at a
time, only the objects that point at a CR of ours remembered, and the changes that reconcile."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

from fake_api import WatchServer

from runner.dependents.ownership import Primary, RequestInfo
from runner.dependents.watcher import DependentWatches, Kind
from runner.kube.client import AsyncUpstream
from runner.kube.credentials import Credentials

Watches = DependentWatches
CONFIGMAPS = RequestInfo("", "v1", "ns", "configmaps", "x")


def cm(name: str, version: str, owner: str | None = None, **data: str) -> dict[str, Any]:
    """A ConfigMap; with `owner`, owned by the CR of that kind and of its own name."""
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": version}
    if owner is not None:
        meta["ownerReferences"] = [{"apiVersion": "x.io/v1", "kind": owner, "name": name}]
    return {"metadata": meta, "data": data}


def run(test: Callable[[WatchServer, DependentWatches, list[Primary]], Awaitable[None]]) -> None:
    """`test(server, watches, triggered)`: the dependent watches of the server's collection,
    for CRs of kind Echo (ours) only; `triggered` collects the primaries enqueued."""

    async def go() -> None:
        server = WatchServer()
        upstream = AsyncUpstream(Credentials(server=await server.start()))
        triggered: list[Primary] = []

        def trigger(primary: Primary) -> bool:
            triggered.append(primary)
            return True

        watches = DependentWatches(upstream, trigger, ["ns"], lambda p: p.kind == "Echo")
        try:
            async with asyncio.timeout(10):
                await test(server, watches, triggered)
        finally:
            await watches.stop()
            await upstream.close()
            await server.stop()

    asyncio.run(go())


async def until(probe: Callable[[], object]) -> None:
    while not probe():
        await asyncio.sleep(0.01)


def test_only_objects_of_our_crs_are_remembered_and_their_changes_reconcile() -> None:
    async def test(server: WatchServer, watches: Watches, triggered: list[Primary]) -> None:
        server.items = [cm("ours", "5", "Echo", v="1")]
        server.items += [cm(f"other-{i}", "5", v="1") for i in range(1200)]  # three pages
        server.items.append(cm("theirs", "5", "ReplicaSet", v="1"))
        server.scripts = [
            [
                ("event", "MODIFIED", cm("other-7", "6", v="2")),
                ("event", "MODIFIED", cm("theirs", "7", "ReplicaSet", v="2")),
                ("event", "MODIFIED", cm("ours", "8", "Echo", v="2")),
            ]
        ]
        watches.ensure(CONFIGMAPS)
        await until(lambda: triggered)
        assert triggered == [Primary("x.io", "Echo", "ns", "ours", via_annotation=False)]
        assert [r.get("limit") for r in server.lists()] == ["500", "500", "500"]
        [seen] = [kind for kind in watches._tasks]
        assert seen == Kind("", "v1", "configmaps", "ns")

    run(test)


def test_a_relist_reconciles_what_changed_while_the_stream_was_down() -> None:
    async def test(server: WatchServer, watches: Watches, triggered: list[Primary]) -> None:
        server.items = [cm("same", "5", "Echo", v="1"), cm("changed", "5", "Echo", v="1")]
        server.items.append(cm("gone", "5", "Echo", v="1"))
        down = asyncio.Event()
        server.scripts = [[("wait", down), ("error", 410)]]
        watches.ensure(CONFIGMAPS)
        await until(lambda: server.watches())
        server.items = [cm("same", "5", "Echo", v="1"), cm("changed", "9", "Echo", v="2")]
        server.items.append(cm("new", "9", "Echo", v="1"))
        down.set()
        await until(lambda: len(server.watches()) == 2)
        assert sorted(p.name for p in triggered) == ["changed", "new"]
        assert len(server.lists()) == 2

    run(test)
