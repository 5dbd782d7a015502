"""A watch's `selector` on the API server's side: kopf sends it with its list and watch of the
watch's kind, and a CR that stops matching (which the API server then reports as DELETED) is
no longer reconciled."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from runner.app.source import watching
from runner.app.source.kopf_import import kopf
from runner.control.controller import Controller
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.interface import Outcome
from runner.reconcile.reconciler import Reconciler
from runner.watches import GVK, Watch
from runner.watches.labelselectors import selector_text

SELECTOR = {"matchLabels": {"tier": "web"}}
THING = GVK("x.io", "v1", "Thing")
REF = ObjectRef(Resource("x.io", "v1", "things", "Thing", True), "ns", "t")


def test_the_kopf_settings_send_each_watchs_selector_for_its_kind_only() -> None:
    """kopf puts settings.watching.label_selectors into the labelSelector of its list and watch
    of a resource (and chunk_size into their limit): the API server sends only the CRs the
    watch selects, a page at a time."""
    selected = Watch(THING, role="/r", selector=SELECTOR)
    plain = Watch(GVK("x.io", "v1", "Other"), role="/r")
    settings = watching.settings(30.0, [selected, plain])

    def resource(kind: str, version: str = "v1") -> kopf.Resource:
        return kopf.Resource("x.io", version, kind.lower() + "s", kind=kind, namespaced=True)

    collect = settings.watching.label_selectors.collect
    assert collect(resource("Thing")) == ["tier=web"] == [selector_text(SELECTOR)]
    assert collect(resource("Other")) == []
    assert collect(resource("Thing", "v2")) == []
    assert settings.watching.chunk_size == 500


@dataclass
class Runs:
    """A reconciler whose runs wait for `release` and say to come back after `period`."""

    watch: Watch = field(default_factory=lambda: Watch(THING, role="/r", selector=SELECTOR))
    release: asyncio.Event = field(default_factory=asyncio.Event)
    started: list[str] = field(default_factory=list)

    async def reconcile(self, key: ObjectRef) -> Outcome:
        self.started.append(key.name)
        await self.release.wait()
        return Outcome(requeue_after=600, periodic=True)


def body(generation: int, **labels: str) -> dict[str, Any]:
    return {"metadata": {"generation": generation, "labels": labels}}


def test_a_cr_that_stops_matching_during_its_run_is_not_requeued() -> None:
    async def go() -> None:
        runs = Runs()
        controller = Controller(cast(Reconciler, runs), workers=1)
        controller.start()
        controller.on_event(REF, "ADDED", body(1, tier="web"))
        while not runs.started:
            await asyncio.sleep(0.001)
        controller.on_event(REF, "DELETED", body(1, tier="db"))  # out of the selection
        runs.release.set()
        while controller.running(REF):
            await asyncio.sleep(0.001)
        assert len(controller.queue) == 0, "no resync of a CR that is not selected"
        assert controller.enqueue_named("ns", "t") is False, "its dependents trigger nothing"
        controller.on_event(REF, "ADDED", body(1, tier="web"))  # selected again
        while len(runs.started) < 2:
            await asyncio.sleep(0.001)
        while controller.running(REF):
            await asyncio.sleep(0.001)
        assert len(controller.queue) == 1, "its resync is queued again"
        await controller.stop(1)

    asyncio.run(go())


def test_a_queued_run_of_a_cr_that_stops_matching_is_dropped() -> None:
    runs = Runs()
    controller = Controller(cast(Reconciler, runs), workers=1)
    controller.on_event(REF, "ADDED", body(1, tier="web"))
    assert len(controller.queue) == 1
    controller.on_event(REF, "MODIFIED", body(1, tier="db"))  # a client-side selector's view
    assert len(controller.queue) == 0
