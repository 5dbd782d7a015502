"""Whether the API server answers: one warning when it stops, one line when it is back.

During an outage every client of the API fails at once and over and over: kopf's watches, our
requests (`KubeClient`, `AsyncUpstream`: the roles' proxy and the dependent watches), the
leader elector, the Event recorder. Instead of a line (or a traceback) from each of them, the
transport errors are reported here (`failed`), and any answer of the server (`succeeded`, even
an error status: it is up) ends the outage. `is_connection_error` says which errors mean "the
server cannot be reached" (the only code besides the clients that knows aiohttp's exception
types, and urllib3's: the `kubernetes` package's, which exec plugins and auth-providers use);
the app's log filter sends those it finds in log records here too.
"""

from __future__ import annotations

import errno
import logging
import ssl
import sys
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime

import aiohttp

log = logging.getLogger("runner.api")

_CONNECTION_ERRORS: tuple[type[BaseException], ...] = (
    ConnectionError,  # refused, reset, aborted, broken pipe (all OSError)
    TimeoutError,  # builtin (OSError): connect and read timeouts
    aiohttp.ClientConnectionError,  # ClientConnectorError, ServerDisconnectedError, timeouts
    aiohttp.ClientPayloadError,  # a response (a watch stream) cut off when the server went
)
# urllib3's, looked up only once something imported it (the operator itself does not).
_URLLIB3_ERRORS = (
    "NewConnectionError",
    "ConnectTimeoutError",
    "ReadTimeoutError",
    "ProtocolError",  # connection aborted / reset mid-response
    "MaxRetryError",
)


def _connection_errors() -> tuple[type[BaseException], ...]:
    urllib3_exceptions = sys.modules.get("urllib3.exceptions")
    if urllib3_exceptions is None:
        return _CONNECTION_ERRORS
    return _CONNECTION_ERRORS + tuple(getattr(urllib3_exceptions, n) for n in _URLLIB3_ERRORS)


_UNREACHABLE_ERRNOS = frozenset({errno.EHOSTUNREACH, errno.ENETUNREACH, errno.ENETDOWN})


def _chain(err: BaseException | None) -> Iterator[BaseException]:
    """`err`, then what it was raised from (its cause, else its context), outermost first."""
    seen: set[int] = set()
    while err is not None and id(err) not in seen:
        seen.add(id(err))
        yield err
        err = err.__cause__ or err.__context__


def is_connection_error(err: BaseException | None) -> bool:
    """`err` (or what it was raised from) means the API server could not be reached."""
    errors = _connection_errors()
    return any(
        isinstance(e, errors) or (isinstance(e, OSError) and e.errno in _UNREACHABLE_ERRNOS)
        for e in _chain(err)
    )


def certificate_error(err: BaseException | None) -> ssl.SSLCertVerificationError | None:
    """The failed check of the server's certificate that `err` is (or was raised from), if any:
    not an outage, but a kubeconfig (or a certificate) to fix."""
    found = None
    for e in _chain(err):
        if isinstance(e, ssl.SSLCertVerificationError):
            found = e  # the innermost: aiohttp's wrapper is one too
    return found


def summary(err: BaseException | str) -> str:
    """One line for an error: its type and the first line of its message."""
    if isinstance(err, str):
        return err.splitlines()[0] if err else ""
    text = str(err).splitlines()[0] if str(err) else ""
    return f"{type(err).__name__}: {text}" if text else type(err).__name__


class Reachability:
    """The API server's state as the operator sees it: reachable, or unreachable since when."""

    def __init__(
        self, clock: Callable[[], float] = time.monotonic, logger: logging.Logger = log
    ) -> None:
        self.server = "the API server"
        self._clock = clock
        self._log = logger
        self._lock = threading.Lock()  # runs and exec plugins fail in worker threads too
        self._down_since: float | None = None
        self._down_at = ""
        self._failures = 0
        #: called (from any thread) when the server becomes unreachable: the app probes it
        self.on_unreachable: Callable[[], None] | None = None

    @property
    def reachable(self) -> bool:
        return self._down_since is None

    def failed(self, err: BaseException | str, source: str = "") -> None:
        """A request could not reach the server; the first one after it was reachable logs
        one warning."""
        with self._lock:
            self._failures += 1
            if self._down_since is not None:
                return
            self._down_since = self._clock()
            self._down_at = datetime.now(UTC).strftime("%H:%M:%S")
            self._failures = 1
        self._log.warning(
            "API server %s unreachable since %s UTC (%s%s); retrying, and saying so once it is "
            "back",
            self.server,
            self._down_at,
            f"{source}: " if source else "",
            summary(err),
        )
        if self.on_unreachable is not None:
            self.on_unreachable()

    def succeeded(self) -> None:
        """The server answered (any status): after an outage, one line says it is back."""
        if self._down_since is None:  # the common case: no lock
            return
        with self._lock:
            if self._down_since is None:
                return
            down = self._clock() - self._down_since
            failures = self._failures
            self._down_since = None
            self._failures = 0
        self._log.info(
            "API server %s is back after %.0f s (%d requests failed meanwhile)",
            self.server,
            down,
            failures,
        )


#: The operator's one view of its API server (the clients report to it, the app's log filter
#: and probe use it).
API = Reachability()
