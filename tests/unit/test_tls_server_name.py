"""A kubeconfig's `tls-server-name`: the certificate is checked against that name, not the host
dialled, by every client of the operator. A real TLS server on 127.0.0.1 whose certificate names
only `api.example`; the operator's client, the aiohttp session of the roles' proxy and the
dependent watches, and kopf's session (its watches), as our login gives it."""

from __future__ import annotations

import asyncio
import http.client
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import fake_api
import pytest

from runner.app.source.kopf_import import kopf
from runner.app.source.login import connection_info
from runner.kube.client import AsyncUpstream, KubeClient, get_lease
from runner.kube.credentials import Credentials
from runner.kube.tlsname import ServerNamedContext

NAME = "api.example"


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT, serving a certificate for NAME only; and the CA's file."""
    with fake_api.serving_certificate_for(NAME, tmp_path) as served:
        yield served


async def _both(credentials: Credentials) -> list[Any]:
    """What the operator's client and the proxy's session each get: the body, or the error."""
    got: list[Any] = []
    client = KubeClient(credentials)
    try:
        got.append(await client.send(get_lease("ns", "name"), timeout=10))
    except Exception as err:  # the test reads which error
        got.append(err)
    finally:
        await client.close()
    upstream = AsyncUpstream(credentials)
    try:
        async with upstream.session.get(upstream.url("/apis")) as response:
            got.append(await response.json())
    except aiohttp.ClientError as err:
        got.append(err)
    finally:
        await upstream.close()
    got.append(await _kopf_reads(connection_info(credentials)))
    return got


async def _kopf_reads(info: kopf.ConnectionInfo) -> Any:
    """What kopf's own session (the one its watches use) gets."""
    from kopf._cogs.clients.auth import APIContext

    context = APIContext(info)
    try:
        async with context.session.get(info.server + "/apis") as response:
            return await response.json()
    except aiohttp.ClientError as err:
        return err
    finally:
        await context.session.close()


def test_every_client_checks_the_certificate_against_tls_server_name(
    tls_server: tuple[str, Path],
) -> None:
    server, ca = tls_server
    named = Credentials(server=server, ca_file=str(ca), tls_server_name=NAME)
    assert asyncio.run(_both(named)) == [{"kind": "Lease"}] * 3


def test_kopf_alone_does_not_know_tls_server_name(tls_server: tuple[str, Path]) -> None:
    """Why our login hands kopf our SSL context: its own ConnectionInfo is refused."""
    server, ca = tls_server
    got = asyncio.run(_kopf_reads(kopf.ConnectionInfo(server=server, ca_path=str(ca))))
    assert "certificate" in str(got).lower(), got


def test_without_it_the_same_certificate_is_refused_for_the_address(
    tls_server: tuple[str, Path],
) -> None:
    server, ca = tls_server
    got = asyncio.run(_both(Credentials(server=server, ca_file=str(ca))))
    assert len(got) == 3
    assert all("certificate" in str(err).lower() for err in got), got


def test_a_wrong_tls_server_name_is_refused(tls_server: tuple[str, Path]) -> None:
    server, ca = tls_server
    wrong = Credentials(server=server, ca_file=str(ca), tls_server_name="other.example")
    got = asyncio.run(_both(wrong))
    assert all("certificate" in str(err).lower() for err in got), got


def test_a_blocking_client_on_the_context_checks_the_name_too(
    tls_server: tuple[str, Path],
) -> None:
    """`wrap_socket` (http.client, urllib) as `wrap_bio` (asyncio): the name, not the host."""
    server, ca = tls_server
    port = int(server.rsplit(":", 1)[1])
    for name, ok in ((NAME, True), ("other.example", False)):
        conn = http.client.HTTPSConnection(
            "127.0.0.1", port, context=ServerNamedContext(name, str(ca))
        )
        try:
            conn.request("GET", "/apis")
            assert ok and conn.getresponse().status == 200
        except ssl.SSLCertVerificationError:
            assert not ok
        finally:
            conn.close()


def test_the_named_context_keeps_the_default_contexts_checks(tmp_path: Path) -> None:
    ca, _, _ = fake_api.Pki(NAME, names=[NAME]).write(tmp_path)
    named = ServerNamedContext(NAME, str(ca))
    default = ssl.create_default_context(cafile=str(ca))
    assert named.verify_mode == default.verify_mode == ssl.CERT_REQUIRED
    assert named.check_hostname and default.check_hostname
    assert named.verify_flags == default.verify_flags
    assert named.options == default.options
    assert named.minimum_version == default.minimum_version
