"""Read-following (watchReads): the proxy reports the objects a run reads by name, of the kinds
its watch follows; their watch reconciles the CRs that read them when they change."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web
from fake_api import WatchServer

from runner.dependents.ownership import Owner, Primary, RequestInfo
from runner.dependents.proxy import Proxy
from runner.dependents.references import References, read_fingerprint
from runner.kube.client import AsyncUpstream
from runner.kube.credentials import Credentials
from runner.kube.resources import ObjectRef, Resource

OWNER = Owner("x.io/v1", "Echo", "a", "ns", "uid-a")
OTHER = Owner("x.io/v1", "Echo", "b", "ns", "uid-b")
REF_A = ObjectRef(Resource("x.io", "v1", "echoes", "Echo"), "ns", "a")
DB = RequestInfo("", "v1", "ns", "secrets", "db")


def secret(name: str, version: str = "5", namespace: str = "ns", **data: str) -> dict[str, Any]:
    meta = {"name": name, "namespace": namespace, "resourceVersion": version}
    return {"apiVersion": "v1", "kind": "Secret", "metadata": meta, "data": data}


def test_the_fingerprint_is_of_what_matters_only() -> None:
    base = secret("db", password="b25l")
    base["metadata"]["labels"] = {"app": "db"}
    bookkeeping = json.loads(json.dumps(base))
    bookkeeping["metadata"].update(resourceVersion="9", managedFields=[{"manager": "kubectl"}])
    bookkeeping["metadata"]["annotations"] = {
        "kubectl.kubernetes.io/last-applied-configuration": "{}"
    }
    bookkeeping["status"] = {"anything": True}
    assert read_fingerprint(bookkeeping) == read_fingerprint(base)
    for change in (
        {"data": {"password": "dHdv"}},
        {"metadata": {**base["metadata"], "labels": {"app": "other"}}},
        {"metadata": {**base["metadata"], "annotations": {"team": "b"}}},
        {"spec": {"size": 2}},
    ):
        assert read_fingerprint({**base, **change}) != read_fingerprint(base), change


# -- the proxy's side -----------------------------------------------------------------------

VERBS = ["get", "list", "watch"]
DISCOVERY = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "secrets",
            "kind": "Secret",
            "namespaced": True,
            "verbs": ["get", "list", "watch"],
        },
        {"name": "configmaps", "kind": "ConfigMap", "namespaced": True, "verbs": ["get", "list"]},
    ],
}


async def fake_api(request: web.Request) -> web.StreamResponse:
    path = request.path
    if path == "/api/v1":
        return web.json_response(DISCOVERY)
    if request.query.get("as") == "table" or "Table" in request.headers.get("Accept", ""):
        return web.json_response({"kind": "Table", "rows": []})
    if path.endswith("/secrets/db"):
        return web.json_response(secret("db", password="b25l"))
    if path.endswith("/configmaps/cm"):
        return web.json_response({"kind": "ConfigMap", "metadata": {"name": "cm"}})
    if path.endswith("/secrets"):
        return web.json_response({"kind": "SecretList", "items": [secret("db")]})
    return web.json_response({"kind": "Status", "code": 404, "reason": "NotFound"}, status=404)


@asynccontextmanager
async def proxy_of(
    reads: list[tuple[str, str, dict[str, Any] | None]],
) -> AsyncIterator[tuple[Proxy, str]]:
    """A proxy before `fake_api` whose owner's watch follows Secrets; each read it reports is
    appended to `reads` as (CR name, path's name, object)."""
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", fake_api)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{runner.addresses[0][1]}"))

    def follows(owner: Owner, group: str, version: str, kind: str) -> bool:
        return (group, version) == ("", "v1") and kind in ("", "Secret")

    def on_read(info: RequestInfo, owner: Owner, obj: dict[str, Any] | None) -> None:
        reads.append((owner.name, info.name, obj))

    proxy = Proxy(upstream, inject=True, follows=follows, on_read=on_read)
    await proxy.start()
    try:
        yield proxy, proxy.register(OWNER)
    finally:
        await proxy.stop()
        await upstream.close()
        await runner.cleanup()


def test_the_proxy_reports_reads_by_name_of_followed_kinds_found_or_not() -> None:
    reads: list[tuple[str, str, dict[str, Any] | None]] = []

    async def go() -> list[int]:
        async with proxy_of(reads) as (proxy, token), aiohttp.ClientSession() as session:
            statuses = []
            for path, headers in (
                ("/api/v1/namespaces/ns/secrets/db", {}),
                ("/api/v1/namespaces/ns/secrets/missing", {}),
                ("/api/v1/namespaces/ns/secrets", {}),  # a list: not a read of each
                ("/api/v1/namespaces/ns/secrets?watch=1&fieldSelector=x", {}),
                ("/api/v1/namespaces/ns/configmaps/cm", {}),  # a kind not followed
                ("/api/v1/namespaces/ns/secrets/db", {"Accept": "application/json;as=Table"}),
            ):
                async with session.get(
                    proxy.url + path, headers={"Authorization": f"Bearer {token}", **headers}
                ) as response:
                    await response.read()
                    statuses.append(response.status)
            return statuses

    statuses = asyncio.run(go())
    assert statuses == [200, 404, 200, 200, 200, 200], "the role gets every answer as it was"
    assert reads == [("a", "db", secret("db", password="b25l")), ("a", "missing", None)]


