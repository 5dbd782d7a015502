"""A fault-injecting proxy of our own between the operator and the API server.

An HTTPS reverse proxy on 127.0.0.1, with a certificate of a throwaway CA (tests/pki.py) for
the name `fault-proxy.invalid`: the operator is given a kubeconfig (`FaultProxy.kubeconfig`)
whose server is the proxy, with `tls-server-name` and `certificate-authority` for that
certificate and the cluster's own user entry. The proxy sends every request on to the real API
server with the cluster's credentials (its client certificate; an Authorization header goes on
as the operator sent it) and streams the answer back (watches too). Being in the middle of
HTTP, not of bytes, it can hold exactly the requests to one path, a Lease's, while everything
else (kopf's watches, status writes, the roles' requests) goes on as usual.

`hang(path, seconds)`: the next request to `path` and every one after it are held, from the
moment the first of them arrives for `seconds` (without: until `recover()`); then they go on to
the API server. A held request whose client gave up meanwhile (its timeout) is dropped, never
sent on, as over a connection that was cut. `seen(path)` tells what became of each request to
`path`.

`record(prefix)`: what the API server sends for each GET whose path starts with `prefix` is
counted as it goes through (`sent(prefix)`): the names of a list's items, the type and name of
each event of a watch.
"""

from __future__ import annotations

import asyncio
import json
import ssl
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import Future
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web
from kubernetes import client, config
from yarl import URL

from tests.pki import Pki

SERVER_NAME = "fault-proxy.invalid"
# Hop-by-hop headers (and Host and Content-Length, which the proxy's own client sets).
_NOT_FORWARDED = frozenset(
    {"connection", "keep-alive", "proxy-connection", "te", "trailer", "transfer-encoding",
     "upgrade", "host", "content-length"}
)  # fmt: skip


@dataclass
class Seen:
    """One request to a watched path: when it arrived (time.monotonic()), whether it was held,
    and its outcome: "forwarded" (with the API server's status) or "dropped"."""

    method: str
    arrived: float
    held: bool = False
    outcome: str = "pending"
    status: int | None = None


@dataclass
class Sent:
    """One GET under a recorded prefix: its path and query, and what the API server sent: the
    names of a list's items, or (type, name) of each event of a watch (bookmarks left out)."""

    path: str
    query: dict[str, str]
    listed: list[str] = field(default_factory=list)
    events: list[tuple[str, str]] = field(default_factory=list)
    _buffer: bytes = field(default=b"", repr=False)

    @property
    def watch(self) -> bool:
        return self.query.get("watch") in ("1", "true")

    def count(self, chunk: bytes) -> None:
        """Take one more (decoded) piece of the answer."""
        self._buffer += chunk
        if self.watch:
            *lines, self._buffer = self._buffer.split(b"\n")
            for line in filter(None, (x.strip() for x in lines)):
                event = json.loads(line)
                if event.get("type") != "BOOKMARK":
                    name = ((event.get("object") or {}).get("metadata") or {}).get("name")
                    self.events.append((str(event.get("type")), str(name)))

    def done(self) -> None:
        if not self.watch and self._buffer:
            items = json.loads(self._buffer).get("items") or []
            self.listed += [str((i.get("metadata") or {}).get("name")) for i in items]
        self._buffer = b""


@dataclass
class _Fault:
    path: str
    seconds: float | None
    over: asyncio.Event = field(default_factory=asyncio.Event)
    opened: float | None = None  # time.monotonic() when the first request was held


