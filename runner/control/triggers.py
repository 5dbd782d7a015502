"""Which watch events call for a reconcile (pure).

As operator-sdk (GenerationChangedPredicate, plus annotations when `watchAnnotationsChanges`):
creation, deletion, a new `metadata.generation` (spec changes; status-only changes do not bump
it), the start of a deletion, and annotation changes when the watch asks for them. Our own
writes (status, finalizers) therefore never trigger a reconcile of their own.

Objects without `metadata.generation` (ConfigMaps, Secrets and other core kinds watched as
primaries) reconcile on every update, as operator-sdk's predicate treats them: their data
changes bump nothing else that could tell a real change from a no-op.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class Seen:
    """What we remember of an object between two of its events."""

    generation: int | None  # None: the kind has no generation (ConfigMap, Secret, ...)
    deleting: bool
    annotations: tuple[tuple[str, str], ...] | None


def fingerprint(body: Mapping[str, Any], with_annotations: bool) -> Seen:
    meta = body.get("metadata") or {}
    annotations = None
    if with_annotations:
        annotations = tuple(sorted((meta.get("annotations") or {}).items()))
    return Seen(
        generation=int(meta["generation"]) if meta.get("generation") else None,
        deleting=bool(meta.get("deletionTimestamp")),
        annotations=annotations,
    )


def should_reconcile(event_type: str | None, previous: Seen | None, current: Seen) -> bool:
    """`event_type` is the watch event's (None for kopf's initial listing)."""
    if event_type in (None, "ADDED", "DELETED") or previous is None:
        return True
    if current.generation is None:
        return True  # no generation to compare: every update counts (operator-sdk too)
    return previous != current
