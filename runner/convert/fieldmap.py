"""The declarative field map of a watch's `convert: fields:` applied to an object (pure): each
field named in both versions moved from its path in the object's version to its path in the
desired one; everything else as it is."""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Final

from runner.convert.review import version_of
from runner.watches import FieldMap

_ABSENT: Final = object()


def _take(obj: dict[str, Any], path: tuple[str, ...]) -> Any:
    """Remove and return the value at `path` (_ABSENT when there is none); mappings emptied by
    the removal go too, below the top-level key."""
    parents = [obj]
    for key in path[:-1]:
        child = parents[-1].get(key)
        if not isinstance(child, dict):
            return _ABSENT
        parents.append(child)
    value = parents[-1].pop(path[-1], _ABSENT)
    if value is not _ABSENT:
        for depth in range(len(parents) - 1, 1, -1):
            if parents[depth]:
                break
            del parents[depth - 1][path[depth - 1]]
    return value


def _put(obj: dict[str, Any], path: tuple[str, ...], value: Any) -> None:
    target = obj
    for key in path[:-1]:
        child = target.get(key)
        if not isinstance(child, dict):
            child = target[key] = {}
        target = child
    target[path[-1]] = value


def convert_fields(
    obj: Mapping[str, Any], desired_api_version: str, maps: Sequence[FieldMap]
) -> dict[str, Any]:
    """`obj` in the desired version: each mapped field moved from its path in the object's
    version to its path in the desired one (all taken first, then all put, so two fields may
    swap); every other field as it is."""
    source, desired = version_of(obj), desired_api_version.rpartition("/")[2]
    result = copy.deepcopy(dict(obj))
    moves = []
    for field_map in maps:
        src, dst = field_map.path(source), field_map.path(desired)
        if src is not None and dst is not None and src != dst:
            moves.append((_take(result, src), dst))
    for value, dst in moves:
        if value is not _ABSENT:
            _put(result, dst, value)
    result["apiVersion"] = desired_api_version
    return result
