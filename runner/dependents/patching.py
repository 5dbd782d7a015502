"""The API server's patches, applied here (pure): what an object would be after a write.

The preview's proxy (previewproxy.py) answers the dry-run writes of a role in check mode
itself, so that nothing but reads reaches the API server; these are the four ways a write can
change an object, as apimachinery applies them:

- JSON merge patch (RFC 7386, `application/merge-patch+json`): mappings merged, `null` removes
  a key, anything else (lists included) replaced;
- JSON patch (RFC 6902, `application/json-patch+json`): add, remove, replace, move, copy, test;
- strategic merge patch (`application/strategic-merge-patch+json`, built-in kinds only): a merge
  patch whose lists merge by the key the kind's OpenAPI schema names (`containers` by `name`,
  `ports` by `containerPort`, ...) or, for lists of scalars with the `merge` strategy
  (`finalizers`), as a set; the directives `$patch: delete|replace` and
  `$deleteFromPrimitiveList/<field>` are honoured, the ordering ones (`$setElementOrder/...`,
  `$retainKeys`) dropped;
- server-side apply (`application/apply-patch+yaml`), approximated: the applied configuration
  merged into the object, lists of `x-kubernetes-list-type: map` by their keys, `set` lists as
  sets, others replaced (fields the manager applied before and now leaves out are not removed).

The schema is a `Shape` (patchschema.py): per field, its list strategy and its items' shape.
"""

from __future__ import annotations

import copy
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"


class PatchError(ValueError):
    """The patch cannot be applied: the API server answers 422 (or 409 for a failed test)."""

    def __init__(self, message: str, status: int = 422) -> None:
        super().__init__(message)
        self.status = status


class Shape(Protocol):
    """What a field's schema says about merging (patchschema.py builds these)."""

    def child(self, key: str) -> Shape: ...

    def items(self) -> Shape: ...

    def merge_key(self) -> str | None:
        """A list's strategic merge key (`name`), None when it is not merged by key."""

    def merges(self) -> bool:
        """A list with the strategic `merge` patch strategy."""

    def list_keys(self) -> tuple[str, ...]:
        """A list's `x-kubernetes-list-map-keys` (server-side apply)."""

    def list_type(self) -> str:
        """A list's `x-kubernetes-list-type`: atomic (default), set or map."""


@dataclass(frozen=True)
class Plain:
    """No schema known: every list is replaced whole."""

    def child(self, key: str) -> Shape:
        return self

    def items(self) -> Shape:
        return self

    def merge_key(self) -> str | None:
        return None

    def merges(self) -> bool:
        return False

    def list_keys(self) -> tuple[str, ...]:
        return ()

    def list_type(self) -> str:
        return "atomic"


# --- RFC 7386 ------------------------------------------------------------------------------


