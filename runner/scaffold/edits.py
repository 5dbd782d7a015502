"""Additions to existing project files, made as text so that their comments stay.

Each function returns the file's new text after checking that it still parses and that the
addition landed where it belongs; a file edited into a shape where appending does not work
gives a clear error instead (and nothing is written). Where the file has kubebuilder's scaffold
marker (``# +kubebuilder:scaffold:<name>``), the addition goes right above it, as operator-sdk's
``create api`` puts its own; without one, at the end of the file.
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .layout import marker
from .names import ScaffoldError

_EMPTY_LIST = re.compile(r"^\[\]\s*(?:#.*)?$")

__all__ = [
    "add_to_watch",
    "append_rbac_rules",
    "append_resource",
    "append_watch",
    "has_rule",
    "parse",
    "watched_kinds",
]


def parse(text: str, name: str) -> Any:
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScaffoldError(f"{name} is not valid YAML ({exc}); fix it first") from None


def _parse_appended(text: str, problem: str) -> Any:
    """The file after the addition; ``problem`` when it no longer parses."""
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError:
        raise ScaffoldError(problem) from None


def _joined(text: str, addition: str) -> str:
    if text and not text.endswith("\n"):
        text += "\n"
    return text + addition


def _is_marker(line: str, marker_name: str) -> bool:
    """The line is the marker, as kubebuilder compares them (``#`` and spaces around aside)."""
    return line.strip().removeprefix("#").strip() == marker(marker_name).removeprefix("# ")


def _added(text: str, addition: str, marker_name: str | None) -> str:
    """``text`` with ``addition`` above the marker's line, or at the end without one."""
    if marker_name is not None:
        lines = text.splitlines(keepends=True)
        for number, line in enumerate(lines):
            if _is_marker(line, marker_name):
                return "".join([*lines[:number], addition, *lines[number:]])
    return _joined(text, addition)


def _folded(entry: dict[Any, Any]) -> dict[str, Any]:
    """Keys matched case-insensitively, as operator-sdk and operator-runner read watches.yaml."""
    return {str(key).casefold(): value for key, value in entry.items()}


def watched_kinds(text: str, name: str) -> list[tuple[str, str, str]]:
    """(group, version, kind) of every entry of a watches.yaml."""
    document = parse(text, name)
    if document is None:
        return []
    if not isinstance(document, list):
        raise ScaffoldError(f"{name}: the top level must be a list of entries; fix it first")
    result = []
    for entry in document:
        if isinstance(entry, dict):
            keys = _folded(entry)
            result.append(
                (str(keys.get("group") or ""), str(keys.get("version")), str(keys.get("kind")))
            )
    return result


def append_watch(text: str, name: str, entry: str, marker_name: str | None = None) -> str:
    """watches.yaml with ``entry`` (text of one list item) above its scaffold marker, or at
    the end. An empty list ``[]`` (of an earlier ``init``) is replaced by the first entry."""
    document = parse(text, name)
    before = len(document) if isinstance(document, list) else 0
    if document == []:
        lines = text.splitlines(keepends=True)
        kept = [line for line in lines if not _EMPTY_LIST.match(line)]
        if len(kept) != len(lines) - 1:
            raise ScaffoldError(
                f"{name}: holds an empty list that is not one line '[]'; "
                "remove it, then run create api again"
            )
        text = "".join(kept)
    new = _added(text, entry, marker_name)
    problem = (
        f"{name}: cannot add the new entry as text (the file must be a list of entries, "
        f"ending with them or with its scaffold marker); add it by hand:\n{entry}"
    )
    entries = _parse_appended(new, problem)
    if (
        not isinstance(entries, list)
        or len(entries) != before + 1
        or yaml.safe_load(entry)[0] not in entries
    ):
        raise ScaffoldError(problem)
    return new


def append_resource(text: str, name: str, item: str, marker_name: str | None = None) -> str:
    """A kustomization.yaml with ``item`` added to ``resources`` (above the marker, or at the
    end of a file that ends with that list)."""
    parse(text, name)
    new = _added(text, f"- {item}\n", marker_name)
    problem = (
        f"{name}: cannot add {item} to its resources as text (the file must end with its "
        "'resources:' list or hold its scaffold marker there); add it by hand"
    )
    document = _parse_appended(new, problem)
    resources = document.get("resources") if isinstance(document, dict) else None
    if not isinstance(resources, list) or item not in resources:
        raise ScaffoldError(problem)
    return new


def append_rbac_rules(text: str, name: str, rules: str, marker_name: str | None = None) -> str:
    """config/rbac/role.yaml with ``rules`` (text of list items) at the end of ``rules``: above
    its scaffold marker, or at the end of the file."""
    before = parse(text, name)
    old_rules = (before.get("rules") if isinstance(before, dict) else None) or []
    new = _added(text, rules, marker_name)
    problem = (
        f"{name}: cannot add the new rules as text (the file must end with its 'rules:' "
        f"list, or hold its scaffold marker there); add them by hand:\n{rules}"
    )
    after = _parse_appended(new, problem)
    new_rules = after.get("rules") if isinstance(after, dict) else None
    added = yaml.safe_load(rules)
    if (
        not isinstance(new_rules, list)
        or not isinstance(added, list)
        or len(new_rules) != len(old_rules) + len(added)
        or any(rule not in new_rules for rule in added)
    ):
        raise ScaffoldError(problem)
    return new


def has_rule(text: str, name: str, group: str, resource: str, verbs: list[str]) -> bool:
    """True when role.yaml already allows every verb of ``verbs`` on ``group``/``resource``."""
    document = parse(text, name)
    rules = document.get("rules") if isinstance(document, dict) else None
    allowed: set[str] = set()
    for rule in rules or []:
        if (
            isinstance(rule, dict)
            and group in (rule.get("apiGroups") or [])
            and resource in (rule.get("resources") or [])
        ):
            allowed.update(rule.get("verbs") or [])
    return set(verbs) <= allowed


def add_to_watch(text: str, name: str, index: int, addition: str) -> str:
    """watches.yaml with ``addition`` (keys of one entry, indented two spaces) at the end of
    its ``index``-th entry (0-based), before the comments and blank lines that follow it."""
    lines = text.splitlines(keepends=True)
    starts = [number for number, line in enumerate(lines) if line.startswith("- ")]
    problem = (
        f"{name}: cannot add to entry {index + 1} as text (each entry must start with '- ' at "
        f"the start of a line, in block style); add it by hand:\n{addition}"
    )
    if index >= len(starts):
        raise ScaffoldError(problem)
    end = starts[index + 1] if index + 1 < len(starts) else len(lines)
    while end > starts[index] + 1 and (
        not lines[end - 1].strip() or lines[end - 1].lstrip().startswith("#")
    ):
        end -= 1
    if not lines[end - 1].endswith("\n"):
        lines[end - 1] += "\n"
    new = "".join([*lines[:end], addition, *lines[end:]])
    entries = _parse_appended(new, problem)
    added = yaml.safe_load(addition)
    if (
        not isinstance(entries, list)
        or not isinstance(entries[index], dict)
        or any(entries[index].get(key) != value for key, value in added.items())
    ):
        raise ScaffoldError(problem)
    return new
