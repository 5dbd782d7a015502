"""Per-task metrics: task results from job events, labels from the tasks' files, the caps."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from prometheus_client import generate_latest

from runner.ansible.results import TaskResult, summarize
from runner.ansible.tasknames import MAX_LABEL, TaskNames, name_in
from runner.app.serving.metrics import PrometheusMetrics
from runner.app.serving.taskmetrics import MAX_ROLES, MAX_TASKS, OTHER

ROLE = """\
---
# the role's tasks
- name: Create {{ ansible_operator_meta.name }}
  kubernetes.core.k8s:
    definition:
      name: not-this-one
    state: present

- kubernetes.core.k8s_info:
    kind: Pod
  name: "Look: at the pods"  # a comment
  register: pods

- ansible.builtin.debug:
    msg: no name here
  loop:
  - a
  - b

-   name: >
      folded
    debug: {}

- block:
    - name: inside a block
      set_fact:
        x: 1
  name: the block
"""


def event(kind: str, **data: Any) -> dict[str, Any]:
    return {"event": kind, "event_data": data}


def test_task_results_from_the_events() -> None:
    path = "/p/roles/web/tasks/main.yml"
    summary = summarize(
        [
            event("playbook_on_task_start", task="Create web-1", task_path=f"{path}:3"),
            event("runner_item_on_ok", task="Create web-1", res={"changed": True}),
            event(
                "runner_on_ok",
                task="Create web-1",
                role="web",
                task_path=f"{path}:3",
                task_action="kubernetes.core.k8s",
                res={"changed": True},
                duration=0.25,
            ),
            event("runner_on_ok", task="t", res={}, duration=0.01),
            event("runner_on_failed", task="f", res={"msg": "no"}, ignore_errors=True),
            event("runner_on_failed", task="f", res={"msg": "no"}, duration=1),
            event("runner_on_skipped", task="s", resolved_role="ns.coll.web", role="web"),
            event("runner_on_unreachable", task="u", res={}),
        ]
    )
    results = [(r.role, r.task, r.result, r.seconds) for r in summary.task_results]
    assert results == [
        ("web", "Create web-1", "changed", 0.25),
        ("", "t", "ok", 0.01),
        ("", "f", "ignored", 0.0),
        ("", "f", "failed", 1.0),
        ("ns.coll.web", "s", "skipped", 0.0),
        ("", "u", "unreachable", 0.0),
    ]
    assert summary.task_results[0].path == f"{path}:3"


def test_names_as_written_in_the_file() -> None:
    lines = ROLE.splitlines()
    assert name_in(lines, 3) == "Create {{ ansible_operator_meta.name }}"
    assert name_in(lines, 9) == "Look: at the pods"
    assert name_in(lines, 14) is None  # a task without a name
    assert name_in(lines, 20) is None  # a block scalar: not read
    assert name_in(lines, 25) == "inside a block"
    assert name_in(lines, 24) == "the block"
    assert name_in(lines, 0) is None and name_in(lines, 999) is None


def result(path: str, task: str = "shown", action: str = "debug") -> TaskResult:
    return TaskResult("web", task, path, action, "ok", 0.1)


def test_labels_never_templated(tmp_path: Path) -> None:
    tasks = tmp_path / "main.yml"
    tasks.write_text(ROLE)
    names = TaskNames()
    results = [
        result(f"{tasks}:3", "Create web-1"),
        result(f"{tasks}:3", "Create web-2"),
        result(f"{tasks}:14", "ansible.builtin.debug", "ansible.builtin.debug"),
        result(f"{tmp_path}/gone.yml:3", "as shown"),
        result("", "Gathering Facts", "gather_facts"),
        result("", "x" * 500),
    ]
    names.fill(results)
    labels = [r.label for r in results]
    assert labels[:5] == [
        "Create {{ ansible_operator_meta.name }}",
        "Create {{ ansible_operator_meta.name }}",
        "ansible.builtin.debug",
        "as shown",  # no file to read: Ansible's name (the metrics cap the labels)
        "Gathering Facts",
    ]
    assert len(labels[5]) == MAX_LABEL
    # an edited file is read again
    tasks.write_text(ROLE.replace("Create {{", "Make {{"))
    again = [result(f"{tasks}:3", "Make web-1")]
    names.fill(again)
    assert again[0].label == "Make {{ ansible_operator_meta.name }}"


def scrape(metrics: PrometheusMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def labelled(role: str, task: str, outcome: str = "ok", seconds: float = 0.1) -> TaskResult:
    return TaskResult(role, task, "", "debug", outcome, seconds, label=task)


def series(text: str, name: str, **labels: str) -> float | None:
    """The value of the series `name` with exactly `labels`, or None."""
    want = ",".join(f'{k}="{v}"' for k, v in sorted(labels.items()))
    for line in text.splitlines():
        if line.startswith(f"{name}{{{want}}} "):
            return float(line.rsplit(" ", 1)[1])
    return None


def test_task_series_and_their_caps() -> None:
    m = PrometheusMetrics(process_metrics=False)
    m.observe_tasks("Web", "x.dev", [labelled("web", "a", "changed", 0.3), labelled("web", "a")])
    playbook = TaskResult("", "p", "/x/playbooks/site.yml:4", "debug", "failed", 2.0, label="p")
    m.observe_tasks("Web", "x.dev", [playbook])
    text = scrape(m)
    web = {"kind": "Web", "group": "x.dev", "role": "web", "task": "a"}
    assert series(text, "operator_runner_task_duration_seconds_count", **web) == 2
    assert series(text, "operator_runner_task_duration_seconds_sum", **web) == 0.4
    assert series(text, "operator_runner_task_results_total", **web, result="changed") == 1
    assert series(text, "operator_runner_task_results_total", **web, result="ok") == 1
    site = {**web, "role": "site.yml", "task": "p", "result": "failed"}
    assert series(text, "operator_runner_task_results_total", **site) == 1
    # a role's task names beyond MAX_TASKS, a watch's roles beyond MAX_ROLES: `other`
    m.observe_tasks("Web", "x.dev", [labelled("many", f"t{i}") for i in range(MAX_TASKS + 5)])
    m.observe_tasks("Web", "x.dev", [labelled(f"r{i}", "t") for i in range(MAX_ROLES + 3)])
    text = scrape(m)
    many = {**web, "role": "many", "task": OTHER, "result": "ok"}
    assert series(text, "operator_runner_task_results_total", **many) == 5
    # web, site.yml and many took 3 of the MAX_ROLES places: 6 of the 35 roles are other
    others = {**web, "role": OTHER, "task": "t", "result": "ok"}
    assert series(text, "operator_runner_task_results_total", **others) == 6
    names = {
        line.split('task="')[1].split('"')[0] for line in text.splitlines() if 'role="many"' in line
    }
    assert len(names) == MAX_TASKS + 1
