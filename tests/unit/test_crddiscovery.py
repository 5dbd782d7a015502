"""A CRD whose Established event comes before discovery lists it: kopf's scan is repeated until
discovery does. kopf's own Selector and Resource; a plain fake for kopf's processor, whose scan
finds the resource only from its n-th call."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fake_api import FakeApi
from kopf._cogs.structs.references import Resource, Selector
from kopf._core.reactor import observation as kopf_observation

from runner.app.source import crddiscovery, kopf_import
from runner.app.source.kopf_import import kopf

GROUP = "late.example.dev"
THING = Resource(GROUP, "v1", "things", kind="Thing", namespaced=True, preferred=True)
DELAYS = (0.0, 0.0, 0.0, 0.0)


def crd_event(
    event_type: str | None = "MODIFIED",
    *,
    group: str = GROUP,
    established: bool = True,
    deleting: bool = False,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": f"things.{group}"}
    if deleting:
        metadata["deletionTimestamp"] = "2026-12-03T00:00:00Z"
    status = "True" if established else "False"
    return {
        "type": event_type,
        "object": {
            "metadata": metadata,
            "spec": {
                "group": group,
                "names": {"kind": "Thing", "plural": "things"},
                "versions": [{"name": "v1", "served": True}, {"name": "v0", "served": False}],
            },
            "status": {"conditions": [{"type": "Established", "status": status}]},
        },
    }


class Watching:
    def __init__(self, selectors: list[Selector]) -> None:
        self.selectors = selectors

    def get_all_selectors(self) -> set[Selector]:
        return set(self.selectors)


class Registry:
    def __init__(self, *selectors: Selector) -> None:
        self._watching = Watching(list(selectors))


class Insights:
    def __init__(self) -> None:
        self.watched_resources: set[Resource] = set()


class LaggingScan:
    """kopf's processor: each call is one scan; discovery lists it from call `found_at` on."""

    def __init__(self, found_at: int | None) -> None:
        self.found_at = found_at
        self.calls = 0

    async def __call__(self, *, raw_event: Any, insights: Insights, **_: Any) -> None:
        self.calls += 1
        if self.found_at is not None and self.calls >= self.found_at:
            insights.watched_resources.add(THING)


def process(scan: LaggingScan, event: dict[str, Any], *selectors: Selector) -> Insights:
    insights = Insights()
    processor = crddiscovery.retrying(scan, DELAYS)
    asyncio.run(
        processor(
            raw_event=event,
            settings=None,
            registry=Registry(*selectors),
            insights=insights,
            stream_pressure=None,
        )
    )
    return insights


WATCHED = Selector(group=GROUP, version="v1", kind="Thing")


def test_a_lagging_discovery_is_scanned_again_until_it_lists_the_resource() -> None:
    scan = LaggingScan(found_at=3)
    insights = process(scan, crd_event(), WATCHED)
    assert scan.calls == 3
    assert insights.watched_resources == {THING}


def test_a_scan_that_finds_it_at_once_is_not_repeated() -> None:
    scan = LaggingScan(found_at=1)
    process(scan, crd_event(), WATCHED)
    assert scan.calls == 1


@pytest.mark.parametrize(
    "event",
    [
        crd_event(None),  # kopf's initial listing
        crd_event("ADDED", established=False),  # names not accepted yet: no discovery expected
        crd_event("DELETED"),
        crd_event(deleting=True),
        crd_event(group="other.example.dev"),  # a CRD none of our watches names
    ],
    ids=["listing", "not-established", "deleted", "deleting", "not-ours"],
)
def test_events_that_need_no_resource_are_processed_once(event: dict[str, Any]) -> None:
    scan = LaggingScan(found_at=None)
    process(scan, event, WATCHED)
    assert scan.calls == 1


def test_a_watch_of_a_version_the_crd_does_not_serve_is_not_waited_for() -> None:
    scan = LaggingScan(found_at=None)
    process(scan, crd_event(), Selector(group=GROUP, version="v0", kind="Thing"))
    assert scan.calls == 1


def test_discovery_that_never_lists_it_gives_one_warning_after_the_retries(
    caplog: pytest.LogCaptureFixture,
) -> None:
    scan = LaggingScan(found_at=None)
    with caplog.at_level(logging.WARNING, logger="runner.manager"):
        process(scan, crd_event(), WATCHED)
    assert scan.calls == 1 + len(DELAYS)
    (record,) = caplog.records
    assert "things.late.example.dev" in record.getMessage()
    assert "Thing.v1" in record.getMessage()


def test_installing_wraps_kopfs_processor_once(monkeypatch: pytest.MonkeyPatch) -> None:
    original = kopf_observation.process_discovered_resource_event
    monkeypatch.setattr(kopf_observation, "process_discovered_resource_event", original)
    crddiscovery.serve_crds_despite_discovery_lag()
    crddiscovery.serve_crds_despite_discovery_lag()
    wrapped = kopf_observation.process_discovered_resource_event
    assert wrapped is not original
    assert wrapped.__wrapped__ is original  # type: ignore[attr-defined]


