"""A status's ``conditions`` list: its usable entries, one of each type, found and set.

The condition types and statuses this runner manages, and the helpers that read and write a
list of conditions the Kubernetes way: entries that are not usable are dropped, a type is set
in place (the list never reorders), and ``lastTransitionTime`` changes only when ``status``
does. What each condition of a run says is runner.reconcile.conditions'.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

Condition = dict[str, Any]

TYPE_RUNNING = "Running"
TYPE_SUCCESSFUL = "Successful"
TYPE_FAILURE = "Failure"
TYPE_READY = "Ready"
MANAGED_TYPES = (TYPE_RUNNING, TYPE_SUCCESSFUL, TYPE_FAILURE, TYPE_READY)

STATUS_TRUE = "True"
STATUS_FALSE = "False"
STATUS_UNKNOWN = "Unknown"
_STATUSES = frozenset({STATUS_TRUE, STATUS_FALSE, STATUS_UNKNOWN})

_TIME_FORMAT = "%Y-%m-%dT%H:%M:%SZ"


# --------------------------------------------------------------------------------------------
# Generic helpers


def format_time(now: datetime) -> str:
    """Format ``now`` as RFC 3339 in UTC with second precision; naive datetimes count as UTC."""
    if now.tzinfo is None:
        now = now.replace(tzinfo=UTC)
    return now.astimezone(UTC).strftime(_TIME_FORMAT)


def _is_timestamp(value: object) -> bool:
    """Tell whether ``value`` is a parseable ISO 8601 / RFC 3339 timestamp string."""
    if not isinstance(value, str) or "T" not in value:
        return False
    try:
        datetime.fromisoformat(value)
    except ValueError:
        return False
    return True


def _plain(value: Any) -> Any:
    """Deep-copy ``value`` into plain dicts and lists (kopf hands out read-only mapping views)."""
    if isinstance(value, Mapping):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    return copy.deepcopy(value)


def _is_valid(entry: object) -> bool:
    """Tell whether a conditions entry is usable; managed types also need a valid status."""
    if not isinstance(entry, Mapping):
        return False
    ctype = entry.get("type")
    if not isinstance(ctype, str) or not ctype:
        return False
    return ctype not in MANAGED_TYPES or entry.get("status") in _STATUSES


def clean_conditions(conditions: object) -> list[Condition]:
    """Return plain copies of the usable entries of ``conditions``, first one of each type.

    Dropped: anything if ``conditions`` is not a list, entries that are not mappings or have
    no string ``type``, ``Running``/``Successful``/``Failure`` entries whose ``status`` is not
    ``True``/``False``/``Unknown``, and later duplicates of a type.
    """
    if not isinstance(conditions, list | tuple):
        return []
    seen: set[str] = set()
    result: list[Condition] = []
    for entry in conditions:
        if _is_valid(entry) and entry["type"] not in seen:
            seen.add(entry["type"])
            result.append(_plain(entry))
    return result


def find_condition(status: Mapping[str, Any] | None, ctype: str) -> Condition | None:
    """Return a copy of the (first usable) condition of type ``ctype`` in ``status``, or None."""
    if not isinstance(status, Mapping):
        return None
    for condition in clean_conditions(status.get("conditions")):
        if condition["type"] == ctype:
            return condition
    return None


def set_condition(
    conditions: Sequence[Mapping[str, Any]], new: Mapping[str, Any], now: datetime
) -> list[Condition]:
    """Return ``conditions`` (cleaned) with ``new`` replacing the condition of its type.

    ``lastTransitionTime`` of ``new`` is ignored: it is the old condition's when ``status`` is
    unchanged (and the old time is valid), else ``now``. The condition keeps its position in
    the list, so unchanged conditions never reorder; a new type is appended.
    """
    result = clean_conditions(list(conditions))
    condition = _plain(new)
    old = next((c for c in result if c["type"] == condition["type"]), None)
    if old is not None and old["status"] == condition["status"]:
        kept = old.get("lastTransitionTime")
        condition["lastTransitionTime"] = kept if _is_timestamp(kept) else format_time(now)
    else:
        condition["lastTransitionTime"] = format_time(now)
    if old is None:
        return [*result, condition]
    return [condition if c is old else c for c in result]


def status_changed(old: Mapping[str, Any] | None, new: Mapping[str, Any] | None) -> bool:
    """Tell whether ``new`` differs from ``old`` in any way (``None`` equals ``{}``)."""
    return bool(_plain(old or {}) != _plain(new or {}))
