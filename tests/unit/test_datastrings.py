"""ConfigMap and Secret string maps: numbers and booleans from typed templates become text."""

from __future__ import annotations

import json
from typing import Any

import pytest

from runner.dependents.datastrings import as_text, fix_body
from runner.dependents.ownership import parse_path

CM = parse_path("/api/v1/namespaces/ns/configmaps")
CM_NAMED = parse_path("/api/v1/namespaces/ns/configmaps/c")
SECRET = parse_path("/api/v1/namespaces/ns/secrets/s")


def _fixed(info: Any, body: Any) -> Any:
    return json.loads(fix_body(info, json.dumps(body).encode()))


@pytest.mark.parametrize(
    ("value", "text"),
    [(6, "6"), (2.5, "2.5"), (True, "true"), (False, "false"), (0, "0"), (1e20, "1e+20")],
)
def test_scalars_become_the_text_a_template_used_to_render(value: Any, text: str) -> None:
    assert as_text(value) == text


@pytest.mark.parametrize("value", ["6", None, [1], {"a": 1}])
def test_strings_nulls_and_collections_are_left_alone(value: Any) -> None:
    assert as_text(value) is value


def test_create_and_patch_bodies_of_a_configmap() -> None:
    body = {"kind": "ConfigMap", "metadata": {"name": "c"}, "data": {"n": 6, "s": "x"}}
    assert _fixed(CM, body)["data"] == {"n": "6", "s": "x"}
    assert _fixed(CM_NAMED, {"data": {"b": True}}) == {"data": {"b": "true"}}


def test_secret_data_and_string_data() -> None:
    body = {"stringData": {"port": 5432}, "data": {"n": 1}}
    assert _fixed(SECRET, body) == {"stringData": {"port": "5432"}, "data": {"n": "1"}}


def test_json_patch_operations() -> None:
    ops = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": 7},
        {"op": "add", "path": "/data", "value": {"n": 1}},
        {"op": "replace", "path": "/data/m", "value": 2.5},
        {"op": "add", "path": "/metadata/labels", "value": {"x": 1}},
    ]
    fixed = _fixed(CM_NAMED, ops)
    assert fixed[0]["value"] == 7 and fixed[3]["value"] == {"x": 1}
    assert fixed[1]["value"] == {"n": "1"} and fixed[2]["value"] == "2.5"


def test_other_kinds_subresources_and_non_json_are_untouched() -> None:
    raw = json.dumps({"data": {"n": 1}}).encode()
    assert fix_body(parse_path("/apis/example.com/v1/namespaces/ns/configmaps/c"), raw) is raw
    assert fix_body(parse_path("/api/v1/namespaces/ns/pods/p"), raw) is raw
    assert fix_body(parse_path("/api/v1/namespaces/ns/configmaps/c/status"), raw) is raw
    yaml_body = b"data:\n  n: 1\n"
    assert fix_body(CM_NAMED, yaml_body) is yaml_body
    unchanged = json.dumps({"data": {"n": "1"}}).encode()
    assert fix_body(CM_NAMED, unchanged) is unchanged
