"""A kubeconfig's `tls-server-name`: the certificate is checked against that name, not the host
dialled, by every client of the operator. A real TLS server on 127.0.0.1 whose certificate names
only `api.example`; the operator's client, the aiohttp session of the roles' proxy and the
dependent watches, and kopf's session (its watches), as our login gives it."""

from __future__ import annotations

import asyncio
import datetime
import http.server
import ssl
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from runner.app.kopf_import import kopf
from runner.app.login import connection_info
from runner.kube.client import AsyncUpstream, KubeClient, get_lease
from runner.kube.credentials import Credentials, ServerNamedContext

NAME = "api.example"


def _pki(tmp: Path) -> tuple[Path, Path, Path]:
    """ca.crt, and server.crt/server.key for NAME only (DNS), as strict X.509 checks want them."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    now = datetime.datetime.now(datetime.UTC)
    ca_key, key = ec.generate_private_key(ec.SECP256R1()), ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
    usage = dict.fromkeys(
        (
            "content_commitment",
            "key_encipherment",
            "data_encipherment",
            "key_agreement",
            "encipher_only",
            "decipher_only",
        ),
        False,
    )
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(digital_signature=False, key_cert_sign=True, crl_sign=True, **usage),
            critical=True,
        )
        .add_extension(ca_ski, critical=False)
        .sign(ca_key, hashes.SHA256())
    )
    server = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NAME)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(NAME)]), critical=False)
        .add_extension(
            x509.KeyUsage(digital_signature=True, key_cert_sign=False, crl_sign=False, **usage),
            critical=True,
        )
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    paths = (tmp / "ca.crt", tmp / "server.crt", tmp / "server.key")
    paths[0].write_bytes(ca.public_bytes(pem))
    paths[1].write_bytes(server.public_bytes(pem))
    paths[2].write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return paths


class Lease(http.server.BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = b'{"kind": "Lease"}'
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """https://127.0.0.1:PORT, serving a certificate for NAME only; and the CA's file."""
    ca, cert, key = _pki(tmp_path)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Lease)
    httpd.socket = context.wrap_socket(httpd.socket, server_side=True)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{httpd.server_address[1]}", ca
    finally:
        httpd.shutdown()
        httpd.server_close()


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


def test_the_named_context_keeps_the_default_contexts_checks(tmp_path: Path) -> None:
    ca, _, _ = _pki(tmp_path)
    named = ServerNamedContext(NAME, str(ca))
    default = ssl.create_default_context(cafile=str(ca))
    assert named.verify_mode == default.verify_mode == ssl.CERT_REQUIRED
    assert named.check_hostname and default.check_hostname
    assert named.verify_flags == default.verify_flags
    assert named.options == default.options
    assert named.minimum_version == default.minimum_version
