"""API server outages in the log: one warning when it becomes unreachable, one line when it is
back, no tracebacks for connection errors.

Every client of the API notices an outage on its own, many times: kopf's watches ("Request
attempt #n failed; will retry: ... -> ClientConnectorError(...)", then a traceback when they
escalate), our requests, the dependent watches, the leader elector, the recorder. This is the
one place that turns all of that into the state change `runner.kube.reachability` logs:

- `OutageFilter`, on the log handler, drops each record whose exception (its exc_info, or an
  exception among its arguments) is a connection error, and kopf's retry lines about one, and
  reports it as a failed request instead;
- runner/kube/probe.py's `Prober` asks the server for /version every second while it is
  unreachable, so that "back" is said as soon as it answers, even if nothing else of ours needs
  the API then.

The same filter lowers kopf's retry lines about a 429 to debug level: an expected transient that
kopf retries (the first list of a kind whose CRD was just applied is answered "storage is
(re)initializing"; API Priority and Fairness asks clients to come back later), not an error. The
last attempt's line, when kopf gives up, stays an error.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Mapping

from runner.kube.reachability import API, Reachability, is_connection_error

log = logging.getLogger("runner.outage")

# kopf formats the error into the message: "... failed; will retry: GET url -> ClientConnector
# Error(...)"; these names are connection errors (aiohttp's and the OS's).
_KOPF_CONNECTION_LINE = re.compile(
    r"(ClientConnectorError|ClientConnectionError|ServerDisconnectedError|ClientOSError|"
    r"ServerTimeoutError|ConnectionTimeoutError|SocketTimeoutError|ConnectionRefusedError|"
    r"ConnectionResetError|ConnectionAbortedError|TimeoutError|ClientPayloadError)\("
)
# "Request attempt #1/9 failed; will retry: GET url -> APITooManyRequestsError(429, ...)"
_KOPF_RETRIED_429 = re.compile(r"failed; will retry: .* -> APITooManyRequestsError\(")


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
            if _KOPF_RETRIED_429.search(message):
                record.levelno, record.levelname = logging.DEBUG, "DEBUG"
                return logging.getLogger(record.name).isEnabledFor(logging.DEBUG)
        return True


def install(reachability: Reachability = API) -> OutageFilter:
    """Put the filter on the root logger's handlers (after `runner.util.logs.setup`)."""
    outage = OutageFilter(reachability)
    for handler in logging.getLogger().handlers:
        handler.addFilter(outage)
    return outage
