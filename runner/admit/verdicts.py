"""What a run's result says to the API server (pure): the role's answers
(`operator_sdk.util.admission`), a failed task, or a run that gave no answer at all.

- a task failed: denied, with the failures' messages (`<task> (role <role>, <file>:<line>):
  <message>`), as the Failure condition of a reconcile says them;
- answers: denied when any says `allowed: false` (their messages joined), warnings added up,
  for `mutate` the last `object` turned into a JSON Patch from the request's object;
- no answer: allowed, unchanged;
- no result (the run ended without its final stats: a syntax error, a crash): None, answered
  by the caller per the webhook's failurePolicy.
"""

from __future__ import annotations

from typing import Any

from runner.admit.jsonpatch import diff
from runner.admit.review import AdmissionRequest, Verdict
from runner.ansible.interface import RunResult

MAX_MESSAGE = 1000  # characters of a denial's message (kubectl prints all of it)


def _bounded(text: str) -> str:
    return text if len(text) <= MAX_MESSAGE else text[: MAX_MESSAGE - 1] + "…"


def verdict(result: RunResult, request: AdmissionRequest, mutate: bool) -> Verdict | None:
    summary = result.summary
    if not summary.finished:
        return None
    warnings: list[str] = []
    denials: list[str] = []
    changed: dict[str, Any] | None = None
    for answer in summary.answers:
        warnings += [str(w) for w in answer.get("warnings") or []]
        if answer.get("allowed") is False:
            denials.append(str(answer.get("message") or "denied"))
        obj = answer.get("object")
        if isinstance(obj, dict):
            changed = obj
    if summary.failures:
        return Verdict(False, _bounded("; ".join(summary.failures)), tuple(warnings))
    if denials:
        return Verdict(False, _bounded("; ".join(denials)), tuple(warnings))
    patch: list[dict[str, Any]] = []
    if mutate and changed is not None and request.object is not None:
        patch = diff(request.object, changed)
    return Verdict(True, warnings=tuple(warnings), patch=tuple(patch))
