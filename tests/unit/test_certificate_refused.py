"""A server certificate that does not verify is a kubeconfig to fix, not an outage: the client
raises `CertificateRejected` (which names the server, the name checked and what to set) without
reporting an outage, and the operator's first request turns it into one line and exit 1. A real
TLS server on 127.0.0.1 whose certificate names only `api.example`."""

from __future__ import annotations

import asyncio
import socket
from collections.abc import Iterator
from pathlib import Path

import fake_api
import pytest

from runner.app.source.login import certificate_refused
from runner.kube.client import CertificateRejected, KubeClient, Request
from runner.kube.credentials import Credentials
from runner.kube.reachability import Reachability

NAME = "api.example"


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT, serving a certificate for NAME only; and the CA's file."""
    with fake_api.serving_certificate_for(NAME, tmp_path) as served:
        yield served


async def _send(credentials: Credentials, reachability: Reachability) -> BaseException | None:
    client = KubeClient(credentials, reachability)
    try:
        await client.send(Request("GET", "/version"), timeout=10)
    except Exception as err:  # the test reads which error
        return err
    finally:
        await client.close()
    return None


async def _first(credentials: Credentials, reachability: Reachability) -> str | None:
    """What the operator's first request says (`certificate_refused`)."""
    client = KubeClient(credentials, reachability)
    try:
        return await certificate_refused(client)
    finally:
        await client.close()


def test_the_address_not_in_the_certificate_says_to_set_tls_server_name(
    tls_server: tuple[str, Path],
) -> None:
    server, ca = tls_server
    reachability = Reachability()
    credentials = Credentials(server=server, ca_file=str(ca), source="kubeconfig /k")
    err = asyncio.run(_send(credentials, reachability))
    assert isinstance(err, CertificateRejected), err
    assert isinstance(err, ConnectionError)  # code that waits out outages still catches it
    text = str(err)
    assert f"the API server {server} presented a certificate that does not verify" in text
    assert "for the name '127.0.0.1' against its certificate-authority" in text
    # OpenSSL's own reason, not aiohttp's wrapper of it
    assert "certificate-authority: IP address mismatch, certificate is not valid for" in text
    assert "Cannot connect" not in text and "SSL:" not in text
    assert "Credentials: kubeconfig /k; if the certificate names another host, set " in text
    assert "tls-server-name" in text
    assert "\n" not in text
    assert reachability.reachable  # not reported as an outage


def test_a_wrong_tls_server_name_says_which_name_was_checked(
    tls_server: tuple[str, Path],
) -> None:
    server, ca = tls_server
    wrong = Credentials(server=server, ca_file=str(ca), tls_server_name="other.example")
    err = asyncio.run(_send(wrong, Reachability()))
    assert isinstance(err, CertificateRejected), err
    assert "for the name 'other.example'" in str(err)
    assert str(err).endswith("fix tls-server-name or certificate-authority")


def test_an_unknown_ca_names_the_systems_cas(tls_server: tuple[str, Path]) -> None:
    server, _ = tls_server
    err = asyncio.run(_send(Credentials(server=server, tls_server_name=NAME), Reachability()))
    assert isinstance(err, CertificateRejected), err
    assert "against the system's CAs: unable to get local issuer certificate." in str(err)


def test_the_first_request_returns_the_line_to_print(tls_server: tuple[str, Path]) -> None:
    server, ca = tls_server
    refused = asyncio.run(_first(Credentials(server=server, ca_file=str(ca)), Reachability()))
    assert refused is not None and "set tls-server-name" in refused
    named = Credentials(server=server, ca_file=str(ca), tls_server_name=NAME)
    # it verifies (the fake answers a Lease: any answer will do)
    assert asyncio.run(_first(named, Reachability())) is None


def test_an_outage_at_the_first_request_is_not_a_certificate_to_fix() -> None:
    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    reachability = Reachability()
    assert (
        asyncio.run(_first(Credentials(server=f"https://127.0.0.1:{port}"), reachability)) is None
    )
    assert not reachability.reachable  # an outage, reported as one
