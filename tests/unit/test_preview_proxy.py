"""The preview's proxy (runner/dependents/previewproxy.py): reads go through, dry-run writes are
answered without the API server (dryrun.py), other writes are refused, an exec runs nothing.

The API server here is a small aiohttp app over a dict of objects that records every request
it gets: the tests show that it only ever sees reads.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator, Callable, Coroutine
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp import web

from runner.dependents.ownership import Owner
from runner.dependents.previewproxy import PreviewProxy
from runner.kube.client import AsyncUpstream
from runner.kube.credentials import Credentials

OWNER = Owner("app.my.domain/v1", "Echo", "e", "ns", "uid-1")
CM = "/api/v1/namespaces/ns/configmaps"
DISCOVERY = {
    "resources": [
        {
            "name": "configmaps",
            "namespaced": True,
            "kind": "ConfigMap",
            "verbs": ["get", "list", "watch", "create"],
        },
        {"name": "pods", "namespaced": True, "kind": "Pod", "verbs": ["get", "list", "watch"]},
    ]
}
SSAR = {
    "name": "selfsubjectaccessreviews",
    "namespaced": False,
    "kind": "SelfSubjectAccessReview",
    "verbs": ["create"],
}


class Api:
    """Objects by path; every request recorded as (method, path with query)."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Any]] = {
            f"{CM}/old": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "old", "namespace": "ns", "resourceVersion": "5", "uid": "u"},
                "data": {"a": "1", "b": "2"},
            },
            "/api/v1/namespaces/ns/pods/p": {"kind": "Pod", "metadata": {"name": "p"}},
        }
        self.seen: list[tuple[str, str]] = []

    async def handle(self, request: web.Request) -> web.Response:
        self.seen.append((request.method, request.path_qs))
        if request.path == "/api/v1":
            return web.json_response(DISCOVERY)
        if request.path == "/apis/authorization.k8s.io/v1":
            return web.json_response({"resources": [SSAR]})
        if request.path == "/openapi/v3":
            return web.json_response({"paths": {}})
        if request.path == CM:
            return web.json_response(
                {"kind": "ConfigMapList", "items": list(self.objects.values())[:1]}
            )
        obj = self.objects.get(request.path)
        if obj is None:
            return web.json_response({"kind": "Status", "code": 404}, status=404)
        return web.json_response(obj)


@asynccontextmanager
async def serving(api: Api) -> AsyncIterator[tuple[PreviewProxy, aiohttp.ClientSession, str]]:
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", api.handle)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{port}"))
    proxy = PreviewProxy(upstream, inject=True)
    await proxy.start()
    token = proxy.register(OWNER)
    try:
        async with aiohttp.ClientSession(headers={"Authorization": f"Bearer {token}"}) as session:
            yield proxy, session, proxy.url
    finally:
        await proxy.stop()
        await upstream.close()
        await runner.cleanup()


def run(
    test: Callable[[Api, PreviewProxy, aiohttp.ClientSession, str], Coroutine[Any, Any, None]],
) -> Api:
    api = Api()

    async def go() -> None:
        async with serving(api) as (proxy, session, url):
            await test(api, proxy, session, url)

    asyncio.run(go())
    return api


def only_reads(api: Api) -> None:
    assert api.seen, "the API server was asked something"
    assert {method for method, _ in api.seen} == {"GET"}, api.seen


def test_a_dry_run_create_is_answered_by_the_proxy_with_the_owner_added() -> None:
    async def test(api: Api, proxy: PreviewProxy, session: aiohttp.ClientSession, url: str) -> None:
        body = {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "new"},
            "data": {"n": 4},
        }
        async with session.post(f"{url}{CM}?dryRun=All", json=body) as answer:
            assert answer.status == 201
            created = await answer.json()
        assert created["metadata"]["namespace"] == "ns"
        assert created["metadata"]["ownerReferences"][0]["uid"] == "uid-1"
        assert created["data"] == {"n": "4"}, "a number in a ConfigMap, as the operator writes it"
        async with session.post(
            f"{url}{CM}?dryRun=All", json={**body, "metadata": {"name": "old"}}
        ) as answer:
            assert answer.status == 409
        assert [str(w) for w in proxy.writes_of("Echo", "ns", "e")] == [
            "create configmaps ns/new",
            "create configmaps ns/old (answered 409)",
        ]

    only_reads(run(test))


