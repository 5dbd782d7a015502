"""The proxy's front door: loopback only, run tokens only."""

from __future__ import annotations

import asyncio
from typing import Any
from unittest import mock

from aiohttp.test_utils import make_mocked_request

from runner.dependents.ownership import Owner
from runner.dependents.proxy import Proxy

OWNER = Owner("app.my.domain/v1", "Echo", "e", "ns", "uid")


def _request(
    remote: str, token: str | None = None, method: str = "GET", upgrade: bool = False
) -> Any:
    transport = mock.Mock()
    transport.get_extra_info.side_effect = lambda key, default=None: (
        (remote, 5555) if key == "peername" else default
    )
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    if upgrade:
        headers.update(Upgrade="websocket", Connection="Upgrade")
    return make_mocked_request(
        method, "/api/v1/namespaces/ns/pods", headers=headers, transport=transport
    )


def test_non_loopback_clients_are_refused_even_with_a_valid_token() -> None:
    proxy = Proxy(upstream=None, inject=True)  # type: ignore[arg-type]
    token = proxy.register(OWNER)
    response = asyncio.run(proxy.handle(_request("10.1.2.3", token)))
    assert response.status == 403


def test_unknown_and_expired_tokens_are_refused() -> None:
    proxy = Proxy(upstream=None, inject=True)  # type: ignore[arg-type]
    assert asyncio.run(proxy.handle(_request("127.0.0.1"))).status == 401
    assert asyncio.run(proxy.handle(_request("127.0.0.1", "made-up"))).status == 401
    token = proxy.register(OWNER)
    proxy.unregister(token)
    assert asyncio.run(proxy.handle(_request("127.0.0.1", token))).status == 401


def test_run_env_kubeconfig_is_private_and_removed() -> None:
    proxy = Proxy(upstream=None, inject=True)  # type: ignore[arg-type]
    proxy.url = "http://127.0.0.1:1"
    with proxy.run_env(OWNER) as env:
        path = env["KUBECONFIG"]
        import os
        import stat

        assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
        assert len(proxy._owners) == 1
    assert not os.path.exists(path)
    assert proxy._owners == {}


def test_an_unreachable_api_server_is_a_503_status_for_the_role_not_a_traceback() -> None:
    import json
    import socket

    from runner.kube import reachability
    from runner.kube.client import AsyncUpstream
    from runner.kube.credentials import Credentials

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: connections are refused

    async def go() -> Any:
        upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{port}"))
        proxy = Proxy(upstream=upstream, inject=True)
        try:
            return await proxy.handle(_request("127.0.0.1", proxy.register(OWNER)))
        finally:
            await upstream.close()
            await proxy.stop()

    state = reachability.Reachability()
    with mock.patch.object(reachability, "API", state):
        response = asyncio.run(go())
    assert response.status == 503
    status = json.loads(response.body)
    assert status["kind"] == "Status" and "cannot be reached" in status["message"]
    assert not state.reachable, "reported as an outage (one warning), not logged per request"


def test_a_create_without_content_type_is_json_and_forwarded_without_one() -> None:
    """The kubernetes client 37 sends creates without a Content-Type, which the API server
    reads as JSON: the proxy marks the object as for any JSON create, and forwards no
    Content-Type of its own (aiohttp's application/octet-stream is refused with 415)."""
    import json

    import aiohttp
    from aiohttp import web

    from runner.kube.client import AsyncUpstream
    from runner.kube.credentials import Credentials

    seen: list[tuple[str | None, dict[str, Any]]] = []

    async def api(request: web.Request) -> web.Response:
        body = json.loads(await request.read())
        seen.append((request.headers.get("Content-Type"), body))
        return web.json_response(body, status=201)

    async def go() -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", api)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{port}"))
        proxy = Proxy(upstream=upstream, inject=True)
        await proxy.start()
        try:
            token = proxy.register(OWNER)
            async with (
                aiohttp.ClientSession() as session,
                session.post(
                    f"{proxy.url}/api/v1/namespaces/ns/configmaps",
                    data=json.dumps(
                        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
                    ).encode(),
                    headers={"Authorization": f"Bearer {token}"},
                    skip_auto_headers=("Content-Type",),
                ) as response,
            ):
                return response.status
        finally:
            await proxy.stop()
            await upstream.close()
            await runner.cleanup()

    assert asyncio.run(go()) == 201
    content_type, body = seen[0]
    assert content_type is None
    assert body["metadata"]["ownerReferences"][0]["uid"] == "uid"


def test_a_read_only_proxy_refuses_writes_and_upgrades_with_a_message() -> None:
    import json

    proxy = Proxy(upstream=None, inject=True, read_only=True)  # type: ignore[arg-type]
    assert not proxy.inject  # nothing is written, nothing is marked
    token = proxy.register(OWNER)
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        response = asyncio.run(proxy.handle(_request("127.0.0.1", token, method)))
        assert response.status == 403
        status = json.loads(response.body)
        assert status["reason"] == "Forbidden"
        assert status["message"].startswith(
            f"operator-runner: admission roles may only read: {method} /api/v1/namespaces/ns/pods"
        )
    exec_ = asyncio.run(proxy.handle(_request("127.0.0.1", token, "GET", upgrade=True)))
    assert exec_.status == 403


