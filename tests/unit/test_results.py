from __future__ import annotations

import json
from typing import Any

import pytest

from runner.ansible.results import (
    HIDDEN_ERROR,
    MAX_DETAIL,
    MAX_TASK_NAME,
    hide_no_log_errors,
    summarize,
)
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


def test_failure_messages_say_where_the_task_is_written() -> None:
    """The role and file:line (from the role's folder on), as `kubectl describe` shows them."""
    event = failed("Create the pod", msg="quota")
    path = "/opt/ansible/roles/web/tasks/pod.yml:12"
    event["event_data"].update(role="/opt/ansible/roles/web", task_path=path)  # a role's path
    collection = failed("Expose", msg="forbidden")
    path = "/c/ansible_collections/my/coll/roles/web/tasks/main.yml:3"
    collection["event_data"].update(resolved_role="my.coll.web", role="web", task_path=path)
    playbook = failed("Play on", msg="no")
    playbook["event_data"].update(task_path="/opt/ansible/playbooks/site.yml:4")
    long = failed("x" * 500, msg="why")
    s = summarize([event, collection, playbook, long, stats(failures=1)])
    assert s.failures[:3] == [
        "Create the pod (role web, tasks/pod.yml:12): quota",
        "Expose (role my.coll.web, tasks/main.yml:3): forbidden",
        "Play on (site.yml:4): no",
    ]
    assert s.failures[3].endswith("…: why") and len(s.failures[3]) == MAX_TASK_NAME + len(": why")


def test_a_loop_failure_says_why_its_items_failed() -> None:
    items = [
        {"msg": "odd: an odd size", "failed": True, "item": {"name": "odd"}},
        {"changed": False, "item": {"name": "even"}},
        {"msg": "seven: too big", "failed": True},
    ]
    event = failed("Refuse odd sizes", msg="One or more items failed", results=items)
    assert summarize([event, stats(failures=1)]).failures == [
        "Refuse odd sizes: odd: an odd size; seven: too big"
    ]
    own = failed("custom", msg="the task's own message", results=items)
    assert summarize([own, stats(failures=1)]).failures == ["custom: the task's own message"]


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


def test_a_commands_failure_names_its_stderr() -> None:
    s = summarize(
        [
            failed("run it", msg="non-zero return code", rc=3, stderr="no such file\n", stdout=""),
            stats(failures=1),
        ]
    )
    assert s.failures == ["run it: non-zero return code: no such file"]


def test_a_huge_msg_is_bounded_with_an_ellipsis() -> None:
    s = summarize([failed("t", msg="the reason " + "x" * 100_000), stats(failures=1)])
    (message,) = s.failures
    assert message.startswith("t: the reason xxx") and message.endswith("…")
    assert len(message) <= MAX_DETAIL + len("t: ")


def test_a_huge_stderr_keeps_its_end() -> None:
    stderr = "y" * 100_000 + "\nthe known reason"
    s = summarize([failed("t", msg="non-zero return code", rc=1, stderr=stderr), stats(failures=1)])
    (message,) = s.failures
    assert message.startswith("t: non-zero return code: …y")
    assert message.endswith("the known reason")
    assert len(message) < 2 * MAX_DETAIL


def _dropped(task: str, stdout: str) -> dict[str, Any]:
    """A failed task whose `res` ansible-runner dropped (larger than MAX_EVENT_RES)."""
    return {"event": "runner_on_failed", "stdout": stdout, "event_data": {"task": task, "res": {}}}


def test_a_result_too_large_for_the_event_is_read_from_what_ansible_printed() -> None:
    res = {
        "changed": True,
        "rc": 3,
        "msg": "non-zero return code",
        "stdout": "x" * 1_000_000,
        "stderr": "the known reason",
    }
    stdout = (
        "[ERROR]: Task failed: Module failed: non-zero return code\r\nOrigin: main.yml:1:3\r\n\r\n"
        f"fatal: [localhost]: FAILED! => {json.dumps(res)}"
    )
    s = summarize([_dropped("Print a lot", stdout), stats(failures=1)])
    assert s.failures == ["Print a lot: non-zero return code: the known reason"]


def test_a_displayed_result_that_is_cut_still_gives_its_msg() -> None:
    stdout = 'fatal: [localhost]: FAILED! => {"msg": "the \\"known\\" reason", "stdout": "xxx'
    s = summarize([_dropped("t", stdout), stats(failures=1)])
    assert s.failures == ['t: the "known" reason']


def test_without_a_displayed_result_ansibles_error_line_is_the_reason() -> None:
    stdout = "[ERROR]: Task failed: Module failed: non-zero return code\r\nOrigin: x\r\n"
    s = summarize([_dropped("t", stdout), stats(failures=1)])
    assert s.failures == ["t: Task failed: Module failed: non-zero return code"]


def test_admission_answers_are_collected_in_order() -> None:
    from runner.ansible.results import RunSummary, apply_event

    summary = RunSummary()
    for data in (
        {"task_action": "operator_sdk.util.admission", "res": {"admission": {"allowed": True}}},
        {"task_action": "debug", "res": {"admission": {"allowed": False}}},  # not the module
        {
            "task_action": "admission",
            "resolved_action": "operator_sdk.util.admission",
            "res": {"results": [{"admission": {"warnings": ["a"]}}, {"skipped": True}]},
        },
    ):
        apply_event(summary, {"event": "runner_on_ok", "event_data": data})
    assert summary.answers == [{"allowed": True}, {"warnings": ["a"]}]


# ansible-core 2.21's output of a no_log task that fails, then of a task that fails in the open
NO_LOG_OUTPUT = """TASK [leaky : Log in without a trace] ***
task path: /roles/leaky/tasks/main.yml:33
[ERROR]: Task failed: Action failed: cannot log in with HIDDEN533A380384AC
Origin: /roles/leaky/tasks/main.yml:33:7

33     - name: Log in without a trace
         ^ column 7

fatal: [localhost]: FAILED! => {
    "censored": "the output has been hidden due to the fact that 'no_log: true' was spec..."
    "changed": false
}

TASK [leaky : Use the password] *****
[ERROR]: Task failed: Action failed: bad password for token
Origin: /roles/leaky/tasks/main.yml:42:3

fatal: [localhost]: FAILED! => {
    "changed": false,
    "msg": "bad password for token"
}
"""


def test_a_no_log_tasks_error_message_is_hidden_from_the_output() -> None:
    shown = hide_no_log_errors(NO_LOG_OUTPUT)
    assert "HIDDEN533A380384AC" not in shown
    assert "[ERROR]: Task failed: its output is hidden (no_log)\nOrigin: " in shown
    assert '"censored": "the output has been hidden' in shown
    # the task in the open keeps its message, and nothing else changes
    assert "[ERROR]: Task failed: Action failed: bad password for token\n" in shown
    assert shown.replace(HIDDEN_ERROR, "") == NO_LOG_OUTPUT.replace(
        "[ERROR]: Task failed: Action failed: cannot log in with HIDDEN533A380384AC\n", ""
    )


def test_output_without_a_censored_result_is_unchanged() -> None:
    text = NO_LOG_OUTPUT.split("TASK [leaky : Use the password]")[1]
    assert hide_no_log_errors(text) == text
