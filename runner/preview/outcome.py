"""One CR's preview: its run's job events in, a verdict out (pure).

- `failed`: a task failed (not ignored, not rescued), or the run ended without a result (a
  syntax error, a role that cannot be loaded); each failure names its task, the task's file and
  line, Ansible's message, and the ansible-core change that explains it when one does
  (porting.py);
- `changed`: the run succeeded and some task would change something (its diff, diffs.py);
- `unchanged`: the run succeeded and no task would change anything.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.ansible.results import failure_message
from runner.preview import diffs, porting
from runner.util.redact import SecretValues

UNCHANGED, CHANGED, FAILED = "unchanged", "changed", "failed"
_ORIGIN = re.compile(r"Origin: (\S+?):(\d+)(?::\d+)?")
_ERROR = re.compile(r"^(?:\[ERROR\]: |ERROR! )(.+)$", re.M)


@dataclass(frozen=True)
class TaskChange:
    task: str
    where: str  # file:line, relative to the project
    text: str  # the diff, or what the task says it would do


@dataclass(frozen=True)
class Failure:
    task: str
    where: str
    message: str
    change: porting.Change | None = None


@dataclass
class CrPreview:
    """The verdict on one CR (module doc)."""

    kind: str
    group: str
    version: str
    namespace: str
    name: str
    outcome: str = UNCHANGED
    seconds: float = 0.0
    changes: list[TaskChange] = field(default_factory=list)
    failures: list[Failure] = field(default_factory=list)
    writes: list[str] = field(default_factory=list)  # the requests it would send
    running_line: str | None = None  # the line that last reconciled it (its managedFields)
    was: str = ""  # its state before: Successful, Failure, or "" (never reconciled)

    @property
    def where(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


def relative(path: str, project: Path) -> str:
    """`path` (file or file:line) relative to the project when it is inside it."""
    root = str(project.resolve()).rstrip("/") + "/"
    return path[len(root) :] if path.startswith(root) else path


def _tidy(text: str, project: Path) -> str:
    return text.replace(str(project.resolve()).rstrip("/") + "/", "")


def _results(res: Mapping[str, Any]) -> Iterable[Mapping[str, Any]]:
    items = res.get("results")
    if isinstance(items, list) and items:
        return [r for r in items if isinstance(r, Mapping) and r.get("changed")]
    return [res]


def task_changes(
    events: Sequence[Mapping[str, Any]], project: Path, secrets: SecretValues
) -> list[TaskChange]:
    """The tasks that would change something, with what each would change."""
    found = []
    for event in events:
        data = event.get("event_data") or {}
        res = data.get("res") or {}
        if event.get("event") != "runner_on_ok" or not isinstance(res, Mapping):
            continue
        if not res.get("changed"):
            continue
        text = "".join(diffs.result_text(r) for r in _results(res))
        if not text:
            action = str(data.get("resolved_action") or data.get("task_action") or "task")
            text = f"{action}: changed (it shows no diff)\n"
        found.append(
            TaskChange(
                task=secrets.redact(str(data.get("task") or "")),
                where=relative(str(data.get("task_path") or ""), project),
                text=secrets.redact(text),
            )
        )
    return found


def task_failures(
    events: Sequence[Mapping[str, Any]],
    project: Path,
    secrets: SecretValues,
    jump: tuple[str | None, str],
) -> list[Failure]:
    """The failed tasks (ignored ones left out), each explained when a known change does."""
    found = []
    for event in events:
        data = event.get("event_data") or {}
        if event.get("event") not in ("runner_on_failed", "runner_on_unreachable"):
            continue
        if data.get("ignore_errors"):
            continue
        task = str(data.get("task") or "")
        said = failure_message(data, str(event.get("stdout") or ""))
        message = said[len(task) + 2 :] if said.startswith(f"{task}: ") else said
        message = secrets.redact(_tidy(message, project))
        found.append(
            Failure(
                task=secrets.redact(task),
                where=relative(str(data.get("task_path") or ""), project),
                message=message,
                change=porting.explain(message, *jump),
            )
        )
    return found


def run_error(tail: str, project: Path, jump: tuple[str | None, str]) -> Failure:
    """A run that ended without a result: Ansible's error and where it points."""
    errors = _ERROR.findall(tail)
    message = _tidy(
        errors[-1] if errors else (tail.strip().splitlines() or ["no output"])[-1], project
    )
    origin = _ORIGIN.search(tail)
    where = relative(f"{origin[1]}:{origin[2]}", project) if origin else ""
    return Failure(task="", where=where, message=message, change=porting.explain(message, *jump))


def judge(
    cr: CrPreview,
    events: Sequence[Mapping[str, Any]],
    *,
    ok: bool,
    tail: str,
    project: Path,
    secrets: SecretValues,
    jump: tuple[str | None, str],
) -> CrPreview:
    """Fill in `cr`'s outcome from its run: its events, whether it succeeded (`ok`), the end
    of its output (`tail`); `jump`: the line jumped from (None: not known) and to."""
    if not ok:
        cr.failures = task_failures(events, project, secrets, jump)
        if not cr.failures:
            cr.failures = [run_error(secrets.redact(tail), project, jump)]
        cr.outcome = FAILED
        return cr
    cr.changes = task_changes(events, project, secrets)
    cr.outcome = CHANGED if cr.changes else UNCHANGED
    return cr
