"""The roles' proxy's HTTP relay: which headers pass each way, an answer streamed to the role
(read on its way when it is about Secrets), WebSocket frames pumped, a Status answer."""

from __future__ import annotations

import asyncio
from typing import Any

import aiohttp
from aiohttp import web

from runner.dependents import secretdata
from runner.kube.client import AsyncUpstream
from runner.util.redact import SecretValues

HOP_HEADERS = {
    "connection",
    "keep-alive",
    "proxy-authenticate",
    "proxy-authorization",
    "te",
    "trailers",
    "transfer-encoding",
    "upgrade",
    "host",
    "authorization",
    "content-length",
    "accept-encoding",
}


def forward_headers(headers: Any) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k.lower() not in HOP_HEADERS}


def response_headers(upstream: aiohttp.ClientResponse) -> dict[str, str]:
    return {
        k: v
        for k, v in upstream.headers.items()
        if k.lower() not in HOP_HEADERS and k.lower() != "content-encoding"
    }


def whole_response(upstream: aiohttp.ClientResponse, raw: bytes) -> web.Response:
    return web.Response(status=upstream.status, body=raw, headers=response_headers(upstream))


async def relay(
    request: web.Request, upstream: aiohttp.ClientResponse, values: SecretValues | None = None
) -> web.StreamResponse:
    """Stream the answer to the role; one about Secrets is read on its way (`values`)."""
    scanner = secretdata.StreamScanner(values) if values is not None else None
    response = web.StreamResponse(status=upstream.status, headers=response_headers(upstream))
    await response.prepare(request)
    try:
        async for chunk in upstream.content.iter_any():
            if scanner is not None:
                scanner.feed(chunk)
            await response.write(chunk)
    finally:
        if scanner is not None:
            scanner.close()
    await response.write_eof()
    return response


async def pump(source: Any, sink: Any) -> None:
    async for message in source:
        if message.type == aiohttp.WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type == aiohttp.WSMsgType.TEXT:
            await sink.send_str(message.data)
        else:
            break
    await sink.close()


def status_response(code: int, reason: str, message: str) -> web.Response:
    body = {
        "kind": "Status",
        "apiVersion": "v1",
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    return web.json_response(body, status=code)


async def relay_websocket(upstream: AsyncUpstream, request: web.Request) -> web.StreamResponse:
    """An upgrade (exec, attach, port-forward) relayed frame by frame."""
    protocols = [
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    ]
    async with upstream.session.ws_connect(
        upstream.url(request.path_qs),
        protocols=protocols,
        headers=await upstream.auth_headers(),
        max_msg_size=0,
    ) as remote:
        local = web.WebSocketResponse(
            protocols=[remote.protocol] if remote.protocol else [], max_msg_size=0
        )
        await local.prepare(request)
        await asyncio.gather(pump(local, remote), pump(remote, local))
        return local
