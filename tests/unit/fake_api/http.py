"""What goes over the wire, for the unit tests of our clients: a thread on 127.0.0.1 that answers
every GET with a Lease, over plain HTTP or TLS, and records each request's headers (its
certificates from tests/pki.py); and one collection that is listed and watched over HTTP
(`WatchServer`). Shared by the unit tests (not a test module)."""

from __future__ import annotations

import asyncio
import http.server
import json
import ssl
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, ClassVar

from tests.pki import Pki


class LeaseHandler(http.server.BaseHTTPRequestHandler):
    seen: ClassVar[list[dict[str, str]]] = []  # the headers of each request, in order

    def do_GET(self) -> None:
        type(self).seen.append(dict(self.headers))
        body = b'{"kind": "Lease"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@contextmanager
def serving(tls: ssl.SSLContext | None = None) -> Iterator[str]:
    """The server's URL while it runs: http://127.0.0.1:PORT, or https:// with the server
    context `tls`. `LeaseHandler.seen` starts empty."""
    LeaseHandler.seen = []
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), LeaseHandler)
    if tls is not None:
        httpd.socket = tls.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()


@contextmanager
def serving_certificate_for(name: str, folder: Path) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT, whose certificate names only `name` (not the address); and the
    file of the CA that signed it (written to `folder`)."""
    ca, cert, key = Pki(name, names=[name]).write(folder)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    with serving(context) as url:
        yield url, ca


class WatchServer:
    """One collection over HTTP, for the tests of list and watch (runner/kube/listwatch.py), on
    the running event loop: a GET lists `items` (at `resource_version`; `limit` items a page,
    the next page's `continue` token being its offset); a GET with `watch=1` plays the next of
    `scripts`, then stays open until `stop`.

    A script is a list of steps: ("event", TYPE, object) sends a watch event (BOOKMARK too),
    ("error", code) an ERROR event with a Status of that code, ("status", code) answers that
    status instead of a stream, ("end",) ends the stream as the server's timeout does, ("cut",)
    drops the connection mid-stream, ("wait", asyncio.Event) goes on once the event is set.
    `requests` holds each request's query parameters."""

    def __init__(self) -> None:
        from aiohttp import web

        self.items: list[dict[str, Any]] = []
        self.resource_version = "1"
        self.list_status = 200
        self.continue_status = 200  # the answer to a listing's next page (410: token expired)
        self.scripts: list[list[tuple[Any, ...]]] = []
        self.requests: list[dict[str, str]] = []
        self.url = ""
        self._stop = asyncio.Event()
        app = web.Application()
        app.router.add_get("/{path:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, access_log=None)

    async def start(self) -> str:
        from aiohttp import web

        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        host, port = self._runner.addresses[0][:2]
        self.url = f"http://{host}:{port}"
        return self.url

    async def stop(self) -> None:
        self._stop.set()
        await self._runner.cleanup()

    def watches(self) -> list[dict[str, str]]:
        return [r for r in self.requests if r.get("watch")]

    def lists(self) -> list[dict[str, str]]:
        return [r for r in self.requests if not r.get("watch")]

    async def _handle(self, request: Any) -> Any:
        from aiohttp import web

        self.requests.append(dict(request.query))
        if not request.query.get("watch"):
            if self.list_status != 200:
                return web.json_response(
                    {"kind": "Status", "code": self.list_status}, status=self.list_status
                )
            start = int(request.query.get("continue") or 0)
            if start and self.continue_status != 200:
                return web.json_response(
                    {"kind": "Status", "code": self.continue_status, "reason": "Expired"},
                    status=self.continue_status,
                )
            limit = int(request.query.get("limit") or 0) or len(self.items)
            end = start + limit
            metadata = {"resourceVersion": self.resource_version}
            if end < len(self.items):
                metadata["continue"] = str(end)
            return web.json_response(
                {"kind": "List", "metadata": metadata, "items": self.items[start:end]}
            )
        script = self.scripts.pop(0) if self.scripts else []
        if script and script[0][0] == "status":
            code = script[0][1]
            return web.json_response(
                {"kind": "Status", "code": code, "reason": "Expired", "message": "too old"},
                status=code,
            )
        response = web.StreamResponse()
        await response.prepare(request)
        for step in script:
            if step[0] == "wait":
                await step[1].wait()
                continue
            if step[0] == "event":
                line = {"type": step[1], "object": step[2]}
            elif step[0] == "error":
                line = {
                    "type": "ERROR",
                    "object": {
                        "kind": "Status",
                        "code": step[1],
                        "reason": "Expired",
                        "message": "too old resource version",
                    },
                }
            elif step[0] == "end":
                await response.write_eof()
                return response
            else:  # "cut"
                assert request.transport is not None
                request.transport.close()
                return response
            await response.write(json.dumps(line).encode() + b"\n")
        await self._stop.wait()
        return response
