"""Additions to existing project files, made as text so that their comments stay.

Each function returns the file's new text after checking that it still parses and that the
addition landed where it belongs; a file edited into a shape where appending does not work
gives a clear error instead (and nothing is written).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from .names import ScaffoldError

_EMPTY_LIST = re.compile(r"^\[\]\s*(?:#.*)?$")

__all__ = [
    "add_to_watch",
    "append_rbac_rules",
    "append_sample",
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


def append_watch(text: str, name: str, entry: str) -> str:
    """watches.yaml with ``entry`` (text of one list item) at the end.

    The empty list ``[]`` that ``init`` writes is replaced by the first entry.
    """
    document = parse(text, name)
    if document == []:
        lines = text.splitlines(keepends=True)
        kept = [line for line in lines if not _EMPTY_LIST.match(line)]
        if len(kept) != len(lines) - 1:
            raise ScaffoldError(
                f"{name}: holds an empty list that is not one line '[]'; "
                "remove it, then run create api again"
            )
        text = "".join(kept)
    new = _joined(text, entry)
    problem = (
        f"{name}: cannot append the new entry as text (the file does not end with its list "
        f"of entries); add it by hand:\n{entry}"
    )
    entries = _parse_appended(new, problem)
    if not isinstance(entries, list) or entries[-1] != yaml.safe_load(entry)[0]:
        raise ScaffoldError(problem)
    return new


def append_sample(text: str, name: str, sample: str) -> str:
    """config/samples/Kustomization with ``sample`` added to ``resources``."""
    parse(text, name)
    new = _joined(text, f"  - {sample}\n")
    problem = (
        f"{name}: cannot append {sample} to its resources as text (the file must end with "
        "its 'resources:' list); add it by hand"
    )
    document = _parse_appended(new, problem)
    resources = document.get("resources") if isinstance(document, dict) else None
    if not isinstance(resources, list) or resources[-1] != sample:
        raise ScaffoldError(problem)
    return new


def append_rbac_rules(text: str, name: str, rules: str) -> str:
    """deploy/rbac/role.yaml with ``rules`` (text of list items) at the end of ``rules``."""
    before = parse(text, name)
    old_rules = before.get("rules") if isinstance(before, dict) else None
    new = _joined(text, rules)
    problem = (
        f"{name}: cannot append the new rules as text (the file must end with its 'rules:' "
        f"list); add them by hand:\n{rules}"
    )
    after = _parse_appended(new, problem)
    new_rules = after.get("rules") if isinstance(after, dict) else None
    added = yaml.safe_load(rules)
    if (
        not isinstance(new_rules, list)
        or not isinstance(added, list)
        or new_rules != (old_rules or []) + added
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
