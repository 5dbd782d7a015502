"""runner.reconcile.extravars: operator-sdk's extra vars, marked unsafe, as Ansible reads them."""

from __future__ import annotations

import copy
import importlib.metadata
import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml
from ansible.parsing.dataloader import DataLoader  # type: ignore[import-untyped]

from runner.reconcile.extravars import (
    UnsafeText,
    build_extra_vars,
    extra_vars_key,
    mark_unsafe,
    render_extra_vars,
)
from runner.watches import GVK, Finalizer, Watch

# ansible-core 2.19 keeps the type a template produces ("{{ 6 * 7 }}" is 42) and marks trust on
# strings; the older lines (2.15-2.18) render text ("42") and wrap untrusted strings instead.
TYPED = tuple(int(n) for n in importlib.metadata.version("ansible-core").split(".")[:2]) >= (2, 19)
FORTY_TWO: object = 42 if TYPED else "42"

if TYPED:
    from ansible.template import is_trusted_as_template  # type: ignore[import-untyped]
else:
    from ansible.utils.unsafe_proxy import AnsibleUnsafe  # type: ignore[import-untyped]

    def is_trusted_as_template(value: object) -> bool:
        return not isinstance(value, AnsibleUnsafe)


ECHO = GVK("app.my.domain", "v1", "Echo")
PIPE = "{{ lookup('pipe', 'id') }}"


def echo(spec: object = None, **metadata: str) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "app.my.domain/v1",
        "kind": "Echo",
        "metadata": metadata or {"name": "e1", "namespace": "ns1"},
    }
    if spec is not None:
        obj["spec"] = spec
    return obj


def watch(**fields: Any) -> Watch:
    fields.setdefault("mark_unsafe", False)
    return Watch(gvk=ECHO, role="/roles/echo", **fields)


