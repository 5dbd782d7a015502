"""runner.reconcile.recorder: Events, repeats counted, and refused ones said once."""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import pytest
from fake_api import FakeApi, FakeClock

from runner.kube import client as kube
from runner.reconcile.recorder import REPEAT_WINDOW, EventRecorder


def cr(namespace: str, name: str = "e1") -> dict[str, Any]:
    return {
        "apiVersion": "x.example.com/v1",
        "kind": "Echo",
        "metadata": {"name": name, "namespace": namespace, "uid": f"uid-{namespace}-{name}"},
    }


def events_path(namespace: str) -> str:
    return kube.create_event(namespace, {}).path


def test_a_repeat_bumps_the_count_of_the_event() -> None:
    api = FakeApi()
    recorder = EventRecorder(api.client())

    async def go() -> None:
        await recorder.emit(cr("ns"), "Warning", "ReconcileFailed", "boom")
        await recorder.emit(cr("ns"), "Warning", "ReconcileFailed", "boom")

    asyncio.run(go())
    (event,) = api.listed(events_path("ns"))
    assert event["count"] == 2 and event["reason"] == "ReconcileFailed"


def test_events_refused_by_rbac_are_said_once_at_info_and_not_tried_again_for_a_while(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """An operator with operator-sdk's RBAC (Events in its own namespace at most): one info
    line, no warning per Event, no request per Event; a namespace that allows them still gets
    them; after REPEAT_WINDOW the refused namespace is tried again, quietly."""
    api = FakeApi()
    clock = FakeClock()
    recorder = EventRecorder(api.client(), clock=clock)
    for namespace in ("apps", "more"):
        api.fail(method="POST", path=events_path(namespace), status=403)

    async def go() -> None:
        for reason in ("ReconcileFailed", "Reconciled", "ReconcileFailed"):
            await recorder.emit(cr("apps"), "Warning", reason, "boom")
        await recorder.emit(cr("more"), "Warning", "ReconcileFailed", "boom")
        await recorder.emit(cr("operator"), "Warning", "ReconcileFailed", "boom")

    with caplog.at_level(logging.DEBUG, logger="runner.events"):
        asyncio.run(go())
    said = [(r.levelname, r.getMessage()) for r in caplog.records]
    infos = [m for level, m in said if level == "INFO"]
    assert len(infos) == 1, said
    assert "may not write Events in namespace apps" in infos[0]
    assert "optional permission" in infos[0]
    assert not [m for level, m in said if level in ("WARNING", "ERROR")], said
    assert len(api.sent("POST", "/namespaces/apps/events")) == 1  # not tried again
    assert len(api.sent("POST", "/namespaces/more/events")) == 1
    assert len(api.listed(events_path("operator"))) == 1  # allowed there: written

    clock.now += REPEAT_WINDOW + 1
    caplog.clear()
    with caplog.at_level(logging.DEBUG, logger="runner.events"):
        asyncio.run(recorder.emit(cr("apps"), "Warning", "ReconcileFailed", "again"))
    assert len(api.sent("POST", "/namespaces/apps/events")) == 2
    assert [r.levelname for r in caplog.records] == ["DEBUG"]
