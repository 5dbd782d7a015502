"""What a changed task would change, as text a person reads (pure): a unified diff of YAML.

Ansible's own diff of a task (`res.diff`: kubernetes.core's before/after of the fields that
differ, a template's or a file's text, k8s_status's status) becomes a unified diff; an object
kubernetes.core would create (no diff: its whole `result`) is shown as added lines, one it
would delete as one line. The data of Secrets never shows: each value is masked, and a value
that would change says so without saying what it was or becomes.
"""

from __future__ import annotations

import difflib
from collections.abc import Mapping
from typing import Any

import yaml

MASK = "********"
CHANGED_MASK = "******** (changed)"
_DATA_KEYS = ("data", "stringData")


class _Dumper(yaml.SafeDumper):
    """YAML as a person writes it: a text of several lines as a block (`|`), where YAML
    allows one (no trailing spaces)."""


def _text(dumper: yaml.SafeDumper, value: str) -> yaml.ScalarNode:
    return dumper.represent_scalar(
        "tag:yaml.org,2002:str", value, style="|" if "\n" in value else None
    )


_Dumper.add_representer(str, _text)


def _yaml(value: Any) -> str:
    if value is None or value == {}:
        return ""
    if isinstance(value, str):
        return value if value.endswith("\n") else value + "\n"
    text = yaml.dump(value, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)
    return text.removesuffix("...\n")  # the document's end marker after a kept final newline


def unified(before: Any, after: Any, label: str = "") -> str:
    """`before` and `after` (mappings or text) as a unified diff."""
    lines = difflib.unified_diff(
        _yaml(before).splitlines(keepends=True),
        _yaml(after).splitlines(keepends=True),
        fromfile=f"before{': ' + label if label else ''}",
        tofile=f"after{': ' + label if label else ''}",
        n=3,
    )
    return "".join(line if line.endswith("\n") else line + "\n" for line in lines)


def masked_pair(before: Any, after: Any) -> tuple[Any, Any]:
    """A Secret's before and after with their data masked; a changed value says so."""
    if not isinstance(before, Mapping) or not isinstance(after, Mapping):
        return before, after
    old, new = dict(before), dict(after)
    for key in _DATA_KEYS:
        b, a = old.get(key), new.get(key)
        if isinstance(b, Mapping):
            old[key] = {k: MASK for k in b}
        if isinstance(a, Mapping):
            prior = b if isinstance(b, Mapping) else {}
            new[key] = {k: MASK if prior.get(k) == v else CHANGED_MASK for k, v in a.items()}
    return old, new


def is_secret_result(res: Mapping[str, Any]) -> bool:
    result = res.get("result")
    return isinstance(result, Mapping) and result.get("kind") == "Secret"


def describe_object(obj: Mapping[str, Any]) -> str:
    meta = obj.get("metadata") or {}
    where = "/".join(p for p in (meta.get("namespace"), meta.get("name")) if p)
    return f"{obj.get('kind', 'object')} {where}".strip()


def result_text(res: Mapping[str, Any]) -> str:
    """What one (item) result of a changed task would change, as text; "" when it says
    nothing about it."""
    secret = is_secret_result(res)
    diff = res.get("diff")
    method = res.get("method")
    result = res.get("result")
    if method == "create" and isinstance(result, Mapping):
        obj = masked_pair({}, result)[1] if secret else result
        return unified({}, obj, f"create {describe_object(result)}")
    if method == "delete":
        what = describe_object(result) if isinstance(result, Mapping) and result.get("kind") else ""
        return f"delete {what or 'the object'}\n"
    texts = []
    for part in diff if isinstance(diff, list) else [diff]:
        if not isinstance(part, Mapping) or ("before" not in part and "after" not in part):
            continue
        before, after = part.get("before"), part.get("after")
        if secret:
            before, after = masked_pair(before, after)
        label = str(part.get("after_header") or part.get("before_header") or "")
        if not label and isinstance(result, Mapping) and result.get("kind"):
            label = describe_object(result)
        texts.append(unified(before, after, label))
    return "".join(texts)