# -- without the permission to list and watch CRDs ----------------------------------------------

REVIEWS = "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews"


def rbac(api: FakeApi, allowed: set[str]) -> None:
    """The API server's answer to a SelfSubjectAccessReview about CRDs: `allowed` verbs."""

    def review(body: dict[str, Any]) -> dict[str, Any]:
        attributes = body["spec"]["resourceAttributes"]
        assert (attributes["group"], attributes["resource"]) == (
            "apiextensions.k8s.io",
            "customresourcedefinitions",
        )
        return {**body, "status": {"allowed": attributes["verb"] in allowed}}

    api.answer(REVIEWS, review)


@pytest.mark.parametrize(
    ("allowed", "expected"),
    [({"list", "watch"}, True), ({"list"}, False), (set(), False)],
)
def test_may_watch_crds_asks_the_api_server(allowed: set[str], expected: bool) -> None:
    api = FakeApi()
    rbac(api, allowed)
    assert asyncio.run(crddiscovery.may_watch_crds(api.client())) is expected


def test_may_watch_crds_when_the_api_server_cannot_tell_leaves_it_to_kopf() -> None:
    api = FakeApi()
    api.fail(method="POST", path=REVIEWS, status=500)
    assert asyncio.run(crddiscovery.may_watch_crds(api.client()))


class ReadyInsights(Insights):
    def __init__(self) -> None:
        super().__init__()
        self.ready_resources = asyncio.Event()


def test_without_the_permission_kopf_scans_at_start_only_and_discovery_is_polled(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kopf's observer gets `scanning.disabled` (its initial scan, no CRD list); a watched kind
    discovery did not list at start is found by scanning its group again; one info line."""
    api = FakeApi()
    rbac(api, set())
    seen: list[bool] = []

    async def observer(*, settings: Any, registry: Any, insights: ReadyInsights) -> None:
        seen.append(settings.scanning.disabled)
        insights.ready_resources.set()  # the initial scan: Thing's CRD not installed yet
        await asyncio.Event().wait()

    scan = LaggingScan(found_at=2)
    monkeypatch.setattr(kopf_observation, "resource_observer", observer)
    monkeypatch.setattr(kopf_observation, "process_discovered_resource_event", scan)
    monkeypatch.setattr(crddiscovery, "POLL_EVERY", 0.01)
    settings = kopf.OperatorSettings()
    insights = ReadyInsights()

    async def go() -> None:
        await crddiscovery.serve_crds_without_watching_them(api.client())
        await crddiscovery.serve_crds_without_watching_them(api.client())  # idempotent
        wrapped = kopf_observation.resource_observer
        assert wrapped.__wrapped__ is observer  # type: ignore[attr-defined]
        task = asyncio.create_task(
            wrapped(settings=settings, registry=Registry(WATCHED), insights=insights)
        )
        for _ in range(500):
            if insights.watched_resources:
                break
            await asyncio.sleep(0.01)
        task.cancel()
        await asyncio.gather(task, return_exceptions=True)

    with caplog.at_level(logging.INFO, logger="runner.manager"):
        asyncio.run(go())
    assert seen == [True] and not settings.scanning.disabled  # a copy was changed
    assert insights.watched_resources == {THING}
    assert scan.calls == 2  # polled until discovery listed it
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert len([m for m in infos if m.startswith("CustomResourceDefinitions:")]) == 1
    assert any("Thing late.example.dev is served now" in m for m in infos), infos


def test_a_watch_whose_crd_is_gone_ends_its_round_and_says_so_once(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """kopf's list after a watch closed gets 404 (the CRD deleted): the round ends quietly,
    kopf lists again; one info line until the kind is served again; other errors go on."""
    not_found = kopf_import.not_found_error()
    rounds: list[str] = []

    async def stream(**kwargs: Any) -> Any:
        rounds.append(kwargs["resource"])
        if len(rounds) in (1, 2, 4):  # the list: 404, as kopf raises it (its fields unread)
            raise not_found.__new__(not_found)
        yield {"type": None, "object": {}}  # served (again)
        if len(rounds) == 5:
            raise RuntimeError("another failure")

    monkeypatch.setattr(crddiscovery, "GONE_BACKOFF", 0.0)
    wrapped = crddiscovery._surviving_its_crd(stream)

    async def go() -> list[Any]:
        events = []
        for _ in range(4):
            events += [event async for event in wrapped(resource="things.v1.late.example.dev")]
        with pytest.raises(RuntimeError):
            events += [event async for event in wrapped(resource="things.v1.late.example.dev")]
        return events

    caplog.set_level(logging.DEBUG, logger="runner.manager")
    assert len(asyncio.run(go())) == 1  # round 3's (round 5's went with its error)
    said = [(r.levelno, r.getMessage()) for r in caplog.records if "not served" in r.getMessage()]
    assert [level for level, _ in said] == [logging.INFO, logging.DEBUG, logging.INFO], said
