"""What a run of Ansible amounted to, read from ansible-runner's job events (pure).

ansible-runner emits one event per callback of the playbook (`runner_on_ok`, `runner_on_failed`,
..., and a final `playbook_on_stats`). operator-sdk reads the same events: the failing tasks'
messages go into the `Failure` condition, the stats into `ansibleResult`, and a task of the
`requeue_after` module asks for the next run after its `period`.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from runner.util.durations import parse_period

REQUEUE_ACTIONS = frozenset(
    {"requeue_after", "operator_sdk.util.requeue_after", "runner.requeue_after"}
)
TASK_EVENTS = frozenset(
    {
        "runner_on_ok",
        "runner_on_failed",
        "runner_on_skipped",
        "runner_on_unreachable",
        "runner_item_on_failed",
    }
)


@dataclass
class RunSummary:
    """What the events of one run say."""

    stats: Mapping[str, Any] | None = None  # event_data of playbook_on_stats
    stats_created: str = ""
    failures: list[str] = field(default_factory=list)
    requeue_after: float | None = None
    tasks: int = 0

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


def failure_message(event_data: Mapping[str, Any]) -> str:
    """`<task>: <what went wrong>` for a failed task, as terse as Ansible's own output."""
    task = str(event_data.get("task") or event_data.get("task_action") or "task")
    res = event_data.get("res") or {}
    detail = ""
    if isinstance(res, Mapping):
        for key in ("msg", "stderr", "module_stderr", "exception"):
            value = res.get(key)
            if value:
                detail = str(value).strip()
                break
        if not detail and res.get("results"):
            items = [r for r in res["results"] if isinstance(r, Mapping) and r.get("failed")]
            detail = "; ".join(str(r.get("msg", "failed")) for r in items)
    return f"{task}: {_readable(detail) or 'failed'}"


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
    if kind == "playbook_on_stats":
        summary.stats = data
        summary.stats_created = str(event.get("created") or "")
        if summary.failed_hosts() == 0:
            summary.failures.clear()  # every failure was rescued or ignored
    elif kind in ("runner_on_failed", "runner_on_unreachable") and not data.get("ignore_errors"):
        summary.failures.append(failure_message(data))
    elif kind == "runner_on_ok" and data.get("task_action") in REQUEUE_ACTIONS:
        period = (data.get("res") or {}).get("period")
        if isinstance(period, (int, float)):
            summary.requeue_after = float(period)
        elif isinstance(period, str):
            summary.requeue_after = parse_period(period, "requeue_after period")