def merge_patch(target: Any, patch: Any) -> Any:
    """JSON merge patch: `target` after `patch` (a new value; the arguments are not changed)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


# --- RFC 6902 ------------------------------------------------------------------------------


def _tokens(pointer: str) -> list[str]:
    if pointer == "":
        return []
    if not pointer.startswith("/"):
        raise PatchError(f"JSON pointer {pointer!r} does not start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in pointer[1:].split("/")]


def _index(container: list[Any], token: str, *, adding: bool) -> int:
    if adding and token == "-":
        return len(container)
    if not token.isdigit():
        raise PatchError(f"{token!r} is not an index of a list")
    index = int(token)
    if index > len(container) or (not adding and index == len(container)):
        raise PatchError(f"index {index} is out of range (the list has {len(container)} items)")
    return index


def _parent(doc: Any, tokens: list[str]) -> Any:
    node = doc
    for token in tokens[:-1]:
        if isinstance(node, dict) and token in node:
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, adding=False)]
        else:
            raise PatchError(f"path /{'/'.join(tokens)} does not exist")
    return node


def _get(doc: Any, tokens: list[str]) -> Any:
    if not tokens:
        return doc
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent[last]
    if isinstance(parent, list):
        return parent[_index(parent, last, adding=False)]
    raise PatchError(f"path /{'/'.join(tokens)} does not exist")


def _remove(doc: Any, tokens: list[str]) -> Any:
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict) and last in parent:
        return parent.pop(last)
    if isinstance(parent, list):
        return parent.pop(_index(parent, last, adding=False))
    raise PatchError(f"path /{'/'.join(tokens)} does not exist")


def _add(doc: Any, tokens: list[str], value: Any) -> Any:
    if not tokens:
        return value
    parent = _parent(doc, tokens)
    last = tokens[-1]
    if isinstance(parent, dict):
        parent[last] = value
    elif isinstance(parent, list):
        parent.insert(_index(parent, last, adding=True), value)
    else:
        raise PatchError(f"path /{'/'.join(tokens)}: its parent is neither object nor list")
    return doc


def json_patch(target: Any, operations: Sequence[Any]) -> Any:
    """JSON patch: `target` after `operations` (a new value)."""
    if not isinstance(operations, list):
        raise PatchError("a JSON patch is a list of operations")
    doc = copy.deepcopy(target)
    for op in operations:
        if not isinstance(op, dict) or "path" not in op:
            raise PatchError(f"not a JSON patch operation: {op!r}")
        name, tokens = op.get("op"), _tokens(str(op["path"]))
        if name == "add":
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif name == "remove":
            _remove(doc, tokens)
        elif name == "replace":
            _get(doc, tokens)  # it must exist
            if tokens:
                _remove(doc, tokens)
            doc = _add(doc, tokens, copy.deepcopy(op.get("value")))
        elif name in ("move", "copy"):
            source = _tokens(str(op.get("from", "")))
            value = _remove(doc, source) if name == "move" else copy.deepcopy(_get(doc, source))
            doc = _add(doc, tokens, value)
        elif name == "test":
            if _get(doc, tokens) != op.get("value"):
                raise PatchError(f"test of {op['path']} failed", status=409)
        else:
            raise PatchError(f"unknown JSON patch operation {name!r}")
    return doc


# --- strategic merge patch -----------------------------------------------------------------

_DELETE_FROM = "$deleteFromPrimitiveList/"


def _strip(value: Any) -> Any:
    """A patch value as stored: its directives removed."""
    if isinstance(value, dict):
        return {k: _strip(v) for k, v in value.items() if not k.startswith("$")}
    if isinstance(value, list):
        return [_strip(v) for v in value if not (isinstance(v, dict) and "$patch" in v)]
    return value


def strategic_merge(target: Any, patch: Any, shape: Shape) -> Any:
    """Strategic merge patch of `target` (a new value)."""
    if not isinstance(patch, dict):
        return _strip(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return _strip(patch)
    if directive == "delete":
        return {}
    result = copy.deepcopy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key.startswith(_DELETE_FROM):
            name = key[len(_DELETE_FROM) :]
            drop = value if isinstance(value, list) else []
            if isinstance(result.get(name), list):
                result[name] = [v for v in result[name] if v not in drop]
            continue
        if key.startswith("$"):
            continue
        if value is None:
            result.pop(key, None)
            continue
        sub = shape.child(key)
        old = result.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            result[key] = strategic_merge(old, value, sub)
        elif isinstance(value, list) and isinstance(old, list) and sub.merges():
            result[key] = _merge_list(old, value, sub)
        else:
            result[key] = _strip(value)
    return result


def _merge_list(old: list[Any], patch: list[Any], shape: Shape) -> list[Any]:
    if any(isinstance(v, dict) and v.get("$patch") == "replace" for v in patch):
        return _strip(patch)  # type: ignore[no-any-return]
    key = shape.merge_key()
    if key is None:  # scalars: a set, the patch's new ones appended
        merged = list(old)
        merged += [v for v in _strip(patch) if v not in merged]
        return merged
    return _merge_by(old, patch, (key,), lambda o, p: strategic_merge(o, p, shape.items()))


def _merge_by(
    old: list[Any],
    patch: list[Any],
    keys: tuple[str, ...],
    merge: Callable[[Any, Any], Any],
) -> list[Any]:
    """Items of `patch` merged into the item of `old` with the same `keys`, or appended."""
    merged = copy.deepcopy(old)

    def same(a: Any, b: Any) -> bool:
        return (
            isinstance(a, dict) and isinstance(b, dict) and all(a.get(k) == b.get(k) for k in keys)
        )

    for item in patch:
        if isinstance(item, dict) and item.get("$patch") == "delete":
            merged = [m for m in merged if not same(m, item)]
            continue
        at = next((i for i, m in enumerate(merged) if same(m, item)), None)
        if at is None:
            merged.append(_strip(item))
        else:
            merged[at] = merge(merged[at], item)
    return merged


# --- server-side apply (approximation) -----------------------------------------------------


def apply_merge(target: Any, applied: Any, shape: Shape) -> Any:
    """The applied configuration merged into `target` (module doc: an approximation)."""
    if not isinstance(applied, dict) or not isinstance(target, dict):
        return copy.deepcopy(applied)
    result = copy.deepcopy(target)
    for key, value in applied.items():
        sub = shape.child(key)
        old = result.get(key)
        if isinstance(value, dict) and isinstance(old, dict):
            result[key] = apply_merge(old, value, sub)
        elif isinstance(value, list) and isinstance(old, list) and sub.list_type() == "map":
            result[key] = _apply_list(old, value, sub)
        elif isinstance(value, list) and isinstance(old, list) and sub.list_type() == "set":
            result[key] = old + [v for v in value if v not in old]
        else:
            result[key] = copy.deepcopy(value)
    return result


def _apply_list(old: list[Any], applied: list[Any], shape: Shape) -> list[Any]:
    """A `map` list: items merged by their keys (the strategic merge key when none)."""
    merge_key = shape.merge_key()
    keys = shape.list_keys() or ((merge_key,) if merge_key else ())
    if not keys:
        return copy.deepcopy(applied)
    items = shape.items()
    return _merge_by(old, applied, keys, lambda o, p: apply_merge(o, p, items))


@dataclass
class Patched:
    """An object after a patch, or why it cannot be patched (`error`, `status`)."""

    obj: dict[str, Any] = field(default_factory=dict)
    error: str = ""
    status: int = 200


def apply_patch(
    target: dict[str, Any], body: Any, content_type: str, shape: Shape, strategic: bool
) -> Patched:
    """`target` after a PATCH with `body` of `content_type`, along the kind's `shape`;
    `strategic` False: the kind takes no strategic merge patch (a custom resource: 415, as the
    API server answers)."""
    try:
        if content_type == MERGE_PATCH:
            result = merge_patch(target, body)
        elif content_type == JSON_PATCH:
            result = json_patch(target, body)
        elif content_type == STRATEGIC_MERGE_PATCH:
            if not strategic:
                return Patched(
                    error=f"the body of the request was in an unknown format - accepted media "
                    f"types include: {JSON_PATCH}, {MERGE_PATCH}, {APPLY_PATCH}",
                    status=415,
                )
            result = strategic_merge(target, body, shape)
        elif content_type == APPLY_PATCH:
            result = apply_merge(target, body, shape)
        else:
            return Patched(error=f"unsupported patch type {content_type!r}", status=415)
    except PatchError as err:
        return Patched(error=str(err), status=err.status)
    if not isinstance(result, dict):
        return Patched(error="the patch does not leave an object", status=422)
    return Patched(obj=result)