def strings_and_keys(value: Any) -> list[Any]:
    """Every string in ``value``, mapping keys included."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, dict):
        return [s for k, v in value.items() for s in [*strings_and_keys(k), *strings_and_keys(v)]]
    if isinstance(value, list):
        return [s for item in value for s in strings_and_keys(item)]
    return []


# -- extra_vars_key --------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("gvk", "key"),
    [
        (GVK("swallowlab.com", "v1alpha1", "EchoFlask"), "_swallowlab_com_echoflask"),
        (GVK("app.my.domain", "v1", "Echo"), "_app_my_domain_echo"),
        (GVK("cert-manager.io", "v1", "Certificate"), "_cert_manager_io_certificate"),
        (GVK("", "v1", "ConfigMap"), "__configmap"),  # operator-sdk: empty group, two _
        (GVK("Example.COM", "v1", "Foo"), "_Example_COM_foo"),  # only the kind is lower-cased
    ],
)
def test_extra_vars_key(gvk: GVK, key: str) -> None:
    assert extra_vars_key(gvk) == key


# -- build_extra_vars ------------------------------------------------------------------------

SPEC = {"sizeK8s": 3, "egressIPs": ["a"], "nestedObj": {"innerKey": "v"}}
META = {"name": "e1", "namespace": "ns1"}

BUILD_CASES = [
    (
        "snake_cased spec, spec and object as they are",
        echo(SPEC),
        watch(),
        False,
        {
            "size_k8s": 3,
            "egress_ips": ["a"],
            "nested_obj": {"inner_key": "v"},
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo(SPEC),
            "_app_my_domain_echo_spec": SPEC,
        },
    ),
    (
        "snakeCaseParameters false keeps the keys",
        echo(SPEC),
        watch(snake_case_parameters=False),
        False,
        {
            **SPEC,
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo(SPEC),
            "_app_my_domain_echo_spec": SPEC,
        },
    ),
    (
        "missing spec is an empty one",
        echo(),
        watch(),
        False,
        {
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo(),
            "_app_my_domain_echo_spec": {},
        },
    ),
    (
        "a spec that is not a mapping is an empty one",
        echo(["not", "a", "mapping"]),
        watch(),
        False,
        {
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo(["not", "a", "mapping"]),
            "_app_my_domain_echo_spec": {},
        },
    ),
    (
        "cluster-scoped: empty namespace",
        echo({}, name="c1"),
        watch(),
        False,
        {
            "ansible_operator_meta": {"name": "c1", "namespace": ""},
            "_app_my_domain_echo": echo({}, name="c1"),
            "_app_my_domain_echo_spec": {},
        },
    ),
    (
        "core kind",
        {"apiVersion": "v1", "kind": "ConfigMap", "metadata": META, "data": {"k": "v"}},
        Watch(gvk=GVK("", "v1", "ConfigMap"), role="/r", mark_unsafe=False),
        False,
        {
            "ansible_operator_meta": META,
            "__configmap": {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": META,
                "data": {"k": "v"},
            },
            "__configmap_spec": {},
        },
    ),
    (
        "meta and object keys win over spec keys, watch vars over everything",
        echo({"ansible_operator_meta": "spec", "_app_my_domain_echo": 1, "fromSpec": 1}),
        watch(vars={"from_spec": "watch", "ansible_operator_meta": "watch"}),
        False,
        {
            "from_spec": "watch",
            "ansible_operator_meta": "watch",
            "_app_my_domain_echo": echo(
                {"ansible_operator_meta": "spec", "_app_my_domain_echo": 1, "fromSpec": 1}
            ),
            "_app_my_domain_echo_spec": {
                "ansible_operator_meta": "spec",
                "_app_my_domain_echo": 1,
                "fromSpec": 1,
            },
        },
    ),
    (
        "finalizer vars only on finalizer runs: not finalizing",
        echo({"state": "present"}),
        watch(vars={"w": 1}, finalizer=Finalizer("f", vars={"state": "absent", "w": 2})),
        False,
        {
            "state": "present",
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo({"state": "present"}),
            "_app_my_domain_echo_spec": {"state": "present"},
            "w": 1,
        },
    ),
    (
        "finalizer vars on top when finalizing",
        echo({"state": "present"}),
        watch(vars={"w": 1}, finalizer=Finalizer("f", vars={"state": "absent", "w": 2})),
        True,
        {
            "state": "absent",
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo({"state": "present"}),
            "_app_my_domain_echo_spec": {"state": "present"},
            "w": 2,
        },
    ),
    (
        "finalizing without a finalizer: watch vars only",
        echo({}),
        watch(vars={"w": 1}),
        True,
        {
            "ansible_operator_meta": META,
            "_app_my_domain_echo": echo({}),
            "_app_my_domain_echo_spec": {},
            "w": 1,
        },
    ),
]


@pytest.mark.parametrize(
    ("obj", "the_watch", "finalizing", "expected"),
    [pytest.param(*case[1:], id=case[0]) for case in BUILD_CASES],
)
def test_build_extra_vars(
    obj: dict[str, Any], the_watch: Watch, finalizing: bool, expected: dict[str, Any]
) -> None:
    assert build_extra_vars(obj, the_watch, finalizing=finalizing) == expected


def test_mark_unsafe_marks_every_string_from_the_object_and_nothing_else() -> None:
    obj = echo({"message": PIPE, "nested": {"list": ["{{ 7 * 6 }}", 5]}, "keyName": True})
    the_watch = watch(
        mark_unsafe=True,
        vars={"greeting": "{{ 6 * 7 }}", "deep": {"k": ["v"]}},
        finalizer=Finalizer("f", vars={"fin": "{{ 1 }}"}),
    )
    result = build_extra_vars(obj, the_watch, finalizing=True)
    from_object = {k: v for k, v in result.items() if k not in ("greeting", "deep", "fin")}
    object_strings = strings_and_keys(from_object)
    assert PIPE in object_strings and "e1" in object_strings and "key_name" in object_strings
    top_level_spec_keys = ["message", "nested", "key_name"]
    for text in object_strings:
        if text in ("ansible_operator_meta", "_app_my_domain_echo", "_app_my_domain_echo_spec"):
            assert type(text) is str  # our own keys
        else:
            assert isinstance(text, UnsafeText), text
    assert all(isinstance(k, UnsafeText) for k in result if k in top_level_spec_keys)
    author_strings = strings_and_keys({k: result[k] for k in ("greeting", "deep", "fin")})
    assert author_strings and all(type(text) is str for text in author_strings)


def test_without_mark_unsafe_nothing_is_marked() -> None:
    result = build_extra_vars(echo({"message": PIPE}), watch(mark_unsafe=False))
    assert not any(isinstance(text, UnsafeText) for text in strings_and_keys(result))


@pytest.mark.parametrize("mark", [True, False])
def test_build_extra_vars_shares_nothing_with_its_inputs(mark: bool) -> None:
    obj = echo({"list": [{"a": "b"}], "map": {"c": "d"}})
    the_watch = watch(mark_unsafe=mark, vars={"v": {"x": [1]}})
    obj_before, vars_before = copy.deepcopy(obj), copy.deepcopy(the_watch.vars)
    result = build_extra_vars(obj, the_watch)
    result["list"][0]["a"] = "changed"
    result["_app_my_domain_echo"]["spec"]["map"]["c"] = "changed"
    result["_app_my_domain_echo_spec"]["list"].append("more")
    result["v"]["x"].append(2)
    assert obj == obj_before
    assert the_watch.vars == vars_before


def test_mark_unsafe() -> None:
    value = {"key": ["text", 1, None, 2.5, True, ("tuple", {"in": "tuple"})], 7: "seven"}
    marked = mark_unsafe(value)
    assert marked == {"key": ["text", 1, None, 2.5, True, ["tuple", {"in": "tuple"}]], 7: "seven"}
    assert [type(k) for k in marked] == [UnsafeText, int]
    assert type(marked["key"][0]) is UnsafeText
    assert type(marked["key"][5][1]["in"]) is UnsafeText
    assert marked["key"][1:5] == [1, None, 2.5, True]
    assert mark_unsafe(marked) == marked
    assert type(mark_unsafe("s")) is UnsafeText


# -- render_extra_vars, read back the way ansible-playbook reads -e @file -----------------------

TRICKY = [
    "plain",
    "{{ 7 * 6 }}",
    "{% raw %}x{% endraw %}",
    "line\nbreak",
    'quote " and \\ backslash',
    "it's",
    "yes",
    "123",
    "null",
    "~",
    "- dash",
    "key: value",
    "# hash",
    "!vault |",
    "&anchor",
    "*alias",
    "  spaces  ",
    "",
    "tab\there",
    "bell\x07",
    "unicode é ☃ \U0001f600",
    "x" * 300,
    # Text that ansible-core 2.19 would re-type if written as !unsafe "...":
    "123",
    "-1",
    "1.10",
    "0x1F",
    "1e5",
    ".inf",
    "1:30",
    "2024-01-02",
    "True",
    "off",
    "=",
    "<<",
]


def ansible_load(text: str, tmp_path: Path) -> Any:
    """Load extra vars as ``ansible-playbook -e @file`` does (trusted as templates)."""
    path = tmp_path / "extravars"
    path.write_text(text, encoding="utf-8")
    if not TYPED:  # before 2.19 every string Ansible loads is a template unless marked
        return DataLoader().load_from_file(str(path))
    return DataLoader().load_from_file(str(path), trusted_as_template=True)


def test_rendered_strings_round_trip_through_ansible(tmp_path: Path) -> None:
    data = {
        "marked": mark_unsafe({value: value for value in TRICKY}),
        "plain": {value: value for value in TRICKY},
        "numbers": [1, 2.5, None, True, False],
    }
    assert ansible_load(render_extra_vars(data), tmp_path) == data


def test_marked_strings_are_not_trusted_plain_ones_are(tmp_path: Path) -> None:
    data = {
        "marked": mark_unsafe({"key {{ 1 }}": ["{{ 7 * 6 }}", {"k": "v"}]}),
        "plain": {"key {{ 1 }}": ["{{ 7 * 6 }}", {"k": "v"}]},
    }
    loaded = ansible_load(render_extra_vars(data), tmp_path)
    marked = strings_and_keys(loaded["marked"])
    plain = strings_and_keys(loaded["plain"])
    assert len(marked) == len(plain) == 4
    assert not any(is_trusted_as_template(text) for text in marked)
    assert all(is_trusted_as_template(text) for text in plain)
    assert all(is_trusted_as_template(key) for key in loaded)  # unmarked top-level keys


def test_mark_unsafe_false_writes_plain_strings(tmp_path: Path) -> None:
    text = render_extra_vars({"m": mark_unsafe(["{{ 7 * 6 }}"])}, mark_unsafe=False)
    assert "!unsafe" not in text
    loaded = ansible_load(text, tmp_path)
    assert loaded == {"m": ["{{ 7 * 6 }}"]}
    assert is_trusted_as_template(loaded["m"][0])


def test_ansible_json_object_hooks_are_plain_mappings(tmp_path: Path) -> None:
    # In JSON extra vars (operator-sdk's format) these would be decoded as vault/unsafe values.
    spec = {"v": {"__ansible_vault": "not a vault"}, "u": {"__ansible_unsafe": "x"}}
    for mark in (True, False):
        result = build_extra_vars(echo(spec), watch(mark_unsafe=mark))
        loaded = ansible_load(render_extra_vars(result, mark_unsafe=mark), tmp_path)
        assert loaded["v"] == {"__ansible_vault": "not a vault"}
        assert loaded["u"] == {"__ansible_unsafe": "x"}


@pytest.mark.parametrize(
    ("text", "loaded"), [("123", 123), ("yes", True), ("", None), ("1.10", 1.1)]
)
def test_ansible_2_19_types_unsafe_scalars_as_if_unquoted(
    tmp_path: Path, text: str, loaded: object
) -> None:
    # Why render_extra_vars writes such text without the tag (the round trip test above);
    # the older lines keep a tagged scalar the string it was.
    assert ansible_load(f'x: !unsafe "{text}"\n', tmp_path) == {"x": loaded if TYPED else text}


@pytest.mark.skipif(not yaml.__with_libyaml__, reason="PyYAML without libyaml")
@pytest.mark.parametrize("mark", [True, False])
def test_libyaml_emitter_means_what_pyyaml_s_does(mark: bool, tmp_path: Path) -> None:
    """The C emitter writes a few things another way (an empty key, characters beyond the BMP
    escaped); Ansible reads the same values, marked the same, from both."""
    from runner.reconcile import extravars

    data = {"marked": mark_unsafe({v: [v, {v: v}] for v in TRICKY}), "plain": TRICKY, "n": 1}
    fast = render_extra_vars(data, mark_unsafe=mark)

    class Slow(yaml.SafeDumper):
        yaml_representers = (
            extravars._UnsafeDumper if mark else extravars._PlainDumper
        ).yaml_representers

        def ignore_aliases(self, data: Any) -> bool:
            return True

    assert issubclass(extravars._PlainDumper, yaml.CSafeDumper)
    slow = yaml.dump(
        data,
        Dumper=Slow,
        default_flow_style=False,
        sort_keys=False,
        allow_unicode=True,
        width=2**31 - 1,
    )
    loaded_fast, loaded_slow = ansible_load(fast, tmp_path), ansible_load(slow, tmp_path)
    assert loaded_fast == loaded_slow == {**data, "marked": {v: [v, {v: v}] for v in TRICKY}}
    trusted = [is_trusted_as_template(v) for v in loaded_fast["marked"]]
    assert trusted == [is_trusted_as_template(v) for v in loaded_slow["marked"]]
    template = next(v for v in loaded_fast["marked"] if v == "{{ 7 * 6 }}")
    assert is_trusted_as_template(template) is not mark


def test_no_yaml_aliases_for_shared_objects() -> None:
    shared = {"a": [1, 2]}
    text = render_extra_vars({"one": shared, "two": shared, "three": (shared,)})
    assert "&" not in text and "*" not in text
    assert yaml.safe_load(text) == {"one": shared, "two": shared, "three": [shared]}


def test_plain_yaml_loaders_reject_the_unsafe_tag() -> None:
    # Why ansible-runner must never parse the file itself (it does not: it passes -e @file).
    with pytest.raises(yaml.constructor.ConstructorError, match="!unsafe"):
        yaml.safe_load(render_extra_vars(mark_unsafe({"a": "b"})))


# -- the proof: a real ansible-playbook run -----------------------------------------------------

PLAYBOOK = """\
- hosts: localhost
  connection: local
  gather_facts: false
  tasks:
    - name: message
      ansible.builtin.debug:
        msg: "{{ message }}"
    - name: nested
      ansible.builtin.debug:
        msg: "{{ nested.list[0] }}"
    - name: object
      ansible.builtin.debug:
        msg: "{{ _app_my_domain_echo.spec.message }}"
    - name: spec
      ansible.builtin.debug:
        msg: "{{ _app_my_domain_echo_spec.nested.list[0] }}"
    - name: watch var
      ansible.builtin.debug:
        msg: "{{ greeting }}"
