from __future__ import annotations

from typing import Any

import pytest

from runner.control.triggers import fingerprint, should_reconcile
from runner.watches.labelselectors import matches, selector_text


def body(generation: int = 1, deleting: bool = False, **annotations: str) -> dict[str, Any]:
    meta: dict[str, Any] = {"generation": generation, "annotations": annotations}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-02T00:00:00Z"
    return {"metadata": meta, "status": {"x": generation}}


@pytest.mark.parametrize("event_type", [None, "ADDED", "DELETED"])
def test_creation_listing_and_deletion_always_reconcile(event_type: str | None) -> None:
    seen = fingerprint(body(), False)
    assert should_reconcile(event_type, seen, seen)


def test_status_only_change_does_not_reconcile() -> None:
    before, after = body(generation=3), body(generation=3)
    after["status"] = {"changed": True}
    assert not should_reconcile("MODIFIED", fingerprint(before, False), fingerprint(after, False))


def test_spec_change_bumps_generation_and_reconciles() -> None:
    assert should_reconcile("MODIFIED", fingerprint(body(3), False), fingerprint(body(4), False))


def test_deletion_start_reconciles() -> None:
    prev, cur = fingerprint(body(3), False), fingerprint(body(3, deleting=True), False)
    assert should_reconcile("MODIFIED", prev, cur)


def test_annotations_only_when_asked() -> None:
    a, b = body(2, x="1"), body(2, x="2")
    assert not should_reconcile("MODIFIED", fingerprint(a, False), fingerprint(b, False))
    assert should_reconcile("MODIFIED", fingerprint(a, True), fingerprint(b, True))


def test_objects_without_generation_reconcile_on_every_update() -> None:
    """ConfigMaps and Secrets as primaries: no generation, so every update counts (as
    operator-sdk's predicate treats objects without one)."""
    before = {"metadata": {"name": "cm"}, "data": {"a": "1"}}
    after = {"metadata": {"name": "cm"}, "data": {"a": "2"}}
    assert fingerprint(before, False).generation is None
    assert should_reconcile("MODIFIED", fingerprint(before, False), fingerprint(after, False))


def test_unknown_previous_state_reconciles() -> None:
    assert should_reconcile("MODIFIED", None, fingerprint(body(), False))


SELECTOR = {
    "matchLabels": {"tier": "web"},
    "matchExpressions": [
        {"key": "env", "operator": "In", "values": ["prod", "stage"]},
        {"key": "legacy", "operator": "DoesNotExist"},
        {"key": "team", "operator": "Exists"},
        {"key": "zone", "operator": "NotIn", "values": ["b"]},
    ],
}


@pytest.mark.parametrize(
    ("labels", "expected"),
    [
        ({"tier": "web", "env": "prod", "team": "a"}, True),
        ({"tier": "web", "env": "prod", "team": "a", "zone": "a"}, True),
        ({"tier": "web", "env": "prod", "team": "a", "zone": "b"}, False),
        ({"tier": "db", "env": "prod", "team": "a"}, False),
        ({"tier": "web", "env": "dev", "team": "a"}, False),
        ({"tier": "web", "env": "prod", "team": "a", "legacy": "y"}, False),
        ({"tier": "web", "env": "prod"}, False),
        (None, False),
    ],
)
def test_selector_matching(labels: dict[str, str] | None, expected: bool) -> None:
    assert matches(SELECTOR, labels) is expected


def test_empty_selector_matches_everything() -> None:
    assert matches({}, None) and matches(None, {"a": "b"})


def test_selector_text_is_the_api_servers_syntax() -> None:
    assert selector_text(SELECTOR) == "tier=web,env in (prod,stage),!legacy,team,zone notin (b)"
    assert selector_text({}) == selector_text(None) == ""
