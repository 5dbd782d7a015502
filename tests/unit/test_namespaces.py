"""WATCH_NAMESPACE names that the operator may not list: kopf falls back at once, not after ~54 s
of retried 403s. Plain fakes for the client and kopf's observer."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from runner.app import namespaces
from runner.app.kopf_import import kopf
from runner.kube.client import ApiError, Request


class FakeClient:
    def __init__(self, error: Exception | None) -> None:
        self.error = error
        self.sent: list[Request] = []

    async def send(self, request: Request, timeout: float = 30.0) -> Any:
        self.sent.append(request)
        if self.error is not None:
            raise self.error
        return {"items": []}


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
    ("error", "may"),
    [
        (None, True),
        (ApiError(403, "Forbidden", '{"message": "namespaces is forbidden"}'), False),
        (ApiError(500, "Internal", "{}"), True),
        (ConnectionRefusedError(), True),
    ],
)
def test_may_list_namespaces_is_false_only_on_403(error: Exception | None, may: bool) -> None:
    client = FakeClient(error)
    assert asyncio.run(namespaces.may_list_namespaces(client)) is may  # type: ignore[arg-type]
    (request,) = client.sent
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
    asyncio.run(namespaces.skip_refused_namespace_scan(FakeClient(None), ["a"]))  # type: ignore[arg-type]
    assert observation.namespace_observer is original
    refused = FakeClient(ApiError(403, "Forbidden", "{}"))
    asyncio.run(namespaces.skip_refused_namespace_scan(refused, ["team-*"]))  # type: ignore[arg-type]
    assert observation.namespace_observer is original and refused.sent == []
    asyncio.run(namespaces.skip_refused_namespace_scan(refused, ["a"]))  # type: ignore[arg-type]
    assert observation.namespace_observer.__wrapped__ is original  # type: ignore[attr-defined]