"""
CR_SPEC = {"message": PIPE, "nested": {"list": ["{{ 7 * 6 }}"]}}
TASK_RESULT = re.compile(
    r"TASK \[(?P<task>[^\]]+)\] \**\nok: \[localhost\] => (?P<json>\{.*?\n\})", re.S
)


def run_playbook(tmp_path: Path, extravars_text: str) -> dict[str, Any]:
    """Run PLAYBOOK with ``-e @<file>``; the ``msg`` of each task by task name."""
    ansible_playbook = Path(sys.executable).parent / "ansible-playbook"
    assert ansible_playbook.is_file(), f"ansible-core is not installed next to {sys.executable}"
    (tmp_path / "site.yml").write_text(PLAYBOOK)
    (tmp_path / "extravars").write_text(extravars_text, encoding="utf-8")
    env = {
        **os.environ,
        "ANSIBLE_HOME": str(tmp_path / "ansible-home"),
        "ANSIBLE_LOCAL_TEMP": str(tmp_path / "ansible-tmp"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.default",
        "ANSIBLE_CALLBACK_RESULT_FORMAT": "json",
        "ANSIBLE_NOCOLOR": "1",
        "ANSIBLE_CONFIG": str(tmp_path / "no-ansible.cfg"),
    }
    completed = subprocess.run(
        [str(ansible_playbook), "-i", "localhost,", "site.yml", "-e", f"@{tmp_path / 'extravars'}"],
        cwd=tmp_path,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert completed.returncode == 0, completed.stdout + completed.stderr
    results = {
        m["task"]: json.loads(m["json"])["msg"] for m in TASK_RESULT.finditer(completed.stdout)
    }
    assert len(results) == 5, completed.stdout
    return results


def test_ansible_never_templates_a_marked_cr_spec(tmp_path: Path) -> None:
    the_watch = watch(mark_unsafe=True, vars={"greeting": "{{ 6 * 7 }}"})
    text = render_extra_vars(build_extra_vars(echo(CR_SPEC), the_watch))
    assert run_playbook(tmp_path, text) == {
        "message": PIPE,
        "nested": "{{ 7 * 6 }}",
        "object": PIPE,
        "spec": "{{ 7 * 6 }}",
        "watch var": FORTY_TWO,  # the operator author's own vars are templated
    }


def test_without_mark_unsafe_ansible_2_19_runs_the_cr_spec(tmp_path: Path) -> None:
    # operator-sdk's default (markUnsafe: false): whoever writes the CR runs code here.
    the_watch = watch(mark_unsafe=False, vars={"greeting": "{{ 6 * 7 }}"})
    text = render_extra_vars(build_extra_vars(echo(CR_SPEC), the_watch), mark_unsafe=False)
    results = run_playbook(tmp_path, text)
    assert results["message"].startswith("uid=")  # `id` ran in the operator
    assert results["object"].startswith("uid=")
    assert results["nested"] == FORTY_TWO
    assert results["spec"] == FORTY_TWO
    assert results["watch var"] == FORTY_TWO


def test_operator_sdk_mark_unsafe_leaves_the_whole_object_open(tmp_path: Path) -> None:
    # operator-sdk with markUnsafe: true writes JSON, wraps only spec-derived values and not
    # the whole object: {{ _<group>_<kind>.spec.message }} still runs. We mark it too.
    def wrap(value: Any) -> Any:
        if isinstance(value, str):
            return {"__ansible_unsafe": value}
        if isinstance(value, dict):
            return {k: wrap(v) for k, v in value.items()}
        if isinstance(value, list):
            return [wrap(v) for v in value]
        return value

    obj = echo(CR_SPEC)
    sdk_vars = {
        **wrap(CR_SPEC),
        "ansible_operator_meta": META,
        "_app_my_domain_echo": obj,
        "_app_my_domain_echo_spec": wrap(CR_SPEC),
        "greeting": "{{ 6 * 7 }}",
    }
    results = run_playbook(tmp_path, json.dumps(sdk_vars))
    assert results["message"] == PIPE
    assert results["spec"] == "{{ 7 * 6 }}"
    assert results["object"].startswith("uid=")
