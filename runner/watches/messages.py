"""Entry keys, and the validation messages: where a problem is, what it is, how to fix it."""

from __future__ import annotations

import difflib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from runner.watches.model import WatchesError

# ---------------------------------------------------------------------------
# Keys
# ---------------------------------------------------------------------------

ENTRY_KEYS: Final = (
    "group",
    "version",
    "kind",
    "role",
    "playbook",
    "vars",
    "reconcilePeriod",
    "manageStatus",
    "watchDependentResources",
    "watchClusterScopedResources",
    "snakeCaseParameters",
    "watchAnnotationsChanges",
    "markUnsafe",
    "selector",
    "blacklist",
    "watchReads",
    "finalizer",
    "maxRunnerArtifacts",
    "validate",
    "mutate",
    "convert",
)
FINALIZER_KEYS: Final = ("name", "role", "playbook", "vars")
ADMISSION_KEYS: Final = (
    "role",
    "playbook",
    "vars",
    "failurePolicy",
    "timeoutSeconds",
    "operations",
)
CONVERT_KEYS: Final = ("role", "playbook", "fields", "vars")
GVK_KEYS: Final = ("group", "version", "kind")
SELECTOR_KEYS: Final = ("matchLabels", "matchExpressions")
EXPRESSION_KEYS: Final = ("key", "operator", "values")
SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def suggestion(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known word closest to ``word``, else ``""``."""
    by_folded = {candidate.casefold(): candidate for candidate in known}
    close = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=0.6)
    return f" (did you mean '{by_folded[close[0]]}'?)" if close else ""


def _go_text(value: object) -> str | None:
    """The text sigs.k8s.io/yaml puts into a Go string field; None if we refuse the value.

    null is "", booleans are "true"/"false", integers their digits.  Floats are refused
    (their Go spelling, e.g. ``1e+06``, is rarely what was meant).
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def describe(value: object) -> str:
    names = {
        dict: "a mapping",
        list: "a list",
        str: "a string",
        bool: "a boolean",
        int: "a number",
        float: "a number",
    }
    if value is None:
        return "empty (null)"
    kind = names.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if isinstance(value, str | int | float) else kind


# ---------------------------------------------------------------------------
# Location of a problem, and the messages
# ---------------------------------------------------------------------------


@dataclass
class Where:
    """One entry of the file: builds messages naming file, entry and key."""

    file: str
    index: int  # 1-based
    label: str
    warnings: list[str]

    def _prefix(self, key: str | None) -> str:
        entry = f"entry {self.index}" + (f" ({self.label})" if self.label else "")
        return f"{self.file}: {entry}: " + (f"key '{key}': " if key else "")

    def error(self, key: str | None, message: str) -> WatchesError:
        return WatchesError(self._prefix(key) + message)

    def warn(self, key: str | None, message: str) -> None:
        self.warnings.append(self._prefix(key) + message)


def entry_label(raw: Mapping[Any, Any]) -> str:
    """``group/version Kind`` from an unvalidated entry, for messages."""
    found = {
        key.casefold(): _go_text(value)
        for key, value in raw.items()
        if isinstance(key, str) and key.casefold() in GVK_KEYS
    }
    group = found.get("group") or ""
    version = found.get("version") or "?"
    kind = found.get("kind") or "?"
    if version == "?" and kind == "?":
        return ""
    return f"{group}/{version} {kind}" if group else f"{version} {kind}"


def canonical_keys(
    raw: Mapping[Any, Any], known: Sequence[str], where: Where, prefix: str
) -> dict[str, Any]:
    """Map keys to their known spelling (case-insensitively, like Go); warn about others.

    Null values are dropped: in operator-sdk a null is the same as a missing key.
    """
    by_folded = {name.casefold(): name for name in known}
    result: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in raw.items():
        shown = f"{prefix}{key}"
        canonical = by_folded.get(key.casefold()) if isinstance(key, str) else None
        if canonical is None:
            hint = suggestion(str(key), known)
            where.warn(None, f"unknown key '{shown}' ignored{hint}")
            continue
        if canonical in origin:
            raise where.error(
                f"{prefix}{canonical}",
                f"given twice, as '{prefix}{origin[canonical]}' and '{shown}'; keep one",
            )
        if canonical != key:
            where.warn(
                None,
                f"key '{shown}' read as '{prefix}{canonical}' (keys are matched "
                f"case-insensitively, as in operator-sdk); write '{prefix}{canonical}'",
            )
        origin[canonical] = key
        if value is not None:
            result[canonical] = value
    return result


def mapping_value(value: object, where: Where, key: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise where.error(key, f"must be a mapping, found {describe(value)}")
    return value


def as_text(value: object, where: Where, key: str) -> str:
    """A text key's value: a YAML string (null reads as empty, like a missing key).

    Go's YAML decoder would turn `kind: 42` or `version: 1` into text; a number or a boolean
    where a name belongs is nearly always a slip, so it is refused with the key's path."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    hint = f" ('{_go_text(value)}')" if isinstance(value, bool | int) else ""
    raise where.error(
        key, f"must be a string, found {describe(value)}; quote it{hint} if that is what you mean"
    )


def flag_value(values: Mapping[str, Any], key: str, default: bool, where: Where) -> bool:
    value = values.get(key, default)
    if not isinstance(value, bool):
        raise where.error(
            key, f"must be true or false, found {describe(value)}; write {key}: true or false"
        )
    return value


# ---------------------------------------------------------------------------
# vars
# ---------------------------------------------------------------------------


def _string_keys(value: Any, where: Where, key: str) -> Any:
    """Copy ``value`` turning integer/boolean mapping keys into text, as Go does."""
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for item_key, item in value.items():
            text = _go_text(item_key) if item_key is not None else None
            if text is None:
                raise where.error(
                    key, f"mapping key {item_key!r} is not text; quote it (e.g. '\"1.5\": ...')"
                )
            result[text] = _string_keys(item, where, key)
        return result
    if isinstance(value, list):
        return [_string_keys(item, where, key) for item in value]
    return value


def vars_value(values: Mapping[str, Any], where: Where, prefix: str) -> dict[str, Any]:
    """The ``vars`` mapping (``{}`` when absent), with text keys."""
    if "vars" not in values:
        return {}
    key = prefix + "vars"
    converted: dict[str, Any] = _string_keys(mapping_value(values["vars"], where, key), where, key)
    return converted
