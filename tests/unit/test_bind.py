"""Bind addresses of --metrics-bind-address and --health-probe-bind-address."""

from __future__ import annotations

import pytest

from runner.app.cli.commands import build_parser
from runner.app.serving.bind import BindAddress, BindAddressError, parse_bind_address


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (":8080", BindAddress(None, 8080)),
        ("127.0.0.1:9090", BindAddress("127.0.0.1", 9090)),
        ("localhost:6789", BindAddress("localhost", 6789)),
        ("0.0.0.0:0", BindAddress("0.0.0.0", 0)),
        ("[::1]:8443", BindAddress("::1", 8443)),
        ("[::]:80", BindAddress("::", 80)),
        (" :8080 ", BindAddress(None, 8080)),
    ],
)
def test_addresses(text: str, expected: BindAddress) -> None:
    assert parse_bind_address(text) == expected


@pytest.mark.parametrize("text", ["0", "", "  "])
def test_zero_or_empty_switches_the_endpoint_off(text: str) -> None:
    assert parse_bind_address(text) is None


@pytest.mark.parametrize(
    "text", ["8080", "localhost", ":http", ":65536", ":-1", "::1:8080", "[::1:8080", "[]:80", ":"]
)
def test_bad_addresses(text: str) -> None:
    with pytest.raises(BindAddressError):
        parse_bind_address(text)


def test_str_round_trips() -> None:
    for text in (":8080", "127.0.0.1:1", "[::1]:8443"):
        address = parse_bind_address(text)
        assert address is not None
        assert str(address) == text


def test_cli_defaults_are_operator_sdk_s() -> None:
    args = build_parser().parse_args(["run"])
    assert args.metrics_bind_address == ":8443"  # ansible-operator-plugins' (v1.30: :8080)
    assert args.health_probe_bind_address == ":6789"
    assert args.leader_elect is False
    assert args.leader_election_id is None
    assert args.leader_election_namespace is None
    assert (args.leader_elect_lease_duration, args.leader_elect_renew_deadline) == (15.0, 10.0)
    assert args.leader_elect_retry_period == 2.0


def test_cli_flags() -> None:
    args = build_parser().parse_args(
        [
            "run",
            "--metrics-bind-address=0",
            "--health-probe-bind-address=127.0.0.1:7000",
            "--leader-elect",
            "--leader-election-id=my-operator",
            "--leader-election-namespace=ops",
            "--leader-elect-lease-duration=30s",
        ]
    )
    assert args.metrics_bind_address == "0"
    assert args.health_probe_bind_address == "127.0.0.1:7000"
    assert args.leader_elect is True
    assert (args.leader_election_id, args.leader_election_namespace) == ("my-operator", "ops")
    assert args.leader_elect_lease_duration == 30.0
    assert build_parser().parse_args(["run", "--leader-elect=false"]).leader_elect is False


def test_cli_rejects_a_bad_address(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["run", "--metrics-bind-address=8080"])
    assert "has no port" in capsys.readouterr().err


def test_a_taken_port_names_the_flag() -> None:
    import asyncio
    import errno
    import socket

    from aiohttp import web

    from runner.app.serving.bind import Endpoint

    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        endpoint = Endpoint(
            "metrics", web.Application(), BindAddress("127.0.0.1", port), "--metrics-bind-address"
        )
        with pytest.raises(SystemExit) as exc:
            asyncio.run(endpoint.start())
    message = str(exc.value)
    assert f"cannot serve metrics on 127.0.0.1:{port}" in message
    assert f"--metrics-bind-address=:{port + 1}" in message
    assert "--metrics-bind-address=0 to switch it off" in message
    default = Endpoint(
        "metrics", web.Application(), BindAddress(None, 8080), "--metrics-bind-address"
    )
    in_use = OSError(errno.EADDRINUSE, "Address already in use")
    assert "kubectl" in default.bind_error(in_use)  # why :8080 in particular is often taken


def test_stop_cancels_a_request_still_in_flight_after_its_grace() -> None:
    """A handler that never answers holds stop() for its grace, not aiohttp's 60 s."""
    import asyncio
    import time

    import aiohttp
    from aiohttp import web

    from runner.app.serving.bind import Endpoint

    entered = asyncio.Event()
    cancelled: list[bool] = []

    async def stuck(_: web.Request) -> web.Response:
        entered.set()
        try:
            await asyncio.Event().wait()  # never set: a request that does not end by itself
        except asyncio.CancelledError:
            cancelled.append(True)
            raise
        raise AssertionError("unreachable")

    async def scenario() -> float:
        app = web.Application()
        app.router.add_get("/", stuck)
        endpoint = Endpoint("test", app, BindAddress("127.0.0.1", 0), stop_grace=0.5)
        await endpoint.start()
        async with aiohttp.ClientSession() as session:
            request = asyncio.ensure_future(session.get(f"http://{endpoint.bound[0]}/"))
            await asyncio.wait_for(entered.wait(), 10)
            started = time.monotonic()
            await asyncio.wait_for(endpoint.stop(), 20)
            took = time.monotonic() - started
            request.cancel()
        return took

    took = asyncio.run(scenario())
    assert cancelled == [True]
    assert took < 10, f"stop() took {took:.1f} s"