def test_a_dry_run_patch_is_the_object_as_it_would_be() -> None:
    async def test(api: Api, proxy: PreviewProxy, session: aiohttp.ClientSession, url: str) -> None:
        headers = {"Content-Type": "application/merge-patch+json"}
        patch = json.dumps({"data": {"a": "9", "b": None}})
        async with session.patch(
            f"{url}{CM}/old?dryRun=All", data=patch, headers=headers
        ) as answer:
            assert answer.status == 200
            patched = await answer.json()
        assert patched["data"] == {"a": "9"}
        assert patched["metadata"]["resourceVersion"] == "5"
        smp = {"Content-Type": "application/strategic-merge-patch+json"}
        async with session.patch(f"{url}{CM}/gone?dryRun=All", data="{}", headers=smp) as answer:
            assert answer.status == 404
        async with session.delete(f"{url}{CM}/old?dryRun=All") as answer:
            assert answer.status == 200 and (await answer.json())["status"] == "Success"

    api = run(test)
    only_reads(api)
    assert api.objects[f"{CM}/old"]["data"] == {"a": "1", "b": "2"}


def test_a_write_that_is_no_dry_run_is_refused() -> None:
    async def test(api: Api, proxy: PreviewProxy, session: aiohttp.ClientSession, url: str) -> None:
        async with session.post(f"{url}{CM}", json={"metadata": {"name": "x"}}) as answer:
            assert answer.status == 403
            status = await answer.json()
        assert "check_mode: false" in status["message"]
        assert [str(w) for w in proxy.writes_of("Echo", "ns", "e")] == [
            "refused POST configmaps ns (answered 403)"
        ]

    api = run(test)
    assert api.seen == [], "nothing reached the API server"


def test_an_exec_runs_nothing_and_ends_with_success() -> None:
    async def test(api: Api, proxy: PreviewProxy, session: aiohttp.ClientSession, url: str) -> None:
        path = "/api/v1/namespaces/ns/pods/p/exec?command=rm&command=-rf&command=/data"
        async with session.ws_connect(f"{url}{path}", protocols=("v4.channel.k8s.io",)) as ws:
            message = await ws.receive()
            assert message.type == aiohttp.WSMsgType.BINARY
            assert message.data[0] == 3
            assert json.loads(message.data[1:])["status"] == "Success"
            assert (await ws.receive()).type in (aiohttp.WSMsgType.CLOSE, aiohttp.WSMsgType.CLOSED)
        with_no_pod = "/api/v1/namespaces/ns/pods/none/exec?command=ls"
        async with session.get(
            f"{url}{with_no_pod}", headers={"Upgrade": "websocket", "Connection": "Upgrade"}
        ) as answer:
            assert answer.status == 404
        assert [str(w) for w in proxy.writes_of("Echo", "ns", "e")] == [
            "exec pods/exec ns/p: rm -rf /data",
            "exec pods/exec ns/none: ls (answered 404)",
        ]

    only_reads(run(test))


def test_reads_go_through_and_a_virtual_create_is_echoed() -> None:
    async def test(api: Api, proxy: PreviewProxy, session: aiohttp.ClientSession, url: str) -> None:
        async with session.get(f"{url}{CM}/old") as answer:
            assert answer.status == 200 and (await answer.json())["data"]["a"] == "1"
        review = {
            "kind": "SelfSubjectAccessReview",
            "spec": {"resourceAttributes": {"verb": "get"}},
        }
        ssar = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews?dryRun=All"
        async with session.post(f"{url}{ssar}", json=review) as answer:
            assert answer.status == 201 and await answer.json() == review
        assert proxy.reads == 1

    only_reads(run(test))