def test_a_failed_owner_fixup_logs_the_api_servers_answer_masked(caplog: Any) -> None:
    """The warning about an owner the proxy could not add quotes the API server's answer, with
    the values of the Secrets the run wrote masked (its Status may echo them)."""
    import json
    import logging

    import aiohttp
    from aiohttp import web

    from runner.kube.client import AsyncUpstream
    from runner.kube.credentials import Credentials
    from runner.util.redact import SecretValues

    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "s", "namespace": "ns"},
        "stringData": {"password": "hunter2-pass"},
    }

    async def api(request: web.Request) -> web.Response:
        if request.content_type == "application/json-patch+json":  # the proxy's owner fixup
            status = {"kind": "Status", "message": "invalid value hunter2-pass", "code": 422}
            return web.json_response(status, status=422)
        return web.json_response(secret, status=201)  # an apply that created it

    async def go() -> int:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", api)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = runner.addresses[0][1]
        upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{port}"))
        proxy = Proxy(upstream=upstream, inject=True)
        await proxy.start()
        try:
            token = proxy.register(OWNER, SecretValues())
            async with (
                aiohttp.ClientSession() as session,
                session.patch(
                    f"{proxy.url}/api/v1/namespaces/ns/secrets/s?fieldManager=ansible",
                    data=json.dumps(secret).encode(),
                    headers={
                        "Authorization": f"Bearer {token}",
                        "Content-Type": "application/apply-patch+yaml",
                    },
                ) as response,
            ):
                return response.status
        finally:
            await proxy.stop()
            await upstream.close()
            await runner.cleanup()

    with caplog.at_level(logging.WARNING, logger="runner"):
        assert asyncio.run(go()) == 201
    assert "could not mark" in caplog.text, caplog.text
    assert "hunter2" not in caplog.text and "invalid value ********" in caplog.text


DISCOVERY = {
    "/apis/authorization.k8s.io/v1": {
        "resources": [
            {"name": "selfsubjectaccessreviews", "namespaced": False, "verbs": ["create"]},
            {"name": "localsubjectaccessreviews", "namespaced": True, "verbs": ["create"]},
        ]
    },
    "/apis/rbac.authorization.k8s.io/v1": {
        "resources": [
            {
                "name": "clusterroles",
                "namespaced": False,
                "verbs": ["create", "get", "list", "patch", "watch"],
            }
        ]
    },
}


def _creates(*writes: tuple[str, dict[str, Any]]) -> tuple[list[Any], list[Any]]:
    """POST each (path, body) through a proxy of an API server that serves DISCOVERY and
    answers every create with the body it got (201): what it got, and what was reported."""
    import json

    import aiohttp
    from aiohttp import web

    from runner.kube.client import AsyncUpstream
    from runner.kube.credentials import Credentials

    got: list[Any] = []
    reported: list[Any] = []

    async def api(request: web.Request) -> web.Response:
        if request.method == "GET":
            return web.json_response(DISCOVERY[request.path])
        body = json.loads(await request.read())
        got.append(body)
        return web.json_response(body, status=201)

    async def go() -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", api)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        upstream = AsyncUpstream(Credentials(server=f"http://127.0.0.1:{port}"))
        proxy = Proxy(
            upstream=upstream,
            inject=True,
            on_write=lambda info, owner, obj: reported.append((info.plural, obj)),
        )
        await proxy.start()
        try:
            token = proxy.register(OWNER)
            async with aiohttp.ClientSession() as session:
                for path, body in writes:
                    async with session.post(
                        f"{proxy.url}{path}",
                        json=body,
                        headers={"Authorization": f"Bearer {token}"},
                    ) as response:
                        assert response.status == 201, await response.text()
        finally:
            await proxy.stop()
            await upstream.close()
            await runner.cleanup()

    asyncio.run(go())
    return got, reported


def test_virtual_resources_get_nothing_injected_and_are_not_watched() -> None:
    """As operator-sdk: a resource without get, list and watch in discovery (a review) is an
    API call; its metadata must stay empty (the API server answers 422 otherwise)."""
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"verb": "list", "resource": "pods"}},
    }
    local = {**review, "kind": "LocalSubjectAccessReview", "metadata": {"namespace": "ns"}}
    got, reported = _creates(
        ("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review),
        ("/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews", local),
    )
    assert got == [review, local]
    assert reported == []


def test_a_cluster_scoped_object_is_annotated_whatever_namespace_its_body_names() -> None:
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": "r", "namespace": "ns"},  # the CR's namespace, kept by a template
        "rules": [],
    }
    got, reported = _creates(("/apis/rbac.authorization.k8s.io/v1/clusterroles", role))
    meta = got[0]["metadata"]
    assert "ownerReferences" not in meta
    assert meta["annotations"] == {
        "operator-sdk/primary-resource": "ns/e",
        "operator-sdk/primary-resource-type": "Echo.app.my.domain",
    }
    assert [plural for plural, _ in reported] == ["clusterroles"]
