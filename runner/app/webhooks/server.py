"""The webhook server: HTTPS on `--webhook-bind-address` (`:9443`, controller-runtime's), where
the API server sends its AdmissionReviews (validate, mutate) and ConversionReviews (convert).

Handlers are added by path before `start` (Kubebuilder's paths: `/validate-<group with
dashes>-<version>-<kind>`, `/mutate-...`, `/convert`). A handler takes the review as the JSON
the API server sent and returns the review to answer, and it answers in time: the server does
the HTTP around it, as controller-runtime's webhook server does:

- POST only (405 otherwise), a JSON body of at most 8 MiB (413), JSON that is a mapping (400);
  a path without a handler is 404;
- `?timeout=10s`, which the API server adds to every call, reaches the handler as `timeout`
  (seconds) in the body's top level, under `"_timeout"`;
- a handler that raises is logged with its path and answered 500 (the API server then applies
  the webhook's failurePolicy).

The SSL context is the certificates' (certificates.py): a certificate renewed or read again
serves from the next connection on. `check` is the readiness probe's: a TLS handshake with this
server, verified against the CA the API server is given (a mounted certificate without its CA: the
handshake alone), as controller-runtime's `StartedChecker` dials its webhook server.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import ssl
import time
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from runner.app.serving.bind import BindAddress, Endpoint

log = logging.getLogger("runner.webhooks")

#: A review in (the JSON the API server sent), the review to answer out.
Handler = Callable[[dict[str, Any]], Awaitable[dict[str, Any]]]
MAX_BODY = 8 * 1024 * 1024  # the API server's requests: objects up to ~3 MiB, twice for UPDATE
TIMEOUT_KEY = "_timeout"  # the call's ?timeout= in seconds, added to the body for the handler
CHECK_EVERY = 5.0  # seconds a readiness answer is reused


def parse_timeout(text: str | None) -> float | None:
    """The API server's `timeout` query parameter (a Go duration such as `10s`, `500ms`)."""
    if not text:
        return None
    from runner.util.durations import parse_go_duration

    try:
        seconds = parse_go_duration(text)
    except ValueError:
        return None
    return seconds if seconds > 0 else None


class WebhookServer:
    """The HTTPS server of the webhooks: path -> handler."""

    def __init__(self, address: BindAddress, context: ssl.SSLContext) -> None:
        self.address = address
        self.context = context
        self._handlers: dict[str, Handler] = {}
        self._endpoint: Endpoint | None = None
        self._checked: tuple[float, bool, str] | None = None

    def add(self, path: str, handler: Handler) -> None:
        """Serve `handler` on `path` (before `start`; one handler per path)."""
        if self._endpoint is not None:
            raise RuntimeError("webhook handlers are added before the server starts")
        if path in self._handlers:
            raise ValueError(f"webhook path {path} has a handler already")
        self._handlers[path] = handler

    @property
    def paths(self) -> list[str]:
        return sorted(self._handlers)

    @property
    def port(self) -> int:
        """The port it listens on (the kernel's choice for port 0); 0 before `start`."""
        if self._endpoint is None or not self._endpoint.bound:
            return 0
        return int(self._endpoint.bound[0].rsplit(":", 1)[1])

    @property
    def serving(self) -> bool:
        return self._endpoint is not None and bool(self._endpoint.bound)

    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        return app

    async def start(self) -> None:
        """Listen (a port that is taken stops start-up with one message naming the flag)."""
        endpoint = Endpoint(
            "webhooks", self.app(), self.address, "--webhook-bind-address", ssl_context=self.context
        )
        await endpoint.start()
        self._endpoint = endpoint
        log.info("webhook paths: %s", ", ".join(self.paths) or "(none)")

    async def stop(self) -> None:
        if self._endpoint is not None:
            await self._endpoint.stop()
            self._endpoint = None

    # -- requests -----------------------------------------------------------------------------

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        handler = self._handlers.get(request.path)
        if handler is None:
            return web.Response(status=404, text=f"no webhook at {request.path}\n")
        if request.method != "POST":
            return web.Response(status=405, text="webhooks take POST\n", headers={"Allow": "POST"})
        try:
            body = await request.json(loads=json.loads)
        except web.HTTPRequestEntityTooLarge:
            return web.Response(status=413, text=f"body larger than {MAX_BODY} bytes\n")
        except ValueError as err:
            return web.Response(status=400, text=f"the body is not JSON: {err}\n")
        if not isinstance(body, dict):
            return web.Response(status=400, text="the body is not a JSON object\n")
        timeout = parse_timeout(request.query.get("timeout"))
        if timeout is not None:
            body[TIMEOUT_KEY] = timeout
        try:
            answer = await handler(body)
        except asyncio.CancelledError:
            raise
        except Exception:
            log.exception("webhook %s failed", request.path)
            return web.Response(status=500, text="the webhook failed; see the operator's log\n")
        return web.json_response(answer)

    # -- readiness ----------------------------------------------------------------------------

    async def check(self, ca_pem: bytes | None, server_name: str) -> tuple[bool, str]:
        """Whether this server answers TLS with a certificate that `ca_pem` verifies for
        `server_name` (None: a handshake, unverified); the answer is kept CHECK_EVERY s."""
        now = time.monotonic()
        if self._checked is not None and now - self._checked[0] < CHECK_EVERY:
            return self._checked[1], self._checked[2]
        if not self.serving:
            result = (False, "webhook server not started")
        else:
            result = await _handshake(self.port, ca_pem, server_name)
        self._checked = (now, *result)
        return result


async def _handshake(port: int, ca_pem: bytes | None, server_name: str) -> tuple[bool, str]:
    if ca_pem is not None:
        context = ssl.create_default_context(cadata=ca_pem.decode())
    else:  # a certificate from a folder, without its CA: the handshake alone
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    try:
        _, writer = await asyncio.wait_for(
            asyncio.open_connection(
                "127.0.0.1", port, ssl=context, server_hostname=server_name or None
            ),
            timeout=3.0,
        )
    except (OSError, TimeoutError, ssl.SSLError) as err:
        reason = getattr(err, "verify_message", "") or str(err) or type(err).__name__
        return False, f"webhook server: TLS to 127.0.0.1:{port} as {server_name}: {reason}"
    writer.close()
    with contextlib.suppress(OSError, ssl.SSLError):
        await writer.wait_closed()
    return True, "webhooks serve"
