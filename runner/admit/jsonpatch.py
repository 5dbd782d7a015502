"""The JSON Patch (RFC 6902) from one object to another, as a mutating webhook returns it
(pure): mappings key by key (add, remove, replace), anything else (lists included) replaced
whole where it differs."""

from __future__ import annotations

from typing import Any


def pointer(path: list[str]) -> str:
    """A JSON Pointer (RFC 6901): `~` as `~0`, `/` as `~1`."""
    return "".join("/" + part.replace("~", "~0").replace("/", "~1") for part in path)


def diff(old: Any, new: Any, path: list[str] | None = None) -> list[dict[str, Any]]:
    """Operations that turn `old` into `new`."""
    at = path or []
    if isinstance(old, dict) and isinstance(new, dict):
        ops: list[dict[str, Any]] = []
        for key in old:
            if key not in new:
                ops.append({"op": "remove", "path": pointer([*at, key])})
        for key, value in new.items():
            if key not in old:
                ops.append({"op": "add", "path": pointer([*at, key]), "value": value})
            else:
                ops += diff(old[key], value, [*at, key])
        return ops
    if old == new and type(old) is type(new):
        return []
    return [{"op": "replace", "path": pointer(at), "value": new}]
