"""runner.dependents.inflight: a watch event of an object a role is writing waits until the proxy
has read the write's answer, so a role's own write never reconciles its CR again."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import aiohttp
from aiohttp import web
from fake_api import WatchServer

from runner.dependents.inflight import WritesInFlight, written_key
from runner.dependents.ownership import Owner, Primary, RequestInfo, parse_path
from runner.dependents.proxy import Proxy
from runner.dependents.watcher import DependentWatches
from runner.kube.client import AsyncUpstream
from runner.kube.credentials import Credentials

CM = ("", "configmaps", "ns", "cm")
OWNER = Owner("x.io/v1", "Echo", "e", "ns", "uid-e")


def test_the_object_a_request_writes_whole() -> None:
    def key(method: str, path: str, body: Any = None) -> object:
        return written_key(method, parse_path(path), json.dumps(body).encode() if body else b"")

    assert key("PATCH", "/api/v1/namespaces/ns/configmaps/cm") == CM
    assert key("PUT", "/api/v1/namespaces/ns/configmaps/cm") == CM
    configmaps = "/api/v1/namespaces/ns/configmaps"
    assert key("POST", configmaps, {"metadata": {"name": "cm"}}) == CM
    assert key("POST", configmaps, {"metadata": {"generateName": "c"}}) is None
    assert key("GET", "/api/v1/namespaces/ns/configmaps/cm") is None
    assert key("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d/scale") is None
    deployment = ("apps", "deployments", "ns", "d")
    assert key("PATCH", "/apis/apps/v1/namespaces/ns/deployments/d") == deployment


def test_events_of_an_object_being_written_are_judged_after_in_order() -> None:
    writes, judged = WritesInFlight(), []
    assert not writes.hold(CM, lambda: judged.append("now"))
    writes.begin(CM)
    writes.begin(CM)  # two writes of it at once
    assert writes.hold(CM, lambda: judged.append("first"))
    assert writes.hold(CM, lambda: judged.append("second"))
    writes.end(CM)
    assert judged == [], "one write still goes on"
    writes.end(CM)
    assert judged == ["first", "second"]
    assert not writes.hold(CM, lambda: None)


def cm(version: str, value: str) -> dict[str, Any]:
    meta = {
        "name": "cm",
        "namespace": "ns",
        "uid": "uid-cm",
        "resourceVersion": version,
        "ownerReferences": [{"apiVersion": "x.io/v1", "kind": "Echo", "name": "e"}],
    }
    return {"metadata": meta, "data": {"v": value}}


Test = Callable[[WatchServer, DependentWatches, WritesInFlight, list[str]], Any]


def watched(test: Test) -> None:
    """`test(server, dependents, writes, reconciled)`: the dependent watches of a ConfigMap
    owned by Echo e; `reconciled` collects the CRs they enqueue."""

    async def run() -> None:
        server = WatchServer()
        upstream = AsyncUpstream(Credentials(server=await server.start()))
        writes, reconciled = WritesInFlight(), []

        def trigger(primary: Primary) -> bool:
            reconciled.append(primary.name)
            return True

        dependents = DependentWatches(upstream, trigger, ["ns"], writes=writes)
        try:
            async with asyncio.timeout(10):
                await test(server, dependents, writes, reconciled)
        finally:
            await dependents.stop()
            await upstream.close()
            await server.stop()

    asyncio.run(run())


async def until(probe: Callable[[], object]) -> None:
    while not probe():
        await asyncio.sleep(0.01)


def test_the_event_of_a_roles_own_write_that_comes_before_its_answer_reconciles_nothing() -> None:
    async def test(
        server: WatchServer, deps: DependentWatches, writes: WritesInFlight, reconciled: list[str]
    ) -> None:
        server.items = [cm("5", "a")]
        sent = asyncio.Event()
        server.scripts = [[("event", "MODIFIED", cm("6", "b")), ("wait", sent)]]
        writes.begin(CM)  # the role's write of it is in flight
        deps.ensure(RequestInfo("", "v1", "ns", "configmaps", "cm"))
        await until(lambda: CM in writes._held)  # its event came first, and waits
        deps.own_write(cm("6", "b"))  # the answer, read by the proxy
        writes.end(CM)
        assert reconciled == []
        sent.set()

    watched(test)


def test_someone_elses_change_during_a_roles_write_reconciles_after_it() -> None:
    async def test(
        server: WatchServer, deps: DependentWatches, writes: WritesInFlight, reconciled: list[str]
    ) -> None:
        server.items = [cm("5", "a")]
        server.scripts = [[("event", "MODIFIED", cm("6", "changed by hand"))]]
        writes.begin(CM)
        deps.ensure(RequestInfo("", "v1", "ns", "configmaps", "cm"))
        await until(lambda: CM in writes._held)
        deps.own_write(cm("7", "b"))  # the role's write came after it
        writes.end(CM)
        assert reconciled == ["e"]

    watched(test)


def test_the_proxy_holds_the_objects_events_from_before_its_write_until_after_its_answer() -> None:
    """While the role's write goes on, and until on_write has been told its answer, the object
    counts as being written."""
    seen: list[bool] = []
    writes = WritesInFlight()

    async def api(request: web.Request) -> web.Response:
        if request.method == "PATCH":  # (not discovery's GET)
            seen.append(CM in writes._writing)  # at the API server: being written
        return web.json_response(cm("6", "b"))

    def on_write(info: RequestInfo, owner: Owner, obj: dict[str, Any]) -> None:
        seen.append(CM in writes._writing)  # when the answer is reported: still

    async def go() -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", api)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{runner.addresses[0][1]}"))
        proxy = Proxy(upstream, inject=False, on_write=on_write, writes=writes)
        await proxy.start()
        try:
            token = proxy.register(OWNER)
            async with (
                aiohttp.ClientSession() as session,
                session.patch(
                    f"{proxy.url}/api/v1/namespaces/ns/configmaps/cm",
                    data=json.dumps({"data": {"v": "b"}}),
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/merge-patch+json",
                    },
                ) as response,
            ):
                return response.status
        finally:
            await proxy.stop()
            await upstream.close()
            await runner.cleanup()

    assert asyncio.run(go()) == 200
    assert seen == [True, True]
    assert writes._writing == {}, "ended"
