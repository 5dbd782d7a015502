"""The webhooks' certificates: made, kept, rotated (ca.py, certificates.py)."""

from __future__ import annotations

import asyncio
import base64
import ssl
import time
from pathlib import Path

from fake_api import FakeApi

from runner.app.serving.tlsfiles import CertFiles
from runner.app.webhooks import ca as webhookca
from runner.app.webhooks.certificates import (
    BUNDLE,
    CA_CRT,
    TLS_CRT,
    GeneratedCertificates,
    Lifetimes,
    MemoryStore,
    MountedCertificates,
    SecretStore,
    mounted,
    next_look,
    plan,
)

NAMES = ["127.0.0.1", "localhost"]
SHORT = Lifetimes(ca=300.0, cert=90.0)  # settle: 15 s


def _verifies(bundle: bytes, cert: bytes, name: str) -> bool:
    """Whether a client trusting `bundle` accepts `cert` for `name` (the chain, the name)."""
    return any(webhookca.signed_by(cert, ca) for ca in webhookca.split_bundle(bundle)) and (
        name in webhookca.names_of(cert)
    )


def test_a_first_plan_makes_a_ca_and_a_certificate_for_the_names() -> None:
    now = time.time()
    data = plan(None, NAMES, SHORT, now)
    assert data is not None
    assert webhookca.split_bundle(data[BUNDLE]) == [data[CA_CRT]]
    assert webhookca.names_of(data[TLS_CRT]) == {"127.0.0.1", "localhost"}
    assert _verifies(data[BUNDLE], data[TLS_CRT], "127.0.0.1")
    assert plan(data, NAMES, SHORT, now + 1) is None  # nothing due


def test_the_serving_certificate_is_signed_again_with_a_third_of_its_life_left() -> None:
    now = time.time()
    data = plan(None, NAMES, SHORT, now)
    assert data is not None
    assert plan(data, NAMES, SHORT, now + 55) is None
    renewed = plan(data, NAMES, SHORT, now + 62)
    assert renewed is not None
    assert renewed[CA_CRT] == data[CA_CRT] and renewed[BUNDLE] == data[BUNDLE]
    assert renewed[TLS_CRT] != data[TLS_CRT]
    assert webhookca.not_after(renewed[TLS_CRT]) > webhookca.not_after(data[TLS_CRT])


def test_new_names_get_a_new_certificate() -> None:
    now = time.time()
    data = plan(None, NAMES, SHORT, now)
    assert data is not None
    names = ["svc.ns.svc", "svc.ns.svc.cluster.local"]
    changed = plan(data, names, SHORT, now + 1)
    assert changed is not None and webhookca.names_of(changed[TLS_CRT]) == set(names)


def test_a_ca_rotation_goes_old_and_new_then_new() -> None:
    start = time.time()
    data = plan(None, NAMES, SHORT, start)
    assert data is not None
    old_ca = data[CA_CRT]
    # a third of the CA's life left: the next CA joins the bundle, the certificate stays
    at = start + 205
    rotated = plan(data, NAMES, SHORT, at)
    assert rotated is not None
    assert rotated[CA_CRT] != old_ca
    assert webhookca.split_bundle(rotated[BUNDLE]) == [rotated[CA_CRT], old_ca]
    assert webhookca.signed_by(rotated[TLS_CRT], old_ca)  # still served meanwhile
    assert plan(rotated, NAMES, SHORT, at + 10) is None  # not settled yet
    assert next_look(rotated, SHORT, at) <= 15.0
    # settled: the certificate moves to the new CA; both stay trusted
    moved = plan(rotated, NAMES, SHORT, at + 16)
    assert moved is not None
    assert webhookca.signed_by(moved[TLS_CRT], moved[CA_CRT])
    assert _verifies(moved[BUNDLE], moved[TLS_CRT], "localhost")
    assert len(webhookca.split_bundle(moved[BUNDLE])) == 2
    # the old CA expired: it leaves the bundle
    later = plan(moved, NAMES, SHORT, start + 301)
    assert later is not None
    assert webhookca.split_bundle(later[BUNDLE]) == [moved[CA_CRT]]


def test_data_that_is_not_ours_to_read_starts_afresh() -> None:
    data = plan({"ca.crt": b"junk"}, NAMES, SHORT, time.time())
    assert data is not None and _verifies(data[BUNDLE], data[TLS_CRT], "localhost")


def test_generated_certificates_serve_tls_and_tell_subscribers_first() -> None:
    async def go() -> None:
        clock = [time.time()]
        certs = GeneratedCertificates(MemoryStore(), NAMES, SHORT, clock=lambda: clock[0])
        seen: list[bytes | None] = []

        async def changed() -> None:
            seen.append(certs.ca_bundle())
            assert certs.serving_cert is None or seen  # told before a new certificate serves

        certs.subscribe(changed)
        await certs.ensure()
        bundle = certs.ca_bundle()
        assert bundle is not None and seen == [bundle]
        server = await asyncio.start_server(
            lambda r, w: w.close(), "127.0.0.1", 0, ssl=certs.context
        )
        port = server.sockets[0].getsockname()[1]
        client = ssl.create_default_context(cadata=bundle.decode())
        _, writer = await asyncio.open_connection("127.0.0.1", port, ssl=client)
        writer.close()
        server.close()
        await certs.ensure()
        assert seen == [bundle]  # nothing changed, nobody told

    asyncio.run(go())


def test_the_secret_store_and_two_replicas() -> None:
    api = FakeApi()

    async def go() -> None:
        one = GeneratedCertificates(SecretStore(api.client(), "ops", "hooks-cert"), NAMES, SHORT)
        two = GeneratedCertificates(SecretStore(api.client(), "ops", "hooks-cert"), NAMES, SHORT)
        await asyncio.gather(one.ensure(), two.ensure())  # both see none; one create wins
        assert one.ca_bundle() == two.ca_bundle()
        assert one.serving_cert == two.serving_cert
        secret = api.get("/api/v1/namespaces/ops/secrets/hooks-cert")
        assert secret is not None
        assert base64.b64decode(secret["data"]["ca-bundle.crt"]) == one.ca_bundle()
        assert secret["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "operator-runner"}
        assert len(api.sent("POST")) == 2 and len(api.sent("PUT")) == 0

    asyncio.run(go())


def test_a_mounted_folder(tmp_path: Path) -> None:
    assert mounted(tmp_path) is None
    now = time.time()
    data = plan(None, NAMES, SHORT, now)
    assert data is not None
    (tmp_path / "tls.crt").write_bytes(data[TLS_CRT])
    (tmp_path / "tls.key").write_bytes(data["tls.key"])
    files = mounted(tmp_path)
    assert files == CertFiles(tmp_path / "tls.crt", tmp_path / "tls.key")
    certs = MountedCertificates(files)
    assert certs.ca_bundle() is None and certs.ca_pem is None
