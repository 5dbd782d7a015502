"""The conversion webhook as a part of the operator's webhooks: `/convert` and the CRDs'
`spec.conversion` (runner/app/manager/conversion.py)."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fake_api import FakeApi

from runner.app.manager.conversion import ConversionPart, conversion_spec, crd_names
from runner.app.serving.webhookserver import TIMEOUT_KEY
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


def test_the_crds_of_the_converted_kinds_are_found_by_discovery(
    caplog: pytest.LogCaptureFixture,
) -> None:
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

    async def names() -> list[str]:
        client = api.client()
        try:
            return await crd_names(client, [FLASK, missing, plain])
        finally:
            await client.close()

    with caplog.at_level(logging.WARNING):
        assert asyncio.run(names()) == ["echoflasks.swallowlab.com"]
    assert "convert: Gone x.io/v1 is not served" in caplog.text
    assert [r.path for r in api.requests] == ["/apis/swallowlab.com/v1alpha1", "/apis/x.io/v1"]


def test_registrations_point_the_crds_at_convert() -> None:
    part = ConversionPart(Conversions([Converter(FLASK)]), ["echoflasks.swallowlab.com"])
    assert list(part.handlers()) == ["/convert"]
    [registration] = part.registrations(lambda path: {"url": f"https://127.0.0.1:9443{path}"})
    assert registration.resource == CUSTOM_RESOURCE_DEFINITIONS
    assert registration.name == "echoflasks.swallowlab.com"
    assert registration.path == ("spec", "conversion")
    assert registration.value == conversion_spec({"url": "https://127.0.0.1:9443/convert"})
    assert registration.value == {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:9443/convert"},
        },
    }
    assert not registration.delete_at_stop and registration.exit_value is None


def test_the_handler_answers_reviews_and_refuses_what_is_none() -> None:
    part = ConversionPart(Conversions([Converter(FLASK)]), [])
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
