"""runner.scaffold.names and .schema: validation, derived names, schema inference."""

from __future__ import annotations

from typing import Any

import pytest

from runner.scaffold.names import (
    ScaffoldError,
    check_domain,
    check_group,
    check_kind,
    check_project_name,
    check_short_name,
    check_version,
    full_group,
    plural,
    snake_kind,
    spec_var,
)
from runner.scaffold.schema import CONDITIONS_SCHEMA, infer, printer_columns, status_schema

ANYTHING = {"x-kubernetes-preserve-unknown-fields": True}


@pytest.mark.parametrize("domain", ["example.com", "my.domain", "a", "x-1.example.org"])
def test_good_domains(domain: str) -> None:
    check_domain(domain)


@pytest.mark.parametrize(
    "domain", ["", "Example.com", "example_com", "-a.com", "a-.com", "a..b", "a." * 130, "a b"]
)
def test_bad_domains(domain: str) -> None:
    with pytest.raises(ScaffoldError, match="--domain"):
        check_domain(domain)


@pytest.mark.parametrize("group", ["Webapp", "web_app", "web app", "", "web.", ".web"])
def test_bad_groups(group: str) -> None:
    with pytest.raises(ScaffoldError, match="--group"):
        check_group(group)


@pytest.mark.parametrize(
    "version",
    ["v1", "v1alpha1", "v2beta3", "v10", "v1beta12", "v1alpha0", "v0"],  # Kubebuilder's
)
def test_good_versions(version: str) -> None:
    check_version(version)


@pytest.mark.parametrize(
    "version", ["1", "V1", "v1alpha", "v1gamma1", "v1-alpha1", "v1.0", "1alpha1", ""]
)
def test_bad_versions(version: str) -> None:
    with pytest.raises(ScaffoldError, match="Kubernetes API version"):
        check_version(version)


@pytest.mark.parametrize("kind", ["Guestbook", "EchoFlask", "V1Thing", "A"])
def test_good_kinds(kind: str) -> None:
    check_kind(kind)


@pytest.mark.parametrize("kind", ["guestbook", "Guest_book", "Guest-Book", "1Thing", "", "Ä"])
def test_bad_kinds(kind: str) -> None:
    with pytest.raises(ScaffoldError, match="PascalCase"):
        check_kind(kind)


def test_kind_ending_in_list_is_refused() -> None:
    with pytest.raises(ScaffoldError, match="List"):
        check_kind("ThingList")


def test_short_names_and_project_names() -> None:
    check_short_name("gb")
    with pytest.raises(ScaffoldError, match="--short-name"):
        check_short_name("GB")
    check_project_name("guestbook-operator", from_folder=True)
    with pytest.raises(ScaffoldError, match=r"folder name 'My_Project'.*--project-name"):
        check_project_name("My_Project", from_folder=True)
    with pytest.raises(ScaffoldError, match="at most 56"):
        check_project_name("a" * 57, from_folder=False)


@pytest.mark.parametrize(
    ("kind", "expected"),
    [
        ("Guestbook", "guestbooks"),
        ("Policy", "policies"),
        ("Gateway", "gateways"),
        ("Class", "classes"),
        ("Box", "boxes"),
        ("Match", "matches"),
        ("Wish", "wishes"),
        ("Echo", "echos"),
        ("EchoFlask", "echoflasks"),
        ("Memcached", "memcacheds"),
    ],
)
def test_plural(kind: str, expected: str) -> None:
    assert plural(kind) == expected


def test_derived_names() -> None:
    assert full_group("webapp", "example.com") == "webapp.example.com"
    assert full_group("swallowlab.com", "example.com") == "swallowlab.com"
    assert snake_kind("EchoFlask") == "echo_flask"
    assert snake_kind("IPAddress") == "ip_address"
    assert spec_var("my-group.example.com", "EchoFlask") == "_my_group_example_com_echoflask_spec"


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        ("text", {"type": "string"}),
        (3, {"type": "integer"}),
        (0.5, {"type": "number"}),
        (True, {"type": "boolean"}),
        (None, {"nullable": True, **ANYTHING}),
        ({}, {"type": "object", **ANYTHING}),
        ([], {"type": "array", "items": ANYTHING}),
        ([1, "a"], {"type": "array", "items": ANYTHING}),
        ([1, 2], {"type": "array", "items": {"type": "integer"}}),
        ([1, 2.5], {"type": "array", "items": {"type": "number"}}),
        (["a", "b"], {"type": "array", "items": {"type": "string"}}),
        ([True, 1], {"type": "array", "items": ANYTHING}),
        ([[1], [2]], {"type": "array", "items": {"type": "array", "items": {"type": "integer"}}}),
        (
            {"deep": {"inner": 1}},
            {
                "type": "object",
                "properties": {
                    "deep": {"type": "object", "properties": {"inner": {"type": "integer"}}}
                },
            },
        ),
    ],
)
def test_infer_each_type(value: object, schema: dict[str, Any]) -> None:
    assert infer(value) == schema


def test_infer_merges_objects_of_a_list() -> None:
    schema = infer([{"name": "a", "port": 1}, {"name": "b", "cpu": "500m"}], require=True)
    assert schema == {
        "type": "array",
        "items": {
            "type": "object",
            "required": ["name"],
            "properties": {
                "name": {"type": "string"},
                "port": {"type": "integer"},
                "cpu": {"type": "string"},
            },
        },
    }
    clash = infer([{"port": 1}, {"port": "http"}])
    assert clash == {"type": "array", "items": ANYTHING}


def test_required_only_when_asked() -> None:
    spec = {"size": 3, "gone": None, "nested": {"a": 1}}
    assert "required" not in infer(spec)
    assert "required" not in infer(spec)["properties"]["nested"]
    required = infer(spec, require=True)
    assert required["required"] == ["size", "nested"]
    assert required["properties"]["nested"]["required"] == ["a"]


def test_printer_columns_for_scalar_keys_up_to_four_then_age() -> None:
    spec = infer(
        {"size": 3, "list": [1], "image": "x", "ratio": 0.5, "on": True, "more": "y", "o": {}}
    )
    columns = printer_columns(spec)
    assert [c["name"] for c in columns] == ["Size", "Image", "Ratio", "On", "Age"]
    assert columns[0] == {"name": "Size", "type": "integer", "jsonPath": ".spec.size"}
    assert columns[-1] == {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"}
    assert printer_columns(infer({"my.key": "x"})) == columns[-1:]


def test_status_schema_has_the_conditions_and_keeps_role_keys() -> None:
    status = status_schema()
    assert status["x-kubernetes-preserve-unknown-fields"] is True
    assert status["properties"]["conditions"] == CONDITIONS_SCHEMA
    assert CONDITIONS_SCHEMA["x-kubernetes-list-map-keys"] == ["type"]


def test_conditions_schema_is_the_one_of_this_repositorys_crds() -> None:
    import pathlib

    import yaml

    root = pathlib.Path(__file__).resolve().parents[2]
    for path in sorted(root.glob("crds/*.yaml")):
        crd = yaml.safe_load(path.read_text())
        schema = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
        assert schema["properties"]["status"]["properties"]["conditions"] == CONDITIONS_SCHEMA
