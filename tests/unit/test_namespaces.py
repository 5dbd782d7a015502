"""WATCH_NAMESPACE names that the operator may not list: kopf falls back at once, not after ~54 s
of retried 403s. The fake API for the client, a plain fake for kopf's observer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
from fake_api import FakeApi

from runner.app.source import namespaces
from runner.app.source.kopf_import import kopf


def refusing(**fault: Any) -> FakeApi:
    """The fake API, every request of which meets `Fault(**fault)` (none: answered)."""
    api = FakeApi()
    if fault:
        api.fail(**fault)
    return api


@pytest.mark.parametrize(
    ("given", "exact"),
    [
        (["a"], True),
        (["a", "b-2"], True),
        ([], False),
        (["team-*"], False),
        (["!kube-system"], False),
        (["ns?"], False),
    ],
)
def test_exact_names(given: list[str], exact: bool) -> None:
    assert namespaces.exact_names(given) is exact


@pytest.mark.parametrize(
    ("fault", "may"),
    [
        ({}, True),
        ({"status": 403}, False),
        ({"status": 500}, True),
        ({"error": ConnectionRefusedError()}, True),
    ],
)
def test_may_list_namespaces_is_false_only_on_403(fault: dict[str, Any], may: bool) -> None:
    api = refusing(**fault)
    assert asyncio.run(namespaces.may_list_namespaces(api.client())) is may
    (request,) = api.requests
    assert (request.method, request.url_path) == ("GET", "/api/v1/namespaces?limit=1")


def test_the_wrapped_observer_gets_no_backoff_and_the_settings_stay_as_they_were() -> None:
    seen: list[Any] = []

    async def observer(*, settings: kopf.OperatorSettings, **kwargs: Any) -> None:
        seen.append((tuple(settings.networking.error_backoffs), kwargs))

    settings = kopf.OperatorSettings()
    before = tuple(settings.networking.error_backoffs)
    asyncio.run(namespaces._without_backoff(observer)(settings=settings, clusterwide=False))
    assert seen == [((), {"clusterwide": False})]
    assert tuple(settings.networking.error_backoffs) == before != ()


def test_nothing_changes_when_the_list_is_allowed_or_the_names_are_patterns(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from kopf._core.reactor import observation

    original = observation.namespace_observer
    monkeypatch.setattr(observation, "namespace_observer", original)
    asyncio.run(namespaces.skip_refused_namespace_scan(refusing().client(), ["a"]))
    assert observation.namespace_observer is original
    refused = refusing(status=403)
    asyncio.run(namespaces.skip_refused_namespace_scan(refused.client(), ["team-*"]))
    assert observation.namespace_observer is original and refused.requests == []
    asyncio.run(namespaces.skip_refused_namespace_scan(refused.client(), ["a"]))
    assert observation.namespace_observer.__wrapped__ is original  # type: ignore[attr-defined]
