"""The operator's log line for each task result (--ansible-log-events).

A run on the warm executor may be made again on the plain path (a patch failed in it): its
failed tasks' warnings are kept by its attempt (warm/attempt.py) until the executor knows; a
run made again says them at debug level, as what they were, so the operator's one warning is
the warm executor's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping
from typing import Any

from runner.ansible.interface import LogEvents, RunRequest

log = logging.getLogger("runner.executor")

_TASK_OUTCOMES = {
    "runner_on_ok": "ok",
    "runner_on_failed": "failed",
    "runner_on_skipped": "skipped",
    "runner_on_unreachable": "unreachable",
}


def log_task_event(
    event: Mapping[str, Any],
    request: RunRequest,
    keep: Callable[[str, Mapping[str, Any]], bool] | None = None,
) -> None:
    """One log line per task result (Tasks), or per job event (Everything): the event's kind
    and its task's name (which a template may have filled with a secret: masked), never its
    result. A warning goes to `keep` first (a warm attempt's `keep`: True when it is kept)."""
    mode, extra, redact = request.log_events, request.log_extra, request.secrets.redact
    if mode is LogEvents.NOTHING:
        return
    kind = str(event.get("event", ""))
    data = event.get("event_data") or {}
    outcome = _TASK_OUTCOMES.get(kind)
    fields = {**extra, "ansible_event": kind}
    if outcome is None:
        if mode is LogEvents.EVERYTHING:
            name = str(data.get("task") or data.get("playbook") or "")
            log.info("%s %s", kind, redact(name), extra=fields)
        return
    task = redact(str(data.get("task", "")))
    if outcome == "failed" and data.get("ignore_errors"):
        outcome = "failed (ignored)"
    elif outcome == "ok" and (data.get("res") or {}).get("changed"):
        outcome = "changed"
    level = logging.WARNING if outcome in ("failed", "unreachable") else logging.INFO
    if outcome in ("ok", "skipped") and mode is LogEvents.TASKS:
        # A periodic resync of a healthy CR is all ok/skipped: at info, an idle operator with a
        # few CRs logged ~45 lines a minute. What changed or failed stays at info.
        level = logging.DEBUG
    if level == logging.WARNING and keep is not None and keep(f"task {outcome}: {task}", fields):
        return
    log.log(level, "task %s: %s", outcome, task, extra=fields)
