from __future__ import annotations

from typing import Any

import pytest

from runner.ansible.results import summarize
from runner.util.durations import parse_period


def stats(failures: int = 0, ok: int = 2) -> dict[str, Any]:
    data = {"ok": {"localhost": ok}, "changed": {}, "failures": {}, "dark": {}}
    if failures:
        data["failures"] = {"localhost": failures}
    return {"event": "playbook_on_stats", "created": "2026-12-02T10:00:00.1", "event_data": data}


def failed(task: str, **res: Any) -> dict[str, Any]:
    return {"event": "runner_on_failed", "event_data": {"task": task, "res": res}}


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("30s", 30),
        ("1m30s", 90),
        ("1h", 3600),
        ("500ms", 0.5),
        ("0", 0),
        ("0s", 0),
        ("1.5h", 5400),
        ("2h45m", 9900),
    ],
)
def test_go_durations(text: str, seconds: float) -> None:
    assert parse_period(text, "x") == pytest.approx(seconds)


@pytest.mark.parametrize("text", ["", "abc", "10", "5 m", "1x", "m5", "-5s"])
def test_bad_durations(text: str) -> None:
    with pytest.raises(ValueError):
        parse_period(text, "x")


def test_success_has_stats_and_no_failures() -> None:
    s = summarize([{"event": "runner_on_ok", "event_data": {"task": "t"}}, stats()])
    assert s.finished and not s.failures and s.tasks == 1


def test_failure_messages_name_the_task() -> None:
    s = summarize([failed("create pod", msg="Forbidden"), stats(failures=1)])
    assert s.failures == ["create pod: Forbidden"]


def test_ignored_failures_are_not_failures() -> None:
    event = failed("optional", msg="nope")
    event["event_data"]["ignore_errors"] = True
    assert summarize([event, stats()]).failures == []


def test_rescued_failures_are_dropped_when_stats_say_no_failure() -> None:
    assert summarize([failed("t", msg="boom"), stats(failures=0)]).failures == []


def test_run_without_stats_is_not_finished() -> None:
    s = summarize([failed("t", msg="boom")])
    assert not s.finished and s.failures


@pytest.mark.parametrize("action", ["requeue_after", "operator_sdk.util.requeue_after"])
def test_requeue_after(action: str) -> None:
    event = {
        "event": "runner_on_ok",
        "event_data": {"task_action": action, "res": {"period": "1m30s"}},
    }
    assert summarize([event, stats()]).requeue_after == 90


def test_stderr_when_no_msg() -> None:
    s = summarize([failed("shell", stderr="exit 3\n"), stats(failures=1)])
    assert s.failures == ["shell: exit 3"]


def test_api_errors_quoted_by_kubernetes_core_become_the_servers_message() -> None:
    raw = (
        'Failed to create object: b\'{"kind":"Status","apiVersion":"v1","metadata":{},'
        '"status":"Failure","message":"services is forbidden: User \\\\"system:'
        'serviceaccount:x:y\\\\" cannot create resource \\\\"services\\\\" in API group '
        '\\\\"\\\\" in the namespace \\\\"ns\\\\"","reason":"Forbidden","code":403}\\n\''
    )
    s = summarize([failed("Expose the app", msg=raw), stats(failures=1)])
    assert s.failures == [
        "Expose the app: Failed to create object: services is forbidden: User "
        '"system:serviceaccount:x:y" cannot create resource "services" in API group "" '
        'in the namespace "ns"'
    ]


def test_messages_without_api_errors_are_kept() -> None:
    s = summarize([failed("t", msg="b'not json' at all"), stats(failures=1)])
    assert s.failures == ["t: b'not json' at all"]
