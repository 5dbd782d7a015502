"""API server outages in the log: one warning when it becomes unreachable, one line when it is
back, no tracebacks for connection errors.

Every client of the API notices an outage on its own, many times: kopf's watches ("Request
attempt #n failed; will retry: ... -> ClientConnectorError(...)", then a traceback when they
escalate), our requests, the dependent watches, the leader elector, the recorder. This is the
one place that turns all of that into the state change `runner.kube.reachability` logs:

- `OutageFilter`, on the log handler, drops each record whose exception (its exc_info, or an
  exception among its arguments) is a connection error, and kopf's retry lines about one, and
  reports it as a failed request instead;
- `Prober` asks the server for /version every second while it is unreachable, so that "back"
  is said as soon as it answers, even if nothing else of ours needs the API then.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import re
from collections.abc import Mapping

from runner.kube.client import KubeClient, Request
from runner.kube.reachability import API, Reachability, is_connection_error

log = logging.getLogger("runner.outage")

# kopf formats the error into the message: "... failed; will retry: GET url -> ClientConnector
# Error(...)"; these names are connection errors (aiohttp's and the OS's).
_KOPF_CONNECTION_LINE = re.compile(
    r"(ClientConnectorError|ClientConnectionError|ServerDisconnectedError|ClientOSError|"
    r"ServerTimeoutError|ConnectionTimeoutError|SocketTimeoutError|ConnectionRefusedError|"
    r"ConnectionResetError|ConnectionAbortedError|TimeoutError|ClientPayloadError)\("
)


def _exception_of(record: logging.LogRecord) -> BaseException | None:
    if record.exc_info and isinstance(record.exc_info[1], BaseException):
        return record.exc_info[1]
    args = record.args
    values = args.values() if isinstance(args, Mapping) else (args or ())
    for value in values:
        if isinstance(value, BaseException):
            return value
    return None


class OutageFilter(logging.Filter):
    """Connection errors in log records become `Reachability.failed` (one warning per outage)."""

    def __init__(self, reachability: Reachability = API) -> None:
        super().__init__()
        self.reachability = reachability

    def filter(self, record: logging.LogRecord) -> bool:
        if record.name == "runner.api":
            return True  # the state changes themselves
        err = _exception_of(record)
        if err is not None and is_connection_error(err):
            self.reachability.failed(err, record.name)
            return False
        if record.name.startswith("kopf") and record.levelno >= logging.WARNING:
            message = record.getMessage()
            match = _KOPF_CONNECTION_LINE.search(message)
            if match:
                self.reachability.failed(message[match.start() :], "kopf")
                return False
        return True


def install(reachability: Reachability = API) -> OutageFilter:
    """Put the filter on the root logger's handlers (after `runner.util.logs.setup`)."""
    outage = OutageFilter(reachability)
    for handler in logging.getLogger().handlers:
        handler.addFilter(outage)
    return outage


class Prober:
    """While the server is unreachable, ask it for /version every `every` s until it answers."""

    def __init__(
        self, client: KubeClient, reachability: Reachability = API, every: float = 1.0
    ) -> None:
        self.client = client
        self.reachability = reachability
        self.every = every
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """From now on an outage starts the probe (call on the event loop)."""
        self._loop = asyncio.get_running_loop()
        self.reachability.on_unreachable = self._wake
        if not self.reachability.reachable:
            self._probe_soon()

    def _wake(self) -> None:  # any thread
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._probe_soon)

    def _probe_soon(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._probe(), name="api-probe")

    async def _probe(self) -> None:
        while not self.reachability.reachable:
            await asyncio.sleep(self.every)
            with contextlib.suppress(Exception):  # the client reports the outcome itself
                await self.client.send(Request("GET", "/version"), timeout=self.every * 2)

    async def stop(self) -> None:
        self.reachability.on_unreachable = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