class FaultProxy:
    """Start it with `fault_proxy(kubeconfig, folder)`; see the module's docstring."""

    def __init__(self, cluster_kubeconfig: Path, folder: Path) -> None:
        self._cluster_kubeconfig = cluster_kubeconfig
        self._folder = folder
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, daemon=True)
        self._fault: _Fault | None = None
        self._seen: dict[str, list[Seen]] = {}
        self._recorded: dict[str, list[Sent]] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.kubeconfig = folder / "kubeconfig-via-proxy.yaml"

    # -- the test's side (any thread) --------------------------------------------------------

    def hang(self, path: str, seconds: float | None = None) -> None:
        """Hold the requests to `path` from the next one on (see the module's docstring)."""

        def arm() -> None:
            if self._fault is not None:
                self._fault.over.set()  # one fault at a time: the last one's requests go on
            self._seen.setdefault(path, [])
            self._fault = _Fault(path, seconds)

        self._call(arm)

    def recover(self) -> None:
        """End the fault now: the held requests go on, and the next ones pass."""

        def end() -> None:
            if self._fault is not None:
                self._fault.over.set()

        self._call(end)

    def window(self) -> tuple[float, float] | None:
        """When the fault began (its first held request) and when it ends by itself, in
        time.monotonic() (inf: at `recover()`); None before the first held request."""
        fault = self._fault
        if fault is None or fault.opened is None:
            return None
        ended = fault.opened + fault.seconds if fault.seconds is not None else float("inf")
        return fault.opened, ended

    def seen(self, path: str) -> list[Seen]:
        """The requests to `path` since `hang(path)` (or `watch(path)`), oldest first."""
        return list(self._seen.get(path, []))

    def watch(self, path: str) -> None:
        """Record the requests to `path` (as `hang` does), holding none."""
        self._call(lambda: self._seen.setdefault(path, []))

    def record(self, prefix: str) -> None:
        """Count what the API server sends for the GETs under `prefix` from now on."""
        self._call(lambda: self._recorded.setdefault(prefix, []))

    def sent(self, prefix: str) -> list[Sent]:
        """What the GETs under `prefix` received since `record(prefix)`, oldest first."""
        return list(self._recorded.get(prefix, []))

    # -- running -----------------------------------------------------------------------------

    def start(self) -> None:
        self._thread.start()
        self._submit(self._serve()).result(timeout=30)

    def stop(self) -> None:
        self._submit(self._close()).result(timeout=30)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=30)
        self._loop.close()

    def _call(self, function: Any) -> None:
        async def call() -> None:
            function()

        self._submit(call()).result(timeout=10)

    def _submit(self, coro: Any) -> Future[Any]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    async def _serve(self) -> None:
        upstream = client.Configuration()
        config.load_kube_config(
            config_file=str(self._cluster_kubeconfig), client_configuration=upstream
        )
        self._upstream = upstream.host.rstrip("/")
        context = ssl.create_default_context(cafile=upstream.ssl_ca_cert)
        if upstream.cert_file:
            context.load_cert_chain(upstream.cert_file, upstream.key_file)
        self._server_hostname = upstream.tls_server_name or None
        self._session = aiohttp.ClientSession(
            connector=aiohttp.TCPConnector(ssl=context, limit=0),
            auto_decompress=False,  # the bytes go back as the API server sent them
            skip_auto_headers=("Accept", "Accept-Encoding", "User-Agent"),
            timeout=aiohttp.ClientTimeout(total=None),
        )
        ca, cert, key = Pki(SERVER_NAME, names=[SERVER_NAME]).write(self._folder)
        tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        tls.load_cert_chain(cert, key)
        app = web.Application(client_max_size=64 * 1024**2)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handler_cancellation=True, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0, ssl_context=tls)
        await site.start()
        port = self._runner.addresses[0][1]
        self._write_kubeconfig(f"https://127.0.0.1:{port}", ca)

    async def _close(self) -> None:
        if self._fault is not None:
            self._fault.over.set()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def _write_kubeconfig(self, server: str, ca: Path) -> None:
        document: dict[str, Any] = yaml.safe_load(self._cluster_kubeconfig.read_text())
        for entry in document["clusters"]:
            cluster = entry["cluster"]
            for key in (
                "certificate-authority-data",
                "tls-server-name",
                "insecure-skip-tls-verify",
            ):
                cluster.pop(key, None)
            cluster.update(
                {"server": server, "certificate-authority": str(ca), "tls-server-name": SERVER_NAME}
            )
        self.kubeconfig.write_text(yaml.safe_dump(document))

    # -- the proxy ---------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        seen = None
        if request.path in self._seen:
            seen = Seen(request.method, time.monotonic())
            self._seen[request.path].append(seen)
        fault = self._fault
        if seen and fault and fault.path == request.path and not fault.over.is_set():
            seen.held = True
            if fault.opened is None:
                fault.opened = seen.arrived
                if fault.seconds is not None:
                    self._loop.call_later(fault.seconds, fault.over.set)
            try:
                await fault.over.wait()
            except asyncio.CancelledError:  # the client gave up: never sent on
                seen.outcome = "dropped"
                raise
        response = await self._forward(request)
        if seen is not None:
            seen.outcome, seen.status = "forwarded", response.status
        return response

    async def _forward(self, request: web.Request) -> web.StreamResponse:
        assert self._session is not None
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _NOT_FORWARDED}
        body = await request.read()
        async with self._session.request(
            request.method,
            URL(self._upstream + request.raw_path, encoded=True),
            headers=headers,
            data=body or None,
            allow_redirects=False,
            server_hostname=self._server_hostname,
        ) as upstream:
            response = web.StreamResponse(status=upstream.status, reason=upstream.reason)
            for key, value in upstream.headers.items():
                if key.lower() not in _NOT_FORWARDED:
                    response.headers.add(key, value)
            if upstream.content_length is not None:
                response.content_length = upstream.content_length
            await response.prepare(request)
            sent = self._sent(request)
            gzipped = upstream.headers.get("Content-Encoding") == "gzip"
            decoder = zlib.decompressobj(16 + zlib.MAX_WBITS) if gzipped else None
            async for chunk in upstream.content.iter_any():
                if sent is not None:
                    sent.count(decoder.decompress(chunk) if decoder else chunk)
                await response.write(chunk)
            if sent is not None:
                sent.done()
            await response.write_eof()
            return response

    def _sent(self, request: web.Request) -> Sent | None:
        """A record of what `request` receives, if its path is under a recorded prefix."""
        if request.method != "GET":
            return None
        for prefix, records in self._recorded.items():
            if request.path.startswith(prefix):
                records.append(Sent(request.path, dict(request.query)))
                return records[-1]
        return None


@contextmanager
def fault_proxy(cluster_kubeconfig: Path, folder: Path) -> Iterator[FaultProxy]:
    """A FaultProxy in front of the cluster of `cluster_kubeconfig`, while the block runs."""
    proxy = FaultProxy(cluster_kubeconfig, folder)
    proxy.start()
    try:
        yield proxy
    finally:
        proxy.stop()
