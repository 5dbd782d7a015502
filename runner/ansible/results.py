"""What a run of Ansible amounted to, read from ansible-runner's job events (pure).

ansible-runner emits one event per callback of the playbook (`runner_on_ok`, `runner_on_failed`,
..., and a final `playbook_on_stats`). operator-sdk reads the same events: the failing tasks'
messages go into the `Failure` condition, the stats into `ansibleResult`, and a task of the
`requeue_after` module asks for the next run after its `period`.
"""

from __future__ import annotations

import contextlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.util.durations import parse_period
from runner.util.redact import mask_secret_objects, mask_secret_text

REQUEUE_ACTIONS = frozenset(
    {"requeue_after", "operator_sdk.util.requeue_after", "runner.requeue_after"}
)
ADMISSION_ACTIONS = frozenset({"admission", "operator_sdk.util.admission"})
TASK_EVENTS = frozenset(
    {
        "runner_on_ok",
        "runner_on_failed",
        "runner_on_skipped",
        "runner_on_unreachable",
        "runner_item_on_failed",
    }
)

#: A task's result on a host (a loop's items come before it, in events of their own).
RESULT_EVENTS = frozenset(
    {"runner_on_ok", "runner_on_failed", "runner_on_skipped", "runner_on_unreachable"}
)


@dataclass(slots=True)
class TaskResult:
    """One task's result on a host, as its job event tells it: for the per-task metrics.
    `label` is the task's name as written in its file (tasknames.py fills it in after the
    run); `task` the name Ansible showed, which a template may have filled in."""

    role: str  # the role's name (a collection's role: its FQCN); "" for a playbook's task
    task: str
    path: str  # task_path: file:line
    action: str
    result: str  # ok, changed, failed, ignored, skipped, unreachable
    seconds: float
    label: str = ""


@dataclass
class RunSummary:
    """What the events of one run say."""

    stats: Mapping[str, Any] | None = None  # event_data of playbook_on_stats
    stats_created: str = ""
    failures: list[str] = field(default_factory=list)
    requeue_after: float | None = None
    tasks: int = 0
    answers: list[Mapping[str, Any]] = field(default_factory=list)  # operator_sdk.util.admission
    task_results: list[TaskResult] = field(default_factory=list)

    @property
    def finished(self) -> bool:
        return self.stats is not None

    def failed_hosts(self) -> int:
        if self.stats is None:
            return 0
        keys = ("failures", "dark")
        return sum(len(self.stats.get(k) or {}) for k in keys)


_API_STATUS = re.compile(r"""b'(\{.*?"kind":\s*"Status".*\})(?:\\n)?'""", re.DOTALL)


def _readable(detail: str) -> str:
    """kubernetes.core quotes API errors as the bytes of the response (`b'{"kind":"Status",
    ...}'`): keep the API server's own message, which names what to fix."""
    match = _API_STATUS.search(detail)
    if not match:
        return detail
    try:
        raw = match.group(1).encode("latin-1").decode("unicode_escape")
        message = json.loads(raw).get("message")
    except (ValueError, UnicodeError):
        return detail
    if not message:
        return detail
    return detail[: match.start()] + str(message) + detail[match.end() :]


#: The msg of a looped task some of whose items failed (ansible-core's TaskExecutor).
LOOP_FAILED = "One or more items failed"

#: A failure's detail is cut to this many characters (a task's `msg` keeps its head, a
#: command's stderr its tail), so that one task's huge output cannot push the reason (or the
#: other failures) out of the `Failure` condition and the Event.
MAX_DETAIL = 800
ELLIPSIS = "…"


def _head(text: str, limit: int = MAX_DETAIL) -> str:
    return text if len(text) <= limit else text[: limit - 1].rstrip() + ELLIPSIS


def _tail(text: str, limit: int) -> str:
    return text if len(text) <= limit else ELLIPSIS + text[-(limit - 1) :].lstrip()


_DISPLAYED_RESULT = re.compile(r"(?:FAILED|UNREACHABLE)! => ")
_DISPLAYED_MSG = re.compile(r'"msg": ("(?:[^"\\]|\\.)*")')
_ERROR_LINE = re.compile(r"\[ERROR\]: (.+)")


def displayed_result(stdout: str) -> Mapping[str, Any]:
    """The task result as Ansible printed it (`fatal: [host]: FAILED! => {...}`) in an event's
    `stdout`: ansible-runner drops an event's `res` when it is larger than MAX_EVENT_RES
    (700 kB), so a failing command with a lot of output would otherwise lose its reason."""
    match = _DISPLAYED_RESULT.search(stdout)
    if match:
        try:
            res, _ = json.JSONDecoder().raw_decode(stdout, match.end())
        except ValueError:
            res = None
        if isinstance(res, Mapping):
            return res
        quoted = _DISPLAYED_MSG.search(stdout, match.end())
        if quoted:
            with contextlib.suppress(ValueError):
                return {"msg": json.loads(quoted.group(1))}
    error = _ERROR_LINE.search(stdout)  # ansible-core's own one-line summary
    if error:
        return {"msg": error.group(1).strip()}
    return {}


_TASK_HEADER = re.compile(r"^(?=TASK \[)", re.MULTILINE)
_CENSORED = '"censored": '
_ERROR_BLOCK = re.compile(r"^\[ERROR\]: .*?(?=^Origin: |^fatal: |^failed: |\Z)", re.M | re.S)
HIDDEN_ERROR = "[ERROR]: Task failed: its output is hidden (no_log)\n"


