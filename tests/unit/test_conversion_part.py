"""The conversion webhook as a part of the operator's webhooks: `/convert` and the CRDs'
`spec.conversion` (runner/app/manager/conversion.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fake_api import FakeApi

from runner.app.manager.conversion import ConversionPart, conversion_spec
from runner.app.webhooks.registrar import Registrar, Registration
from runner.app.webhooks.server import TIMEOUT_KEY
from runner.convert.converter import Conversions, Converter
from runner.kube.objects import CUSTOM_RESOURCE_DEFINITIONS
from runner.watches import GVK, Convert, FieldMap, Watch

SIZE = FieldMap((("v1alpha1", ("spec", "size")), ("v1beta1", ("spec", "replicas"))))
FLASK = Watch(
    GVK("swallowlab.com", "v1alpha1", "EchoFlask"), role="/r", convert=Convert(fields=(SIZE,))
)


def discovery(group: str, version: str, *resources: tuple[str, str]) -> dict[str, Any]:
    return {
        "kind": "APIResourceList",
        "groupVersion": f"{group}/{version}",
        "resources": [
            {"name": plural, "kind": kind, "namespaced": True, "singularName": kind.lower()}
            for plural, kind in resources
        ],
    }


def test_registrations_point_the_crds_of_the_converted_kinds_at_convert() -> None:
    api = FakeApi()
    api.put(
        "/apis/swallowlab.com/v1alpha1",
        discovery(
            "swallowlab.com",
            "v1alpha1",
            ("echoflasks", "EchoFlask"),
            ("echoflasks/status", "EchoFlask"),
        ),
    )
    missing = Watch(GVK("x.io", "v1", "Gone"), role="/r", convert=Convert(fields=(SIZE,)))
    plain = Watch(GVK("app.my.domain", "v1", "Echo"), role="/r")

    async def registrations() -> list[Any]:
        client = api.client()
        try:
            part = ConversionPart(Conversions([Converter(FLASK)]), client, [FLASK, missing, plain])
            assert list(part.handlers()) == ["/convert"]
            return list(
                await part.registrations(lambda path: {"url": f"https://127.0.0.1:9443{path}"})
            )
        finally:
            await client.close()

    flask, gone = asyncio.run(registrations())
    assert (flask.name, gone.name) == ("echoflasks.swallowlab.com", "gones.x.io")
    for registration in (flask, gone):
        assert registration.resource == CUSTOM_RESOURCE_DEFINITIONS
        assert registration.path == ("spec", "conversion")
        assert not registration.create, "a CRD is never created by the operator"
        assert not registration.delete_at_stop and registration.exit_value is None
    assert flask.value == conversion_spec({"url": "https://127.0.0.1:9443/convert"})
    assert flask.value == {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/convert"},
        },
    }


def test_a_crd_that_is_not_there_waits_for_its_install(caplog: pytest.LogCaptureFixture) -> None:
    api = FakeApi()
    path = "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/echoflasks.swallowlab.com"
    registration = Registration(
        CUSTOM_RESOURCE_DEFINITIONS,
        "echoflasks.swallowlab.com",
        ("spec", "conversion"),
        conversion_spec({"url": "https://127.0.0.1:9443/convert"}),
        create=False,
    )

    async def go() -> None:
        client = api.client()
        registrar = Registrar(client, None)
        registrar.add(registration)
        with caplog.at_level(logging.ERROR):
            assert not await registrar.sync()
        assert registrar.problems == [
            "CustomResourceDefinition echoflasks.swallowlab.com is not there (install it: make "
            "install); its spec.conversion is written when it is"
        ]
        assert api.sent("POST") == []
        api.put(path, {"metadata": {"name": "echoflasks.swallowlab.com"}, "spec": {}})
        assert await registrar.sync()
        stored = api.get(path)
        assert stored is not None and stored["spec"]["conversion"] == registration.value
        await client.close()

    asyncio.run(go())


def test_the_handler_answers_reviews_and_refuses_what_is_none() -> None:
    part = ConversionPart(Conversions([Converter(FLASK)]), FakeApi().client(), [FLASK])
    handle = part.handlers()["/convert"]
    obj = {
        "apiVersion": "swallowlab.com/v1alpha1",
        "kind": "EchoFlask",
        "metadata": {"name": "a", "namespace": "ns", "uid": "u1"},
        "spec": {"size": 3},
    }
    body = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r1", "desiredAPIVersion": "swallowlab.com/v1beta1", "objects": [obj]},
        TIMEOUT_KEY: 30.0,
    }
    answer = asyncio.run(handle(body))
    assert answer["response"]["uid"] == "r1"
    assert answer["response"]["convertedObjects"][0]["spec"] == {"replicas": 3}
    bad = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r2"},
    }
    refused = asyncio.run(handle(bad))
    assert refused["response"]["uid"] == "r2"
    assert refused["response"]["result"] == {
        "status": "Failure",
        "message": "operator-runner: the ConversionReview's request has no desiredAPIVersion",
    }
