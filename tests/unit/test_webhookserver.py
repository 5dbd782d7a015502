"""The webhook server (HTTPS, path -> handler) and the registrations it is reached by."""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import time
from typing import Any

import aiohttp
import pytest
from fake_api import FakeApi

from runner.app.serving.bind import BindAddress
from runner.app.webhooks.certificates import GeneratedCertificates, Lifetimes, MemoryStore
from runner.app.webhooks.registrar import (
    Registrar,
    Registration,
    contains,
    replacing_patch,
    with_ca_bundle,
)
from runner.app.webhooks.server import TIMEOUT_KEY, WebhookServer, parse_timeout
from runner.kube import objects

PATH = "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/hooks"


async def _certificates() -> GeneratedCertificates:
    certs = GeneratedCertificates(MemoryStore(), ["127.0.0.1"], Lifetimes(ca=3600, cert=600))
    await certs.ensure()
    return certs


def test_reviews_in_and_out_over_https() -> None:
    async def go() -> None:
        certs = await _certificates()
        server = WebhookServer(BindAddress("127.0.0.1", 0), certs.context)
        seen: list[dict[str, Any]] = []

        async def review(body: dict[str, Any]) -> dict[str, Any]:
            seen.append(body)
            if body.get("boom"):
                raise RuntimeError("a bug")
            return {"kind": "AdmissionReview", "response": {"allowed": True}}

        server.add("/validate-x", review)
        with pytest.raises(ValueError, match="has a handler"):
            server.add("/validate-x", review)
        await server.start()
        assert server.serving and server.port > 0
        bundle = certs.ca_bundle()
        assert bundle is not None
        tls = ssl.create_default_context(cadata=bundle.decode())
        base = f"https://127.0.0.1:{server.port}"
        async with aiohttp.ClientSession(connector=aiohttp.TCPConnector(ssl=tls)) as http:
            async with http.post(f"{base}/validate-x?timeout=7s", json={"a": 1}) as answer:
                assert answer.status == 200
                assert await answer.json() == {
                    "kind": "AdmissionReview",
                    "response": {"allowed": True},
                }
            assert seen == [{"a": 1, TIMEOUT_KEY: 7.0}]
            async with http.post(f"{base}/nothing", json={}) as answer:
                assert answer.status == 404
            async with http.get(f"{base}/validate-x") as answer:
                assert answer.status == 405
            async with http.post(f"{base}/validate-x", data=b"{not json") as answer:
                assert answer.status == 400
            async with http.post(f"{base}/validate-x", json=[1]) as answer:
                assert answer.status == 400
            async with http.post(f"{base}/validate-x", json={"boom": 1}) as answer:
                assert answer.status == 500
        assert await server.check(bundle, "127.0.0.1") == (True, "webhooks serve")
        server._checked = None
        ready, why = await server.check(bundle, "elsewhere.example")
        assert not ready and "elsewhere.example" in why
        with pytest.raises(RuntimeError):
            server.add("/late", review)
        await server.stop()

    asyncio.run(go())


def test_the_api_servers_timeout_parameter() -> None:
    assert parse_timeout("10s") == 10.0
    assert parse_timeout("1500ms") == 1.5
    assert parse_timeout(None) is None
    assert parse_timeout("soon") is None
    assert parse_timeout("0s") is None


def test_the_bundle_goes_into_every_client_config() -> None:
    value = [{"name": "a", "clientConfig": {"url": "https://x"}}, {"name": "b"}]
    put = with_ca_bundle(value, b"PEM")
    assert put[0]["clientConfig"] == {
        "url": "https://x",
        "caBundle": base64.b64encode(b"PEM").decode(),
    }
    assert put[1] == {"name": "b"}
    assert value[0]["clientConfig"] == {"url": "https://x"}  # a copy
    conversion = {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "u"}}}
    assert with_ca_bundle(conversion, b"P")["webhook"]["clientConfig"]["caBundle"] == "UA=="
    assert with_ca_bundle(value, None) is value


def test_what_the_api_server_adds_does_not_count_as_a_difference() -> None:
    wanted = [{"name": "a", "rules": [{"operations": ["CREATE"]}]}]
    existing = [
        {
            "name": "a",
            "matchPolicy": "Equivalent",
            "rules": [{"operations": ["CREATE"], "scope": "*"}],
        }
    ]
    assert contains(existing, wanted)
    assert not contains(existing + existing, wanted)
    assert not contains([{"name": "a", "rules": [{"operations": ["UPDATE"]}]}], wanted)
    patch = replacing_patch(
        {"strategy": "Webhook", "webhook": {"clientConfig": {"service": {}}}},
        {"strategy": "Webhook", "webhook": {"clientConfig": {"url": "u"}}},
    )
    assert patch == {
        "strategy": "Webhook",
        "webhook": {"clientConfig": {"url": "u", "service": None}},
    }


def _registration(delete_at_stop: bool = False) -> Registration:
    webhooks = [{"name": "v.example.com", "clientConfig": {"url": "https://127.0.0.1:9443/v"}}]
    return Registration(
        objects.VALIDATING_WEBHOOK_CONFIGURATIONS,
        "hooks",
        ("webhooks",),
        webhooks,
        delete_at_stop=delete_at_stop,
    )


