"""API outages in the log: connection errors become one warning and one "back" line
(runner/kube/reachability.py, runner/app/source/outage.py, runner/kube/probe.py)."""

from __future__ import annotations

import asyncio
import http.server
import logging
import socket
import threading
from collections.abc import Iterator

import aiohttp
import pytest
import urllib3.exceptions
from fake_api import FakeClock

from runner.app.source.outage import OutageFilter
from runner.kube.client import ApiError, ApiUnreachable, KubeClient, Request
from runner.kube.credentials import Credentials
from runner.kube.probe import Prober
from runner.kube.reachability import Reachability, is_connection_error


@pytest.fixture
def state(caplog: pytest.LogCaptureFixture) -> Reachability:
    caplog.set_level(logging.INFO, logger="runner.api")
    return Reachability(clock=FakeClock(100.0))


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records if r.name == "runner.api"]


def refused_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.mark.parametrize(
    "err",
    [
        ConnectionRefusedError(111, "Connection refused"),
        ConnectionResetError(104, "reset"),
        TimeoutError("timed out"),
        aiohttp.ServerDisconnectedError(),
        aiohttp.ClientPayloadError("Response payload is not completed"),
        urllib3.exceptions.NewConnectionError(None, "Failed to establish a new connection"),
        urllib3.exceptions.ReadTimeoutError(None, "/apis", "Read timed out."),
        urllib3.exceptions.ProtocolError("Connection aborted."),
        ApiUnreachable("GET /x: the API server cannot be reached"),
    ],
)
def test_connection_errors(err: BaseException) -> None:
    assert is_connection_error(err)


def test_a_connection_error_it_was_raised_from_counts() -> None:
    try:
        try:
            raise ConnectionRefusedError(111, "refused")
        except OSError as inner:
            raise RuntimeError("request failed") from inner
    except RuntimeError as outer:
        assert is_connection_error(outer)


@pytest.mark.parametrize(
    "err", [ValueError("bad"), ApiError(500, "Internal", "{}"), KeyError("x"), None]
)
def test_other_errors_are_not_connection_errors(err: BaseException | None) -> None:
    assert not is_connection_error(err)


def test_an_outage_is_one_warning_and_one_back_line(
    state: Reachability, caplog: pytest.LogCaptureFixture
) -> None:
    state.server = "https://api:6443"
    state.succeeded()  # no outage: nothing to say
    for _ in range(100):
        state.failed(ConnectionRefusedError(111, "Connection refused"), "GET /apis")
    assert not state.reachable
    state._clock.now += 42  # type: ignore[attr-defined]
    state.succeeded()
    state.succeeded()
    assert state.reachable
    (down, back) = lines(caplog)
    assert down[0] == "WARNING"
    assert "API server https://api:6443 unreachable since" in down[1]
    assert "GET /apis: ConnectionRefusedError: [Errno 111] Connection refused" in down[1]
    assert back == (
        "INFO",
        "API server https://api:6443 is back after 42 s (100 requests failed meanwhile)",
    )


def test_the_filter_turns_connection_errors_into_the_state_change(
    state: Reachability, caplog: pytest.LogCaptureFixture
) -> None:
    outage = OutageFilter(state)

    def record(name: str, msg: str, *args: object, exc: BaseException | None = None) -> bool:
        rec = logging.LogRecord(name, logging.ERROR, __file__, 1, msg, args, None)
        if exc is not None:
            rec.exc_info = (type(exc), exc, None)
        return outage.filter(rec)

    refused = ConnectionRefusedError(111, "Connection refused")
    assert not record("kopf.objects", "Watcher has failed", exc=refused), "no traceback"
    assert not record("runner.events", "could not record Event %s: %s", "x", refused)
    assert not record(
        "kopf._cogs.clients.api",
        "Request attempt #3/9 failed; will retry: GET https://api/apis -> "
        "ClientConnectorError(ConnectionKey(host='api'), ConnectionRefusedError(111, 'x'))",
    )
    assert record("runner.controller", "reconcile error: %s", ValueError("a bug")), "kept"
    assert record("kopf.objects", "Handler failed", exc=ValueError("a bug")), "kept"
    assert len(lines(caplog)) == 1, "one warning for all of them"
    assert record("runner.api", "API server x unreachable"), "its own lines pass"


def test_kopfs_retried_429_is_a_debug_line_and_giving_up_stays_an_error(
    state: Reachability,
) -> None:
    """The first list of a kind whose CRD was just applied: 429 "storage is (re)initializing",
    retried by kopf: an expected transient, not an error line."""
    outage = OutageFilter(state)
    retried = logging.LogRecord(
        "kopf._cogs.clients.api",
        logging.ERROR,
        __file__,
        1,
        "Request attempt #1/9 failed; will retry: GET https://api/apis/x.io/v1/things -> "
        "APITooManyRequestsError(429, 'storage is (re)initializing')",
        (),
        None,
    )
    kopf = logging.getLogger("kopf._cogs.clients.api")
    level = kopf.level
    try:
        kopf.setLevel(logging.WARNING)  # as runner.util.logs sets kopf at --zap-log-level=info
        assert not outage.filter(retried)
        assert retried.levelname == "DEBUG"
        kopf.setLevel(logging.DEBUG)  # --zap-log-level=debug: shown, as a debug line
        retried.levelno, retried.levelname = logging.ERROR, "ERROR"
        assert outage.filter(retried) and retried.levelname == "DEBUG"
    finally:
        kopf.setLevel(level)
    escalated = logging.LogRecord(
        "kopf._cogs.clients.api",
        logging.ERROR,
        __file__,
        1,
        "Request attempt #9/9 failed; escalating: GET https://api/apis/x.io/v1/things -> "
        "APITooManyRequestsError(429, 'storage is (re)initializing')",
        (),
        None,
    )
    assert outage.filter(escalated) and escalated.levelname == "ERROR"
    assert state.reachable, "no outage either"


class _Version(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        self.send_response(200)
        self.send_header("Content-Length", "2")
        self.end_headers()
        self.wfile.write(b"{}")

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def api_server() -> Iterator[int]:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Version)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield int(server.server_address[1])
    server.shutdown()
    server.server_close()


def test_the_client_reports_an_unreachable_server_as_an_oserror(state: Reachability) -> None:
    async def go() -> None:
        client = KubeClient(Credentials(server=f"http://127.0.0.1:{refused_port()}"), state)
        try:
            await client.send(Request("GET", "/version"), timeout=2)
        finally:
            await client.close()

    with pytest.raises(ApiUnreachable) as caught:
        asyncio.run(go())
    assert isinstance(caught.value, OSError), "callers that retry OSErrors retry it"
    assert "the API server http://127.0.0.1:" in str(caught.value)
    assert not state.reachable


def test_the_prober_says_back_as_soon_as_the_server_answers(
    state: Reachability, api_server: int, caplog: pytest.LogCaptureFixture
) -> None:
    async def go() -> None:
        client = KubeClient(Credentials(server=f"http://127.0.0.1:{api_server}"), state)
        prober = Prober(client, state, every=0.05)
        prober.start()
        state.failed(ConnectionRefusedError(111, "refused"), "kopf")
        async with asyncio.timeout(5):
            while not state.reachable:
                await asyncio.sleep(0.01)
        await prober.stop()

    asyncio.run(go())
    assert [level for level, _ in lines(caplog)] == ["WARNING", "INFO"]
