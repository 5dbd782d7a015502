"""The per-task metrics: how long each task of a role takes, and how it ends.

- `operator_runner_task_duration_seconds{kind,group,role,task}`: a histogram of task durations
  (ansible-runner's `duration` of the task's result on the host: a loop's items together);
- `operator_runner_task_results_total{kind,group,role,task,result}`: task results, `result`
  one of ok, changed, failed, ignored (failed with `ignore_errors`), skipped, unreachable.

Read from the job events of reconcile and finalizer runs, on both executors. `kind` and `group`
are the watch's; `role` the task's role (a collection's by its FQCN), or the file name of a
playbook for a task outside roles; `task` the task's name as written in its file
(runner/ansible/tasknames.py: never a templated name), or its action when it has none.

Bounded cardinality: at most MAX_ROLES roles per watch and MAX_TASKS task names per role of a
watch get series of their own; the ones seen after are counted under `other` (a role's name
`other`, a task's name `other`). With the histogram's buckets, a task costs at most 17 series
of the duration and 6 of the results.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram

from runner.ansible.results import TaskResult

#: Tasks take from milliseconds (a set_fact) to minutes (a wait).
TASK_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 300.0)
MAX_ROLES = 32  # per watch
MAX_TASKS = 100  # per role of a watch
OTHER = "other"
RESULTS = ("ok", "changed", "failed", "ignored", "skipped", "unreachable")


def role_label(result: TaskResult) -> str:
    """The task's role, or its playbook's file name when it is in none."""
    if result.role:
        return result.role
    file = result.path.rpartition(":")[0] or result.path
    return file.rsplit("/", 1)[-1] or "playbook"


class TaskMetrics:
    """The per-task series in `registry` (module doc)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        labels = ["kind", "group", "role", "task"]
        self.duration = Histogram(
            "operator_runner_task_duration_seconds",
            "Duration of Ansible tasks (the task's result on its host), by role and task name.",
            labels,
            buckets=TASK_BUCKETS,
            registry=registry,
        )
        self.results = Counter(
            "operator_runner_task_results",
            "Ansible task results: ok, changed, failed, ignored, skipped, unreachable.",
            [*labels, "result"],
            registry=registry,
        )
        self._roles: dict[tuple[str, str], set[str]] = {}
        self._tasks: dict[tuple[str, str, str], set[str]] = {}

    def observe(self, kind: str, group: str, tasks: Sequence[TaskResult]) -> None:
        for task in tasks:
            role = self._bounded(self._roles, (kind, group), role_label(task), MAX_ROLES)
            name = self._bounded(self._tasks, (kind, group, role), task.label, MAX_TASKS)
            self.duration.labels(kind, group, role, name).observe(task.seconds)
            self.results.labels(kind, group, role, name, task.result).inc()

    @staticmethod
    def _bounded(seen: dict[Any, set[str]], key: Hashable, value: str, limit: int) -> str:
        """`value`, or OTHER once `limit` values have been seen for `key`."""
        values = seen.setdefault(key, set())
        if value in values:
            return value
        if len(values) >= limit or not value:
            return OTHER
        values.add(value)
        return value
