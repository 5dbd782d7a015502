"""A preview's verdicts (runner/preview/outcome.py) from a run's job events, the ansible-core
changes named (porting.py), the report (report.py) and check-roles' hints (rolescan.py)."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest

from runner.preview import porting, report, rolescan
from runner.preview.outcome import CHANGED, FAILED, UNCHANGED, CrPreview, judge
from runner.reconcile import fieldmanager
from runner.util.redact import SecretValues

PROJECT = Path(__file__).resolve().parents[1] / "integration" / "project"
ROLES = PROJECT / "roles"
# The messages tests/integration/test_line_compat.py sees on 2.19 and 2.21.
NOT_BOOLEAN_219 = (
    "Conditional result (True) was derived from value of type 'int' at "
    "'/x/roles/truthy/tasks/main.yml:15:9'. Conditionals must have a boolean result."
)
NOT_BOOLEAN_221 = "A 'when' expression failed: " + NOT_BOOLEAN_219
DELIMITERS = "Syntax error in expression. Template delimiters are not supported in expressions"
INDENT = (
    "The filter plugin 'ansible.builtin.indent' failed: unsupported operand type(s) for +=: "
    "'NoneType' and 'str'"
)
ITEMS = (
    "Failed to create object: The `items` field in the body must be populated when calling "
    "methods on a ResourceList"
)
TYPED = (
    'Failed to create object: b\'{"message":"Deployment in version \\"v1\\" cannot be handled '
    "as a Deployment: json: cannot unmarshal number into Go struct field "
    "ObjectMeta.metadata.labels of type string\"}'"
)


def cr(**fields: Any) -> CrPreview:
    return CrPreview(
        kind="Truthy",
        group="lines.operator-runner.dev",
        version="v1",
        namespace="ns",
        name="some",
        **fields,
    )


def event(kind: str, task: str, res: dict[str, Any], line: int = 5, **data: Any) -> dict[str, Any]:
    return {
        "event": kind,
        "event_data": {
            "task": task,
            "task_path": f"{PROJECT}/roles/truthy/tasks/main.yml:{line}",
            "res": res,
            **data,
        },
    }


@pytest.mark.parametrize(
    ("message", "key"),
    [
        (NOT_BOOLEAN_219, "conditional-not-boolean"),
        (NOT_BOOLEAN_221, "conditional-not-boolean"),
        (DELIMITERS, "template-in-expression"),
        (INDENT, "template-renders-none"),
        (ITEMS, "template-renders-none"),
        (TYPED, "typed-templates"),
        ("'dict object' has no attribute 'exception'", "failed-when-exception"),
        ("'result' is undefined", "undefined-is-an-error"),
    ],
)
def test_each_known_change_is_named_on_a_jump_that_crosses_its_line(message: str, key: str) -> None:
    change = porting.explain(message, "2.18", "2.21")
    assert change is not None and change.key == key
    assert change.link.startswith("docs/migrating-from-operator-sdk.md#")


def test_a_change_is_named_only_when_the_jump_crosses_it() -> None:
    assert porting.explain(NOT_BOOLEAN_219, "2.18", "2.19") is porting.CONDITIONALS
    assert porting.explain(NOT_BOOLEAN_219, None, "2.19") is porting.CONDITIONALS
    assert porting.explain(NOT_BOOLEAN_219, "2.19", "2.21") is None, "failed before the jump"
    assert porting.explain(NOT_BOOLEAN_219, "2.18", "2.18") is None
    assert porting.explain("'x' has no attribute 'exception'", "2.18", "2.19") is porting.UNDEFINED
    assert porting.explain("something else went wrong", "2.18", "2.21") is None


def test_a_failed_task_names_itself_its_file_and_line_and_the_change() -> None:
    events = [
        event("runner_on_ok", "Read", {"changed": False}),
        event("runner_on_failed", "Ignored", {"msg": "x"}, ignore_errors=True),
        event(
            "runner_on_failed",
            "A ConfigMap only when the CR lists entries",
            {"msg": NOT_BOOLEAN_219},
            line=15,
        ),
    ]
    result = judge(
        cr(),
        events,
        ok=False,
        tail="",
        project=PROJECT,
        secrets=SecretValues(),
        jump=("2.18", "2.19"),
    )
    assert result.outcome == FAILED
    [failure] = result.failures
    assert failure.task == "A ConfigMap only when the CR lists entries"
    assert failure.where == "roles/truthy/tasks/main.yml:15"
    assert failure.change is porting.CONDITIONALS


def test_a_run_that_never_started_a_task_points_at_ansibles_origin() -> None:
    tail = (
        "[ERROR]: conflicting action statements: k8s, kubernetes.core.k8s\n"
        f"Origin: {PROJECT}/roles/broken/tasks/main.yml:3:3\n"
    )
    result = judge(
        cr(), [], ok=False, tail=tail, project=PROJECT, secrets=SecretValues(), jump=(None, "2.19")
    )
    [failure] = result.failures
    assert failure.task == "" and failure.where == "roles/broken/tasks/main.yml:3"
    assert failure.message == "conflicting action statements: k8s, kubernetes.core.k8s"


def test_changes_show_their_diff_with_secrets_masked() -> None:
    secret = {"kind": "Secret", "metadata": {"name": "s", "namespace": "ns"}}
    events = [
        event("runner_on_ok", "Nothing", {"changed": False}),
        event(
            "runner_on_ok",
            "The ConfigMap",
            {
                "changed": True,
                "method": "update",
                "diff": {"before": {"data": {"entries": "a"}}, "after": {"data": {"items": "a"}}},
                "result": {"kind": "ConfigMap", "metadata": {"name": "c", "namespace": "ns"}},
            },
        ),
        event(
            "runner_on_ok",
            "The Secret",
            {
                "changed": True,
                "method": "update",
                "diff": {
                    "before": {"data": {"p": "b2xk", "q": "c2FtZQ=="}},
                    "after": {"data": {"p": "bmV3", "q": "c2FtZQ=="}},
                },
                "result": {**secret, "data": {"p": "bmV3"}},
            },
        ),
        event(
            "runner_on_ok",
            "A new Secret",
            {
                "changed": True,
                "method": "create",
                "result": {**secret, "data": {"k": "dG9w"}},
            },
        ),
        event(
            "runner_on_ok",
            "Exec",
            {"changed": True, "stdout": ""},
            resolved_action="kubernetes.core.k8s_exec",
        ),
    ]
    result = judge(
        cr(),
        events,
        ok=True,
        tail="",
        project=PROJECT,
        secrets=SecretValues(["sekrit"]),
        jump=("2.18", "2.18"),
    )
    assert result.outcome == CHANGED
    texts = {c.task: c.text for c in result.changes}
    assert set(texts) == {"The ConfigMap", "The Secret", "A new Secret", "Exec"}
    assert "-  entries: a" in texts["The ConfigMap"] and "+  items: a" in texts["The ConfigMap"]
    for text in (texts["The Secret"], texts["A new Secret"]):
        assert "b2xk" not in text and "bmV3" not in text and "dG9w" not in text
    assert "p: '******** (changed)'" in texts["The Secret"]
    assert "q: '********'" in texts["The Secret"].replace("+", " ")
    assert "kubernetes.core.k8s_exec: changed" in texts["Exec"]
    assert (
        judge(
            cr(),
            events[:1],
            ok=True,
            tail="",
            project=PROJECT,
            secrets=SecretValues(),
            jump=(None, "2.19"),
        ).outcome
        == UNCHANGED
    )


def test_the_json_report_has_the_fixed_names() -> None:
    failed = judge(
        cr(running_line="2.18", was="Successful"),
        [event("runner_on_failed", "T", {"msg": DELIMITERS})],
        ok=False,
        tail="",
        project=PROJECT,
        secrets=SecretValues(),
        jump=("2.18", "2.19"),
    )
    unchanged = CrPreview(
        kind="Echo",
        group="app.my.domain",
        version="v1",
        namespace="",
        name="cluster-wide",
        seconds=1.234,
    )
    items = json.loads(report.as_json([failed, unchanged]))
    assert isinstance(items, list)
    first, second = items
    assert {k: first[k] for k in ("kind", "namespace", "name", "outcome", "task")} == {
        "kind": "Truthy",
        "namespace": "ns",
        "name": "some",
        "outcome": "failed",
        "task": "T",
    }
    assert first["task_path"] == "roles/truthy/tasks/main.yml:5"
    assert first["porting"]["line"] == "2.19" and first["running_line"] == "2.18"
    assert second["outcome"] == "unchanged" and "task" not in second and second["seconds"] == 1.23
    table = report.table([failed, unchanged])
    assert table.splitlines()[0].split() == [
        "KIND",
        "NAMESPACE",
        "NAME",
        "OUTCOME",
        "TIME",
        "DETAIL",
    ]
    assert "fails" in table and "unchanged" in table
    details = report.details([failed, unchanged])
    assert "no-templates-in-expressions" in details and "cluster-wide" not in details


def test_the_line_of_the_operator_that_wrote_the_status_is_read_from_managed_fields() -> None:
    def entry(manager: str, when: str, sub: str = "status") -> dict[str, Any]:
        return {"manager": manager, "time": when, "subresource": sub, "operation": "Update"}

    obj = {
        "metadata": {
            "managedFields": [
                entry("kubectl-client-side-apply", "2026-01-03T00:00:00Z", ""),
                entry("operator-runner/ansible-core-2.17", "2026-01-01T00:00:00Z"),
                entry("operator-runner/ansible-core-2.18", "2026-01-02T00:00:00Z"),
                entry("OpenAPI-Generator", "2026-01-04T00:00:00Z"),
            ]
        }
    }
    assert fieldmanager.writer_line(obj) == "2.18"
    assert fieldmanager.writer_line({"metadata": {}}) is None
    assert fieldmanager.field_manager("2.19") == "operator-runner/ansible-core-2.19"


def test_check_roles_hints_at_the_constructs_of_the_line_compat_roles() -> None:
    hints = rolescan.scan(
        [ROLES / n for n in ("truthy", "fragment", "optional", "embedded", "fixed")], "2.18", "2.19"
    )
    found = {(h.path.relative_to(ROLES).parts[0], h.change.key) for h in hints}
    assert found == {
        ("truthy", "conditional-not-boolean"),
        ("embedded", "template-in-expression"),
        ("fragment", "template-renders-none"),
        ("optional", "template-renders-none"),
    }, "and none in `fixed`, the same constructs as the guide fixes them"
    truthy = next(h for h in hints if h.change.key == "conditional-not-boolean")
    assert truthy.line == 16 and truthy.text == "entries | length"
    fragment = next(h for h in hints if h.path.parts[-3] == "fragment")
    assert (fragment.line, fragment.text) == (
        16,
        "{{ lookup('template', 'fragment.j2') | indent(10) }}",
    ), "the line of the block scalar's text where the construct is"
    assert rolescan.scan([ROLES / "truthy"], "2.19", "2.21") == [], "on 2.19 already"
    text = rolescan.as_text(hints, ROLES, "2.18", "2.19")
    assert "truthy/tasks/main.yml:16: hint: a conditional must be a boolean" in text
    assert text.rstrip().endswith("operator-runner preview runs them)")


def test_check_roles_finds_typed_labels_facts_and_templated_asserts(tmp_path: Path) -> None:
    tasks = tmp_path / "r" / "tasks"
    tasks.mkdir(parents=True)
    (tasks / "main.yml").write_text(
        "- name: t\n"
        "  kubernetes.core.k8s:\n"
        "    definition:\n"
        "      metadata:\n"
        "        labels:\n"
        '          size: "{{ size | int }}"\n'
        "      spec:\n"
        "        env:\n"
        "          - name: PORT\n"
        '            value: "{{ port | int }}"\n'
        '- ansible.builtin.assert:\n    that: ["{{ a }} == 1", "b | length > 0"]\n'
        '- ansible.builtin.debug:\n    msg: "{{ ansible_distribution }}"\n'
        "  when: result.resources\n",
        encoding="utf-8",
    )
    hints = rolescan.scan([tmp_path], "2.18", "2.21")
    assert sorted((h.line, h.change.key) for h in hints) == [
        (6, "typed-templates"),
        (10, "typed-templates"),
        (12, "template-in-expression"),
        (14, "facts-as-variables"),
        (15, "conditional-not-boolean"),
    ]
    assert [h.change.key for h in rolescan.scan([tmp_path], "2.18", "2.19")].count(
        "facts-as-variables"
    ) == 0, "a 2.20 change"


def test_every_change_links_a_section_of_the_migration_guide() -> None:
    guide = (Path(__file__).resolve().parents[2] / porting.GUIDE).read_text(encoding="utf-8")
    anchors = set(re.findall(r"\{#([a-z0-9-]+)\}", guide))
    assert {change.anchor for change in porting.CHANGES} <= anchors