# -- the watches' side ----------------------------------------------------------------------


def run(test: Callable[[WatchServer, References, list[str]], Awaitable[None]]) -> None:
    """`test(server, references, reconciled)`: References over the server's collection (the
    operator watches namespace ns); `reconciled` collects the names of the CRs enqueued."""

    async def go() -> None:
        server = WatchServer()
        upstream = AsyncUpstream(Credentials(server=await server.start()))
        reconciled: list[str] = []

        def trigger(primary: Primary) -> bool:
            reconciled.append(primary.name)
            return primary.name != "gone"

        references = References(upstream, trigger, ["ns"])
        try:
            async with asyncio.timeout(10):
                await test(server, references, reconciled)
        finally:
            await references.stop()
            await upstream.close()
            await server.stop()

    asyncio.run(go())


async def until(probe: Callable[[], object]) -> None:
    while not probe():
        await asyncio.sleep(0.01)


def test_a_change_to_a_read_object_reconciles_its_reader_and_others_nothing() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        server.items = [secret("db", password="b25l")] + [secret(f"x-{i}") for i in range(600)]
        changed = asyncio.Event()
        server.scripts = [
            [
                ("wait", changed),
                ("event", "MODIFIED", secret("x-3", "6", password="bm9pc2U=")),
                ("event", "MODIFIED", {**secret("db", "7", password="b25l"), "status": {}}),
                ("event", "MODIFIED", secret("db", "8", password="dHdv")),
            ]
        ]
        references.read(DB, OWNER, secret("db", password="b25l"))
        references.settle(REF_A, succeeded=True)
        await until(lambda: server.watches())
        assert server.lists()[0]["limit"] == "500"
        assert reconciled == [], "the listing shows it as it was read"
        changed.set()
        await until(lambda: reconciled)
        assert reconciled == ["a"], "an unrelated Secret, a status-only change: nothing"

    run(test)


def test_a_change_between_the_read_and_the_watch_is_seen_in_the_listing() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        server.items = [secret("db", "9", password="dHdv")]  # rotated since the run read it
        references.read(DB, OWNER, secret("db", password="b25l"))
        references.read(RequestInfo("", "v1", "ns", "secrets", "later"), OWNER, None)
        await until(lambda: reconciled)
        assert reconciled == ["a"], "db changed; 'later' is still missing"
        assert "watch" not in server.requests[0], "listed first"

    run(test)


def test_a_write_reconciles_the_other_readers_and_a_gone_reader_is_forgotten() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        gone = Owner("x.io/v1", "Echo", "gone", "ns", "uid-g")
        for owner in (OWNER, OTHER, gone):
            references.read(DB, owner, secret("db", password="b25l"))
        references.wrote(DB, OWNER, secret("db", "6", password="dHdv"))
        assert sorted(reconciled) == ["b", "gone"], "not the writer"
        assert not references.index.reads_of(("x.io", "Echo", "ns", "gone")), "not ours now"
        assert references.index.reads_of(("x.io", "Echo", "ns", "b"))

    run(test)


def test_a_read_no_later_run_makes_is_no_longer_followed() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        changed = asyncio.Event()
        server.items = [secret("db", password="b25l"), secret("tls", password="b25l")]
        server.scripts = [
            [
                ("wait", changed),
                ("event", "MODIFIED", secret("db", "8", password="dHdv")),
                ("event", "MODIFIED", secret("tls", "9", password="dHdv")),  # after it: b's
            ]
        ]
        references.read(DB, OWNER, secret("db", password="b25l"))
        references.settle(REF_A, succeeded=True)
        references.settle(REF_A, succeeded=False)  # a failed run that read nothing: kept
        assert references.index.follows(("", "v1", "secrets"), ("ns", "db"))
        references.settle(REF_A, succeeded=True)  # a run that read nothing and succeeded
        assert not references.index.follows(("", "v1", "secrets"), ("ns", "db"))
        tls = RequestInfo("", "v1", "ns", "secrets", "tls")
        references.read(tls, OTHER, secret("tls", password="b25l"))
        await until(lambda: server.watches())
        changed.set()
        await until(lambda: reconciled)  # b's change came after a's on the same stream
        assert reconciled == ["b"]

    run(test)


def test_the_cr_itself_is_not_followed() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        itself = RequestInfo("x.io", "v1", "ns", "echoes", "a")
        body = {"apiVersion": "x.io/v1", "kind": "Echo", "metadata": {"name": "a"}}
        references.read(itself, OWNER, body)
        assert len(references.index) == 0

    run(test)


def test_the_event_of_a_readers_own_write_that_comes_before_its_answer_reconciles_nothing() -> None:
    async def test(server: WatchServer, references: References, reconciled: list[str]) -> None:
        key = ("", "secrets", "ns", "db")
        server.items = [secret("db", password="b25l")]
        server.scripts = [[("event", "MODIFIED", secret("db", "6", password="dHdv"))]]
        references.read(DB, OWNER, secret("db", password="b25l"))
        references.writes.begin(key)  # a's run writes the Secret it read: in flight
        await until(lambda: key in references.writes._held)  # its event came first, and waits
        references.wrote(DB, OWNER, secret("db", "6", password="dHdv"))  # the answer
        references.writes.end(key)
        assert reconciled == []

    run(test)
