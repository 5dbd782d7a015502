"""watches.yaml's `convert` key: a role, a playbook or a map of renamed fields."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.watches import Convert, FieldMap, Watch, WatchesError, load_watches

ENTRY = """\
- group: example.com
  version: v1alpha1
  kind: Thing
  role: thing
"""


@pytest.fixture
def project(tmp_path: Path) -> Path:
    for role in ("thing", "thing_convert"):
        (tmp_path / "roles" / role / "tasks").mkdir(parents=True)
        (tmp_path / "roles" / role / "tasks" / "main.yml").write_text(
            "- ansible.builtin.meta: noop\n"
        )
    (tmp_path / "playbooks").mkdir()
    (tmp_path / "playbooks" / "convert.yml").write_text("- hosts: localhost\n")
    return tmp_path


def load(project: Path, convert: str) -> tuple[Watch, list[str]]:
    path = project / "watches.yaml"
    path.write_text(ENTRY + textwrap.indent(textwrap.dedent(convert), "  "))
    result = load_watches(path, environ={})
    return result.watches[0], result.warnings


def error(project: Path, convert: str) -> str:
    with pytest.raises(WatchesError) as caught:
        load(project, convert)
    message = str(caught.value)
    assert message.startswith(f"{project / 'watches.yaml'}: entry 1 (example.com/v1alpha1 Thing): ")
    return message


def test_no_convert_key() -> None:
    assert Watch.__dataclass_fields__["convert"].default is None


def test_convert_role_is_located_like_the_watch_role(project: Path) -> None:
    watch, warnings = load(project, "convert: {role: thing_convert, vars: {a: 1}}\n")
    assert watch.convert == Convert(role=str(project / "roles" / "thing_convert"), vars={"a": 1})
    assert watch.convert.by_ansible and not warnings


def test_convert_playbook(project: Path) -> None:
    watch, _ = load(project, "convert: {playbook: playbooks/convert.yml}\n")
    assert watch.convert == Convert(playbook=project / "playbooks" / "convert.yml")


def test_convert_fields(project: Path) -> None:
    watch, _ = load(
        project,
        """\
        convert:
          fields:
            - v1alpha1: spec.size
              v1beta1: spec.replicas
            - {v1alpha1: [spec, a.b], v1beta1: status.ab, v2: spec.x.y}
        """,
    )
    assert watch.convert is not None and not watch.convert.by_ansible
    size, ab = watch.convert.fields
    assert size == FieldMap((("v1alpha1", ("spec", "size")), ("v1beta1", ("spec", "replicas"))))
    assert ab.path("v1alpha1") == ("spec", "a.b")
    assert ab.path("v2") == ("spec", "x", "y")
    assert ab.path("v3") is None


def test_convert_key_spelled_another_way_warns(project: Path) -> None:
    _, warnings = load(project, "Convert: {Fields: [{v1: spec.a, v2: spec.b}]}\n")
    assert any("read as 'convert'" in w for w in warnings)
    assert any("read as 'convert.fields'" in w for w in warnings)


@pytest.mark.parametrize(
    ("convert", "expected"),
    [
        ("convert: thing_convert\n", "key 'convert': must be a mapping, found a string"),
        ("convert: {}\n", "key 'convert': needs a 'role' or 'playbook'"),
        ("convert: {vars: {a: 1}}\n", "key 'convert': needs a 'role' or 'playbook'"),
        ("convert: {role: nope}\n", "key 'convert.role': role 'nope' not found"),
        ("convert: {playbook: nope.yml}\n", "key 'convert.playbook': playbook 'nope.yml' not"),
        (
            "convert: {role: thing_convert, playbook: playbooks/convert.yml}\n",
            "both 'convert.role' and 'convert.playbook' are set",
        ),
        (
            "convert: {role: thing_convert, fields: [{v1: spec.a, v2: spec.b}]}\n",
            "key 'convert.fields': set either 'fields'",
        ),
        (
            "convert: {fields: [{v1: spec.a, v2: spec.b}], vars: {a: 1}}\n",
            "key 'convert.vars': vars are handed to a convert role",
        ),
        ("convert: {fields: []}\n", "key 'convert.fields': must be a non-empty list"),
        ("convert: {fields: {v1: spec.a}}\n", "key 'convert.fields': must be a non-empty list"),
        ("convert: {fields: [spec.a]}\n", "key 'convert.fields[1]': must be a mapping"),
        ("convert: {fields: [{v1: spec.a}]}\n", "key 'convert.fields[1]': names one version"),
        ("convert: {fields: [{V1: spec.a, v2: x}]}\n", "'V1' is not a version name"),
        ("convert: {fields: [{v1: spec.a, v2: 3}]}\n", "key 'convert.fields[1].v2': must be a"),
        ("convert: {fields: [{v1: spec..a, v2: x}]}\n", "'spec..a' has an empty key"),
        ("convert: {fields: [{v1: [], v2: x}]}\n", "[] has an empty key"),
        (
            "convert: {fields: [{v1: metadata.name, v2: spec.name}]}\n",
            "key 'convert.fields[1].v1': 'metadata.name': metadata cannot be mapped",
        ),
        (
            "convert: {fields: [{v1: spec.a, v2: spec.b}, {v1: spec.a, v2: spec.c}]}\n",
            "key 'convert.fields[2].v1': spec.a is mapped already by item 1",
        ),
    ],
)
def test_convert_errors_name_the_key(project: Path, convert: str, expected: str) -> None:
    assert expected in error(project, convert)