def test_the_registrar_creates_patches_and_deletes(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()

    async def go() -> None:
        certs = await _certificates()
        registrar = Registrar(api.client(), certs, period=3600)
        registrar.add(_registration(delete_at_stop=True))
        await registrar.start()
        created = api.get(PATH)
        assert created is not None
        assert created["metadata"]["labels"] == {"app.kubernetes.io/managed-by": "operator-runner"}
        config = created["webhooks"][0]["clientConfig"]
        assert base64.b64decode(config["caBundle"]) == certs.ca_bundle()
        # what the API server adds is left alone: no write
        created["webhooks"][0]["matchPolicy"] = "Equivalent"
        api.put(PATH, created)
        assert await registrar.sync()
        assert len(api.sent("PATCH")) == 0
        # an edit by hand is put back, with the bundle
        created["webhooks"][0]["clientConfig"] = {"url": "https://elsewhere"}
        api.put(PATH, created)
        assert await registrar.sync()
        patched = api.get(PATH)
        assert patched is not None
        assert patched["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/v"
        assert "caBundle" in patched["webhooks"][0]["clientConfig"]
        [warning] = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
        assert "changed by someone else (it pointed at https://elsewhere)" in warning
        # said once: the next change is an info line
        patched["webhooks"][0]["clientConfig"] = {"service": {"namespace": "x", "name": "y"}}
        api.put(PATH, patched)
        assert await registrar.sync()
        assert len([r for r in caplog.records if r.levelname == "WARNING"]) == 1
        assert api.get(PATH)["webhooks"][0]["clientConfig"]["url"] == "https://127.0.0.1:9443/v"
        # a rotation: the subscribers write the new bundle
        certs._clock = lambda: time.time() + 3000
        await certs.ensure()
        rotated = api.get(PATH)
        assert rotated is not None
        bundle = base64.b64decode(rotated["webhooks"][0]["clientConfig"]["caBundle"])
        assert bundle == certs.ca_bundle() and bundle.count(b"BEGIN CERTIFICATE") == 2
        await registrar.stop()
        assert api.get(PATH) is None

    asyncio.run(go())


def test_a_write_refused_is_logged_once_and_tried_again(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    fault = api.fail(method="GET", status=403)

    async def go() -> None:
        registrar = Registrar(api.client(), None)
        registrar.add(_registration())
        assert not await registrar.sync()
        assert not await registrar.sync()
        assert len([r for r in caplog.records if "cannot be written" in r.message]) == 1
        assert "patch" in registrar.problems[0]
        api.faults.remove(fault)
        assert await registrar.sync()
        assert registrar.problems == []
        stored = api.get(PATH)
        assert stored is not None and "caBundle" not in json.dumps(stored)  # not ours

    asyncio.run(go())


class _Part:
    """A user of the webhook server, as admission and conversion are."""

    def handlers(self) -> dict[str, Any]:
        async def convert(body: dict[str, Any]) -> dict[str, Any]:
            return {"kind": "ConversionReview", "response": {"uid": body["request"]["uid"]}}

        return {"/convert": convert}

    async def registrations(self, client_config: Any) -> list[Registration]:
        conversion = {
            "strategy": "Webhook",
            "webhook": {
                "clientConfig": client_config("/convert"),
                "conversionReviewVersions": ["v1"],
            },
        }
        return [
            Registration(
                objects.CUSTOM_RESOURCE_DEFINITIONS,
                "things.example.com",
                ("spec", "conversion"),
                conversion,
                exit_value={"strategy": "None", "webhook": None},
            )
        ]


def test_webhooks_in_make_runs_way_and_deployed(tmp_path: Any) -> None:
    from runner.app.webhooks.assembly import Webhooks, WebhookSettings

    api = FakeApi()
    crd_path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/things.example.com"
    api.put(
        crd_path, {"metadata": {"name": "things.example.com"}, "spec": {"group": "example.com"}}
    )

    async def go() -> None:
        settings = WebhookSettings(BindAddress("127.0.0.1", 0), "hooks", cert_dir=tmp_path)
        webhooks = Webhooks(settings, api.client(), [_Part()])
        await webhooks.start()
        crd = api.get(crd_path)
        assert crd is not None and crd["spec"]["group"] == "example.com"
        config = crd["spec"]["conversion"]["webhook"]["clientConfig"]
        assert config["url"] == f"https://127.0.0.1:{webhooks.server.port}/convert"
        assert base64.b64decode(config["caBundle"]) == webhooks.certificates.ca_bundle()
        assert await webhooks.readiness() == (True, "webhooks serve")
        await webhooks.stop()
        crd = api.get(crd_path)  # make run's: set back at exit
        assert crd is not None and crd["spec"]["conversion"] == {"strategy": "None"}

    asyncio.run(go())
    api.put(
        crd_path, {"metadata": {"name": "things.example.com"}, "spec": {"group": "example.com"}}
    )

    async def deployed() -> None:
        settings = WebhookSettings(
            BindAddress("127.0.0.1", 0), "hooks", cert_dir=tmp_path, service=("ops", "hooks-svc")
        )
        webhooks = Webhooks(settings, api.client(), [_Part()])
        await webhooks.start()
        crd = api.get(crd_path)
        assert crd is not None
        service = crd["spec"]["conversion"]["webhook"]["clientConfig"]["service"]
        assert service == {"namespace": "ops", "name": "hooks-svc", "path": "/convert", "port": 443}
        assert api.get("/api/v1/namespaces/ops/secrets/hooks-cert") is not None
        assert await webhooks.readiness() == (True, "webhooks serve")  # hooks-svc.ops.svc
        await webhooks.stop()
        crd = api.get(crd_path)
        assert crd is not None and crd["spec"]["conversion"]["strategy"] == "Webhook"

    asyncio.run(deployed())
