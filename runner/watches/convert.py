"""The ``convert`` key of an entry: how the kind's objects are converted between versions.

Ours (operator-sdk's Ansible operator has no conversion). Either a role or a playbook, found as
``role``/``playbook`` are (with optional ``vars``), run for every ConversionReview; or ``fields``,
a declarative map of the fields that are named differently in the versions, which the runner
applies itself::

    convert:
      fields:
        - v1alpha1: spec.size       # the same field: spec.size in v1alpha1 ...
          v1beta1: spec.replicas    # ... is spec.replicas in v1beta1

A path is dotted text (``spec.size``) or a list of keys (``[spec, "a.b"]``, for keys that hold
a dot). ``apiVersion``, ``kind`` and ``metadata`` cannot be mapped: a conversion may change
nothing but the version of those.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from runner.watches.messages import (
    CONVERT_KEYS,
    Where,
    canonical_keys,
    describe,
    mapping_value,
    vars_value,
)
from runner.watches.model import Convert, FieldMap
from runner.watches.roles import Search, role_and_playbook

#: A CRD version's name is a DNS-1035 label (apiextensions validation).
_VERSION_NAME: Final = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
#: What a conversion may not rename: the API server refuses any change of them but the version.
_FIXED_ROOTS: Final = ("apiVersion", "kind", "metadata")


def _path(value: object, where: Where, key: str) -> tuple[str, ...]:
    if isinstance(value, str):
        keys = tuple(value.split("."))
    elif isinstance(value, list) and all(isinstance(k, str) for k in value):
        keys = tuple(value)
    else:
        raise where.error(
            key,
            f"must be a field path such as spec.size (or a list of keys, [spec, size]), "
            f"found {describe(value)}",
        )
    if not keys or not all(keys):
        raise where.error(key, f"{value!r} has an empty key; write a path such as spec.size")
    if keys[0] in _FIXED_ROOTS:
        raise where.error(
            key,
            f"{value!r}: {keys[0]} cannot be mapped (a conversion changes only the version of "
            "apiVersion, kind and metadata); map fields of spec or status, or convert with a role",
        )
    return keys


def _field_maps(value: object, where: Where) -> tuple[FieldMap, ...]:
    key = "convert.fields"
    if not isinstance(value, list) or not value:
        raise where.error(
            key,
            "must be a non-empty list, one item per field that differs between the versions, "
            f"e.g. - {{v1alpha1: spec.size, v1beta1: spec.replicas}}; found {describe(value)}",
        )
    maps: list[FieldMap] = []
    seen: dict[tuple[str, tuple[str, ...]], int] = {}
    for number, item in enumerate(value, start=1):
        item_key = f"{key}[{number}]"
        paths = []
        for version, path in mapping_value(item, where, item_key).items():
            if not isinstance(version, str) or not _VERSION_NAME.match(version):
                raise where.error(
                    item_key,
                    f"{version!r} is not a version name (lower-case letters, digits and '-', "
                    "e.g. v1beta1); each item maps a version to the field's path in it",
                )
            keys = _path(path, where, f"{item_key}.{version}")
            if (version, keys) in seen:
                raise where.error(
                    f"{item_key}.{version}",
                    f"{'.'.join(keys)} is mapped already by item {seen[(version, keys)]}; "
                    "a field of a version can be mapped once",
                )
            seen[(version, keys)] = number
            paths.append((version, keys))
        if len(paths) < 2:
            raise where.error(
                item_key,
                "names one version; an item says where one field is in two or more versions, "
                "e.g. {v1alpha1: spec.size, v1beta1: spec.replicas}",
            )
        maps.append(FieldMap(tuple(paths)))
    return tuple(maps)


def convert_value(values: Mapping[str, Any], search: Search, where: Where) -> Convert | None:
    """The entry's ``convert`` (None when absent), its role or playbook located."""
    if "convert" not in values:
        return None
    fields = canonical_keys(
        mapping_value(values["convert"], where, "convert"), CONVERT_KEYS, where, "convert."
    )
    role, playbook = role_and_playbook(fields, search, where, "convert.")
    convert_vars = vars_value(fields, where, "convert.")
    if "fields" in fields:
        if role is not None or playbook is not None:
            raise where.error(
                "convert.fields",
                "set either 'fields' (renamed fields, converted by the runner) or a 'role' / "
                "'playbook' that converts, not both",
            )
        if convert_vars:
            raise where.error(
                "convert.vars", "vars are handed to a convert role or playbook; 'fields' takes none"
            )
        return Convert(fields=_field_maps(fields["fields"], where))
    if role is None and playbook is None:
        raise where.error(
            "convert",
            "needs a 'role' or 'playbook' that converts the objects, or 'fields' (the fields "
            "named differently in the versions, e.g. - {v1alpha1: spec.size, v1beta1: "
            "spec.replicas})",
        )
    return Convert(role=role, playbook=playbook, vars=convert_vars)
