"""Structural OpenAPI v3 schemas inferred from a sample CR, and the CRD around them.

From the sample's ``spec``: strings, integers, numbers, booleans; lists typed from their
elements (elements of one type merge, objects merge their properties; mixed or empty lists get
items that accept anything); nested objects; null accepts anything. ``required`` lists every
key of the sample only when asked (``--require-sample-keys``). Every schema is structural (a
type on every node, or ``x-kubernetes-preserve-unknown-fields``), as apiextensions.k8s.io/v1
demands.
"""

from __future__ import annotations

import re
from typing import Any, Final

__all__ = ["CONDITIONS_SCHEMA", "infer", "printer_columns", "status_schema"]

Schema = dict[str, Any]

_PRESERVE: Final = "x-kubernetes-preserve-unknown-fields"
_ANYTHING: Final[Schema] = {"x-kubernetes-preserve-unknown-fields": True}

# status.conditions as operator-runner writes them (crds/*.yaml of the operator-runner repository).
CONDITIONS_SCHEMA: Final[Schema] = {
    "description": "Running, Successful and Failure, written by operator-runner.",
    "type": "array",
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "required": ["type", "status"],
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "type": {"type": "string"},
            "status": {"type": "string", "enum": ["True", "False", "Unknown"]},
            "reason": {"type": "string"},
            "message": {"type": "string"},
            "lastTransitionTime": {"type": "string", "format": "date-time"},
            "observedGeneration": {"type": "integer", "format": "int64", "minimum": 0},
            "ansibleResult": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    },
}


def status_schema() -> Schema:
    """status: the runner's conditions, and whatever keys the role writes (k8s_status)."""
    return {
        "description": "Conditions (operator-runner) and what the role reports (k8s_status).",
        "type": "object",
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {"conditions": CONDITIONS_SCHEMA},
    }


def _scalar(value: object) -> Schema | None:
    # bool before int: True is an int in Python.
    if isinstance(value, bool):
        return {"type": "boolean"}
    if isinstance(value, int):
        return {"type": "integer"}
    if isinstance(value, float):
        return {"type": "number"}
    if isinstance(value, str):
        return {"type": "string"}
    return None


def infer(value: object, *, require: bool = False) -> Schema:
    """The schema of one value of a sample. ``require``: every key of an object is required."""
    scalar = _scalar(value)
    if scalar is not None:
        return scalar
    if value is None:
        return {"nullable": True, **_ANYTHING}
    if isinstance(value, dict):
        if not value:
            return {"type": "object", **_ANYTHING}
        schema: Schema = {"type": "object"}
        if require:
            schema["required"] = [str(key) for key, item in value.items() if item is not None]
            if not schema["required"]:
                del schema["required"]
        schema["properties"] = {
            str(key): infer(item, require=require) for key, item in value.items()
        }
        return schema
    if isinstance(value, list):
        return {"type": "array", "items": _items(value, require)}
    # Dates and other YAML types a sample may hold: text in JSON.
    return {"type": "string"}


def _items(values: list[Any], require: bool) -> Schema:
    if not values:
        return dict(_ANYTHING)
    merged: Schema | None = infer(values[0], require=require)
    for value in values[1:]:
        if merged is None:
            break
        merged = _merge(merged, infer(value, require=require))
    return merged if merged is not None else dict(_ANYTHING)


def _merge(left: Schema, right: Schema) -> Schema | None:
    """One schema for two elements of a list, or None when they are of different kinds."""
    if left == right:
        return left
    types = {left.get("type"), right.get("type")}
    if types == {"integer", "number"}:
        return {"type": "number"}
    if types != {"object"} or left.get(_PRESERVE) or right.get(_PRESERVE):
        if types == {"object"}:  # an empty object and a non-empty one: accept any object
            return {"type": "object", **_ANYTHING}
        return None
    properties: dict[str, Schema] = dict(left.get("properties", {}))
    for key, schema in right.get("properties", {}).items():
        if key in properties:
            both = _merge(properties[key], schema)
            if both is None:
                return None
            properties[key] = both
        else:
            properties[key] = schema
    merged: Schema = {"type": "object"}
    # Required only what every element has.
    required = [key for key in left.get("required", []) if key in right.get("required", [])]
    if required:
        merged["required"] = required
    merged["properties"] = properties
    return merged


_COLUMN_TYPES: Final = {"string", "integer", "number", "boolean"}
# Keys a printer column's JSONPath can name as .spec.<key>.
_COLUMN_KEY: Final = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
MAX_SPEC_COLUMNS: Final = 4


def _column_name(key: str) -> str:
    return key[:1].upper() + key[1:]


def printer_columns(spec_schema: Schema) -> list[Schema]:
    """A column for each top-level scalar spec key (at most 4), then Age."""
    columns: list[Schema] = []
    for key, schema in spec_schema.get("properties", {}).items():
        if len(columns) == MAX_SPEC_COLUMNS:
            break
        if schema.get("type") in _COLUMN_TYPES and _COLUMN_KEY.match(key):
            columns.append(
                {"name": _column_name(key), "type": schema["type"], "jsonPath": f".spec.{key}"}
            )
    columns.append({"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"})
    return columns