def hide_no_log_errors(stdout: str) -> str:
    """Ansible's output with the `[ERROR]: ...` summary of a `no_log` task's failure hidden:
    from ansible-core 2.19 the default callback prints the failure's message (`Task failed:
    Action failed: <msg>`) above the censored result, and a no_log task's message may carry the
    very value it hides. Each task's section is read on its own; one whose result is censored
    keeps Ansible's origin lines and result, not the message."""
    if _CENSORED not in stdout:
        return stdout
    sections = _TASK_HEADER.split(stdout)
    return "".join(
        _ERROR_BLOCK.sub(HIDDEN_ERROR, part) if _CENSORED in part else part for part in sections
    )


def task_role(event_data: Mapping[str, Any]) -> str:
    """The role a task event comes from (a collection's role by its FQCN, a role given by its
    path, as the runner's playbook gives a watch's role, by its folder's name); "" outside
    roles."""
    role = str(event_data.get("resolved_role") or event_data.get("role") or "")
    return role.rstrip("/").rsplit("/", 1)[-1] if "/" in role else role


#: A failing task's name is cut to this many characters in its message.
MAX_TASK_NAME = 200


def task_location(event_data: Mapping[str, Any]) -> str:
    """Where a task is written: `role web, tasks/main.yml:12` (the file from the role's
    folder on), `site.yml:4` for a playbook's task; "" when the event does not say."""
    role = task_role(event_data)
    file, _, line = str(event_data.get("task_path") or "").rpartition(":")
    where = []
    if role:
        where.append(f"role {role}")
    if file and line.isdigit():
        short = role.rsplit(".", 1)[-1]
        at = file.rfind(f"/{short}/") if short else -1
        file = file[at + len(short) + 2 :] if at >= 0 else file.rsplit("/", 1)[-1]
        where.append(f"{file}:{line}")
    return ", ".join(where)


def failure_message(event_data: Mapping[str, Any], stdout: str = "") -> str:
    """`<task> (<where>): <what went wrong>` for a failed task, as terse as Ansible's own
    output: the task's role and file:line (task_location), then its `msg` (for a command,
    followed by the end of its stderr), bounded; a `no_log` task's, Ansible's own word that
    its output is hidden. A Secret written out in the result has its values masked
    (runner/util/redact.py)."""
    task = _head(
        str(event_data.get("task") or event_data.get("task_action") or "task"), MAX_TASK_NAME
    )
    where = task_location(event_data)
    if where:
        task = f"{task} ({where})"
    res = event_data.get("res") or {}
    if not res and stdout:
        res = displayed_result(stdout)
    detail = ""
    if isinstance(res, Mapping):
        res = mask_secret_objects(res)
        items = [r for r in res.get("results") or [] if isinstance(r, Mapping) and r.get("failed")]
        if items and res.get("msg") in (None, "", LOOP_FAILED):
            # a loop: Ansible's own msg says only that items failed; theirs say why
            detail = _head(mask_secret_text("; ".join(str(r.get("msg", "failed")) for r in items)))
        for key in ("msg", "stderr", "module_stderr", "exception", "censored"):
            value = res.get(key)
            if value and not detail:
                detail = _head(mask_secret_text(_readable(str(value).strip())))
                break
        stderr = mask_secret_text(str(res.get("stderr") or "").strip())
        if res.get("msg") and "rc" in res and stderr and stderr not in detail:
            # a command's msg says only "non-zero return code": its reason is in stderr
            detail += ": " + _tail(stderr, MAX_DETAIL)
    return f"{task}: {detail or 'failed'}"


def task_result(kind: str, data: Mapping[str, Any]) -> TaskResult:
    """What a task result's event (one of RESULT_EVENTS) tells for the per-task metrics."""
    result = kind[len("runner_on_") :]
    if result == "ok" and (data.get("res") or {}).get("changed"):
        result = "changed"
    elif result == "failed" and data.get("ignore_errors"):
        result = "ignored"
    seconds = data.get("duration")
    return TaskResult(
        role=task_role(data),
        task=str(data.get("task") or ""),
        path=str(data.get("task_path") or ""),
        action=str(data.get("task_action") or ""),
        result=result,
        seconds=float(seconds) if isinstance(seconds, (int, float)) else 0.0,
    )


def summarize(events: Iterable[Mapping[str, Any]]) -> RunSummary:
    summary = RunSummary()
    for event in events:
        apply_event(summary, event)
    return summary


def apply_event(summary: RunSummary, event: Mapping[str, Any]) -> None:
    """Fold one job event into `summary` (events arrive one at a time while a run goes)."""
    kind = event.get("event")
    data = event.get("event_data") or {}
    if kind in TASK_EVENTS:
        summary.tasks += 1
        if kind in RESULT_EVENTS:
            summary.task_results.append(task_result(kind, data))
    if kind == "playbook_on_stats":
        summary.stats = data
        summary.stats_created = str(event.get("created") or "")
        if summary.failed_hosts() == 0:
            summary.failures.clear()  # every failure was rescued or ignored
    elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
        summary.failures.append(failure_message(data, str(event.get("stdout") or "")))
    elif kind == "runner_on_ok" and ADMISSION_ACTIONS & {
        data.get("task_action"),
        data.get("resolved_action"),
    }:
        res = data.get("res") or {}
        for item in [res, *(res.get("results") or [])]:  # a loop: one answer per item
            if isinstance(item, Mapping) and isinstance(item.get("admission"), Mapping):
                summary.answers.append(item["admission"])
    elif kind == "runner_on_ok" and data.get("task_action") in REQUEUE_ACTIONS:
        period = (data.get("res") or {}).get("period")
        if isinstance(period, (int, float)):
            summary.requeue_after = float(period)
        elif isinstance(period, str):
            summary.requeue_after = parse_period(period, "requeue_after period")
