"""Tests of runner.reconcile.conditions: status conditions of a custom resource."""

from __future__ import annotations

import copy
from collections.abc import Callable, Iterator, Mapping
from datetime import UTC, datetime, timedelta, timezone
from types import MappingProxyType
from typing import Any

import pytest

from runner.reconcile import conditionlist as cl
from runner.reconcile import conditions as c
from runner.reconcile.ansible_result import AnsibleResult

T0 = datetime(2026, 12, 2, 12, 0, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
T2 = T0 + timedelta(minutes=2)
T3 = T0 + timedelta(minutes=3)
S0, S1, S2, S3 = (cl.format_time(t) for t in (T0, T1, T2, T3))

RESULT = AnsibleResult(ok=3, changed=1, skipped=2, failures=0, completion="2026-12-02T12:00:30")
FAILED_RESULT = AnsibleResult(ok=1, failures=1, completion="2026-12-02T12:00:40")


def cond(status: Mapping[str, Any], ctype: str) -> dict[str, Any]:
    """Return the condition of ``ctype`` in ``status``, failing the test if there is none."""
    found = cl.find_condition(status, ctype)
    assert found is not None, f"no {ctype} condition in {status}"
    return found


def types(status: Mapping[str, Any]) -> list[str]:
    """Return the condition types of ``status`` in order."""
    return [entry["type"] for entry in status["conditions"]]


def stats_event(**event_data: Any) -> dict[str, Any]:
    """Return a playbook_on_stats event shaped like ansible-runner's."""
    data = {
        "playbook": "main.yml",
        "changed": {},
        "dark": {},
        "failures": {},
        "ignored": {},
        "ok": {},
        "processed": {"localhost": 1},
        "rescued": {},
        "skipped": {},
        "artifact_data": {},
    }
    data.update(event_data)
    return {
        "uuid": "5e1e3b1f",
        "counter": 42,
        "event": "playbook_on_stats",
        "event_data": data,
        "created": "2026-12-02T12:00:30.123456+00:00",
    }


# ------------------------------------------------------------------------------ AnsibleResult


def test_result_from_full_stats_event() -> None:
    event = stats_event(
        ok={"localhost": 5}, changed={"localhost": 2}, skipped={"localhost": 1}, failures={}
    )
    result = AnsibleResult.from_stats_event(event)
    assert result == AnsibleResult(
        ok=5, changed=2, skipped=1, failures=0, completion="2026-12-02T12:00:30.123456+00:00"
    )


def test_result_from_bare_event_data_takes_created_keyword() -> None:
    data = stats_event(ok={"localhost": 1})["event_data"]
    result = AnsibleResult.from_stats_event(data, created="2026-12-02T12:00:31")
    assert (result.ok, result.completion) == (1, "2026-12-02T12:00:31")
    assert AnsibleResult.from_stats_event(data).completion is None


def test_result_counts_unreachable_as_failures() -> None:
    event = stats_event(failures={"localhost": 1}, dark={"localhost": 2})
    result = AnsibleResult.from_stats_event(event)
    assert (result.failures, result.unreachable) == (3, 2)


def test_result_keeps_rescued_and_ignored_apart() -> None:
    event = stats_event(rescued={"localhost": 1}, ignored={"localhost": 4})
    result = AnsibleResult.from_stats_event(event)
    assert (result.rescued, result.ignored, result.failures) == (1, 4, 0)


def test_result_reads_only_the_requested_host() -> None:
    event = stats_event(ok={"localhost": 1, "db": 7}, failures={"db": 1})
    assert AnsibleResult.from_stats_event(event).ok == 1
    assert AnsibleResult.from_stats_event(event).failures == 0
    assert AnsibleResult.from_stats_event(event, host="db").ok == 7
    assert AnsibleResult.from_stats_event(event, host="db").failures == 1


def test_result_host_none_sums_all_hosts() -> None:
    event = stats_event(ok={"localhost": 1, "db": 7}, dark={"web": 1})
    result = AnsibleResult.from_stats_event(event, host=None)
    assert (result.ok, result.failures) == (8, 1)


def test_result_ignores_garbage_counts() -> None:
    # Old ansible versions send ignored/rescued as plain 0 instead of a dict.
    event = stats_event(
        ok={"localhost": "3"}, changed={"localhost": True}, skipped={"localhost": -1}
    )
    event["event_data"]["ignored"] = 0
    event["event_data"]["rescued"] = None
    assert AnsibleResult.from_stats_event(event) == AnsibleResult(
        completion="2026-12-02T12:00:30.123456+00:00"
    )


def test_result_to_dict_has_operator_sdk_keys() -> None:
    assert RESULT.to_dict() == {
        "ok": 3,
        "changed": 1,
        "skipped": 2,
        "failures": 0,
        "completion": "2026-12-02T12:00:30",
    }
    assert AnsibleResult(ok=1).to_dict() == {"ok": 1, "changed": 0, "skipped": 0, "failures": 0}


# ------------------------------------------------------------------------------ helpers


def test_format_time_is_rfc3339_utc() -> None:
    assert cl.format_time(T0) == "2026-12-02T12:00:00Z"
    plus_two = timezone(timedelta(hours=2))
    assert cl.format_time(datetime(2026, 12, 2, 14, 0, 0, 999, tzinfo=plus_two)) == S0
    assert cl.format_time(datetime(2026, 12, 2, 12, 0, 0)) == S0  # naive counts as UTC


def test_find_condition_tolerates_missing_status() -> None:
    assert cl.find_condition(None, "Running") is None
    assert cl.find_condition({}, "Running") is None
    assert cl.find_condition({"conditions": None}, "Running") is None


def test_find_condition_returns_a_copy() -> None:
    status = c.running(None, generation=1, now=T0)
    found = cond(status, "Running")
    found["status"] = "False"
    assert cond(status, "Running")["status"] == "True"


def test_set_condition_appends_new_type() -> None:
    new = {"type": "Ready", "status": "True", "reason": "Ok", "message": ""}
    result = cl.set_condition([], new, T0)
    assert result == [{**new, "lastTransitionTime": S0}]


def test_set_condition_keeps_time_when_status_unchanged() -> None:
    old = {"type": "Ready", "status": "True", "reason": "A", "lastTransitionTime": S0}
    new = {"type": "Ready", "status": "True", "reason": "B", "lastTransitionTime": S2}
    assert cl.set_condition([old], new, T1) == [{**new, "lastTransitionTime": S0}]


def test_set_condition_sets_time_when_status_changes() -> None:
    old = {"type": "Ready", "status": "True", "reason": "A", "lastTransitionTime": S0}
    new = {"type": "Ready", "status": "False", "reason": "A"}
    assert cl.set_condition([old], new, T1)[0]["lastTransitionTime"] == S1


@pytest.mark.parametrize("bad_time", [None, "", "yesterday", 12, "2026-13-02T12:00:00Z"])
def test_set_condition_replaces_invalid_old_time(bad_time: object) -> None:
    old = {"type": "Ready", "status": "True", "reason": "A", "lastTransitionTime": bad_time}
    new = {"type": "Ready", "status": "True", "reason": "A"}
    assert cl.set_condition([old], new, T1)[0]["lastTransitionTime"] == S1


def test_set_condition_keeps_position_and_does_not_mutate() -> None:
    conditions = [
        {"type": "A", "status": "True", "lastTransitionTime": S0},
        {"type": "B", "status": "True", "lastTransitionTime": S0},
        {"type": "C", "status": "True", "lastTransitionTime": S0},
    ]
    before = copy.deepcopy(conditions)
    result = cl.set_condition(conditions, {"type": "B", "status": "False"}, T1)
    assert [x["type"] for x in result] == ["A", "B", "C"]
    assert result[1] == {"type": "B", "status": "False", "lastTransitionTime": S1}
    assert conditions == before


def test_status_changed() -> None:
    status = c.succeeded(None, generation=1, now=T0, result=RESULT)
    assert not cl.status_changed(status, copy.deepcopy(status))
    assert not cl.status_changed(None, {})
    assert cl.status_changed(None, status)
    changed = copy.deepcopy(status)
    changed["conditions"][0]["lastTransitionTime"] = S1
    assert cl.status_changed(status, changed)
    assert cl.status_changed(status, {**status, "phase": "Ready"})


def test_status_changed_compares_mapping_views_by_content() -> None:
    status = c.running({"phase": "x"}, generation=1, now=T0)
    view = MappingProxyType({"phase": "x", "conditions": status["conditions"]})
    assert not cl.status_changed(view, status)


# ------------------------------------------------------------------------------ running


def test_running_from_nothing() -> None:
    status = c.running(None, generation=3, now=T0)
    assert status == {
        "conditions": [
            {
                "type": "Running",
                "status": "True",
                "reason": "Running",
                "message": "Running reconciliation",
                "observedGeneration": 3,
                "lastTransitionTime": S0,
            },
            {
                "type": "Ready",
                "status": "False",
                "reason": "Reconciling",
                "message": "Reconciling generation 3",
                "observedGeneration": 3,
                "lastTransitionTime": S0,
            },
        ]
    }


def test_ready_follows_the_generation() -> None:
    """Ready is True only once the current generation's run succeeded (kstatus)."""
    done = c.succeeded(c.running(None, generation=1, now=T0), generation=1, now=T1, result=RESULT)
    assert cond(done, "Ready") == {
        "type": "Ready",
        "status": "True",
        "reason": "Successful",
        "message": "Last reconciliation of generation 1 succeeded",
        "observedGeneration": 1,
        "lastTransitionTime": S1,
    }
    resync = c.running(done, generation=1, now=T2)  # same generation: stays Ready
    assert cond(resync, "Ready") == cond(done, "Ready")
    new = c.running(done, generation=2, now=T2)  # a new spec: not Ready until it converged
    assert (cond(new, "Ready")["status"], cond(new, "Ready")["reason"]) == ("False", "Reconciling")
    assert cond(new, "Ready")["observedGeneration"] == 2
    assert cond(new, "Ready")["lastTransitionTime"] == S2
    failed = c.failed(new, generation=2, now=T2, messages=["boom"], result=None)
    assert (cond(failed, "Ready")["status"], cond(failed, "Ready")["reason"]) == ("False", "Failed")
    assert cond(failed, "Ready")["message"] == "Last reconciliation of generation 2 failed"
    again = c.running(failed, generation=2, now=T2)
    again = c.succeeded(again, generation=2, now=T2, result=RESULT)
    assert cond(again, "Ready")["status"] == "True"
    assert cond(again, "Ready")["observedGeneration"] == 2
    errored = c.errored(again, generation=3, now=T2, message="bad annotation")
    assert (cond(errored, "Ready")["status"], cond(errored, "Ready")["reason"]) == (
        "False",
        "Failed",
    )


def test_running_keeps_last_success() -> None:
    done = c.succeeded(c.running(None, generation=1, now=T0), generation=1, now=T1, result=RESULT)
    status = c.running(done, generation=2, now=T2)
    assert cond(status, "Running") == {
        "type": "Running",
        "status": "True",
        "reason": "Running",
        "message": "Running reconciliation",
        "observedGeneration": 2,
        "lastTransitionTime": S0,  # True since the first run started
    }
    assert cond(status, "Successful") == cond(done, "Successful")
    assert cond(status, "Failure") == cond(done, "Failure")
    assert cond(status, "Successful")["observedGeneration"] == 1


def test_running_keeps_last_failure() -> None:
    done = c.failed(None, generation=1, now=T1, messages=["boom"], result=FAILED_RESULT)
    status = c.running(done, generation=1, now=T2)
    assert cond(status, "Running")["status"] == "True"
    assert cond(status, "Running")["lastTransitionTime"] == S2
    assert cond(status, "Failure") == cond(done, "Failure")
    assert cond(status, "Successful") == cond(done, "Successful")


def test_running_twice_is_a_no_op() -> None:
    first = c.running({"phase": "x"}, generation=1, now=T0)
    second = c.running(first, generation=1, now=T1)
    assert not cl.status_changed(first, second)


def test_running_records_new_generation_but_keeps_time() -> None:
    first = c.running(None, generation=1, now=T0)
    second = c.running(first, generation=2, now=T1)
    assert cond(second, "Running")["observedGeneration"] == 2
    assert cond(second, "Running")["lastTransitionTime"] == S0


# ------------------------------------------------------------------------------ succeeded


def test_succeeded_conditions() -> None:
    status = c.succeeded(c.running(None, generation=4, now=T0), generation=4, now=T1, result=RESULT)
    assert types(status) == ["Running", "Ready", "Successful", "Failure"]
    # operator-sdk's: Running stays True, reason Successful (users' waits rely on it)
    assert cond(status, "Running") == {
        "type": "Running",
        "status": "True",
        "reason": "Successful",
        "message": "Awaiting next reconciliation",
        "observedGeneration": 4,
        "lastTransitionTime": S0,  # True since the run started
        "ansibleResult": RESULT.to_dict(),
    }
    assert cond(status, "Successful") == {
        "type": "Successful",
        "status": "True",
        "reason": "Successful",
        "message": "Last reconciliation succeeded",
        "observedGeneration": 4,
        "lastTransitionTime": S1,
        "ansibleResult": RESULT.to_dict(),
    }
    assert cond(status, "Failure") == {
        "type": "Failure",
        "status": "False",
        "reason": "Successful",
        "message": "",
        "observedGeneration": 4,
        "lastTransitionTime": S1,
    }


def test_succeeded_again_keeps_transition_times() -> None:
    first = c.succeeded(None, generation=1, now=T0, result=RESULT)
    again = c.succeeded(c.running(first, generation=2, now=T1), generation=2, now=T2, result=RESULT)
    assert cond(again, "Running")["lastTransitionTime"] == S0  # True all along
    assert cond(again, "Successful")["lastTransitionTime"] == S0
    assert cond(again, "Failure")["lastTransitionTime"] == S0
    assert cond(again, "Successful")["observedGeneration"] == 2


def test_succeeded_after_failure_changes_transition_times() -> None:
    failed = c.failed(None, generation=1, now=T0, messages=["boom"], result=None)
    status = c.succeeded(failed, generation=1, now=T1, result=RESULT)
    assert cond(status, "Successful")["lastTransitionTime"] == S1
    assert cond(status, "Failure")["lastTransitionTime"] == S1
    assert cond(status, "Running")["lastTransitionTime"] == S1  # False -> True
    assert "ansibleResult" not in cond(status, "Failure")


# ------------------------------------------------------------------------------ failed / errored


def test_failed_conditions() -> None:
    status = c.failed(
        c.running(None, generation=2, now=T0),
        generation=2,
        now=T1,
        messages=["task A failed", "task B failed"],
        result=FAILED_RESULT,
    )
    assert types(status) == ["Running", "Ready", "Successful", "Failure"]
    assert cond(status, "Failure") == {
        "type": "Failure",
        "status": "True",
        "reason": "Failed",
        "message": "task A failed\ntask B failed",
        "observedGeneration": 2,
        "lastTransitionTime": S1,
        "ansibleResult": FAILED_RESULT.to_dict(),
    }
    assert cond(status, "Successful") == {
        "type": "Successful",
        "status": "False",
        "reason": "Failed",
        "message": "Last reconciliation failed",
        "observedGeneration": 2,
        "lastTransitionTime": S1,
    }
    assert cond(status, "Running") == {
        "type": "Running",
        "status": "False",
        "reason": "Failed",
        "message": "Awaiting next reconciliation",
        "observedGeneration": 2,
        "lastTransitionTime": S1,
    }


@pytest.mark.parametrize("messages", [[], [""], ["  ", "\n"]])
def test_failed_without_messages_explains(messages: list[str]) -> None:
    status = c.failed(None, generation=1, now=T0, messages=messages, result=None)
    assert cond(status, "Failure")["message"] == c.MESSAGE_NO_FAILURE_DETAILS
    assert "ansibleResult" not in cond(status, "Failure")


def test_failed_drops_blank_messages() -> None:
    status = c.failed(None, generation=1, now=T0, messages=["a", " ", "b"], result=None)
    assert cond(status, "Failure")["message"] == "a\nb"


def test_failed_truncates_huge_messages() -> None:
    status = c.failed(None, generation=1, now=T0, messages=["x" * 40000, "tail"], result=None)
    message = cond(status, "Failure")["message"]
    assert len(message) == c.MAX_MESSAGE_LENGTH
    assert message.startswith("xxx")
    assert message.endswith("(truncated)")


def test_failed_again_keeps_time_but_updates_message() -> None:
    first = c.failed(None, generation=1, now=T0, messages=["one"], result=None)
    second = c.failed(first, generation=1, now=T1, messages=["two"], result=None)
    assert cond(second, "Failure")["message"] == "two"
    assert cond(second, "Failure")["lastTransitionTime"] == S0


def test_failed_after_success_changes_transition_times() -> None:
    done = c.succeeded(None, generation=1, now=T0, result=RESULT)
    status = c.failed(
        c.running(done, generation=1, now=T1), generation=1, now=T2, messages=["x"], result=None
    )
    assert cond(status, "Failure")["lastTransitionTime"] == S2
    assert cond(status, "Successful")["lastTransitionTime"] == S2
    assert "ansibleResult" not in cond(status, "Successful")


def test_errored_conditions() -> None:
    status = c.errored(None, generation=5, now=T0, message="bad annotation")
    assert cond(status, "Failure") == {
        "type": "Failure",
        "status": "True",
        "reason": "Failed",
        "message": "bad annotation",
        "observedGeneration": 5,
        "lastTransitionTime": S0,
    }
    assert (cond(status, "Successful")["status"], cond(status, "Successful")["reason"]) == (
        "False",
        "Failed",
    )
    assert (cond(status, "Running")["status"], cond(status, "Running")["reason"]) == (
        "False",
        "Failed",
    )
    assert all("ansibleResult" not in x for x in status["conditions"])


def test_errored_drops_previous_result() -> None:
    done = c.succeeded(None, generation=1, now=T0, result=RESULT)
    status = c.errored(done, generation=2, now=T1, message="runner did not start")
    assert all("ansibleResult" not in x for x in status["conditions"])


def test_errored_with_empty_message_explains() -> None:
    status = c.errored(None, generation=1, now=T0, message="")
    assert cond(status, "Failure")["message"] == c.MESSAGE_NO_FAILURE_DETAILS


# ------------------------------------------------------------------------------ all transitions

Transition = Callable[[Mapping[str, Any] | None, int, datetime], dict[str, Any]]

TRANSITIONS: dict[str, Transition] = {
    "running": lambda s, g, t: c.running(s, generation=g, now=t),
    "succeeded": lambda s, g, t: c.succeeded(s, generation=g, now=t, result=RESULT),
    "failed": lambda s, g, t: c.failed(s, generation=g, now=t, messages=["m"], result=None),
    "errored": lambda s, g, t: c.errored(s, generation=g, now=t, message="e"),
}


@pytest.mark.parametrize("name", TRANSITIONS)
def test_transition_keeps_role_keys_and_does_not_mutate(name: str) -> None:
    status = {"nodes": ["a", "b"], "phase": "Ready", "deep": {"x": [1, {"y": 2}]}}
    before = copy.deepcopy(status)
    result = TRANSITIONS[name](status, 1, T0)
    assert {k: v for k, v in result.items() if k != "conditions"} == before
    assert status == before
    result["deep"]["x"][1]["y"] = 3
    assert status == before


@pytest.mark.parametrize("name", TRANSITIONS)
def test_transition_drops_garbage_and_keeps_foreign_conditions(name: str) -> None:
    foreign = {"type": "Available", "status": "True", "reason": "X", "lastTransitionTime": S0}
    status = {
        "conditions": [
            "garbage",
            None,
            {"status": "True"},
            {"type": 7, "status": "True"},
            foreign,
            {"type": "Running", "status": "Maybe", "reason": "X"},
            {"type": "Available", "status": "False", "reason": "Duplicate"},
        ]
    }
    result = TRANSITIONS[name](status, 1, T0)
    assert result["conditions"][0] == foreign
    assert types(result)[1] == "Running"
    assert types(result).count("Available") == 1
    assert all(isinstance(x, dict) and isinstance(x["type"], str) for x in result["conditions"])


@pytest.mark.parametrize("name", TRANSITIONS)
@pytest.mark.parametrize("conditions", [None, "nonsense", {"type": "Running"}, 3])
def test_transition_tolerates_non_list_conditions(name: str, conditions: object) -> None:
    result = TRANSITIONS[name]({"conditions": conditions, "phase": "p"}, 1, T0)
    assert result["phase"] == "p"
    assert "Running" in types(result)


@pytest.mark.parametrize("name", TRANSITIONS)
def test_transition_records_generation(name: str) -> None:
    start = c.failed(None, generation=1, now=T0, messages=["m"], result=None)
    result = TRANSITIONS[name](start, 9, T1)
    # running() writes only Running and Ready; the others describe the last finished run.
    written = ["Running", "Ready"]
    if name != "running":
        written += ["Successful", "Failure"]
    for ctype in written:
        assert cond(result, ctype)["observedGeneration"] == 9
    if name == "running":
        assert cond(result, "Failure")["observedGeneration"] == 1


def sequences() -> Iterator[list[str]]:
    """Yield every sequence of three transitions."""
    names = list(TRANSITIONS)
    for a in names:
        for b in names:
            for d in names:
                yield [a, b, d]


OPERATOR_SDK_LEFTOVERS: dict[str, list[dict[str, Any]]] = {
    # markRunning after a success: Successful flipped to False, reason kept.
    "running after success": [
        {
            "type": "Running",
            "status": "True",
            "reason": "Running",
            "message": "Running reconciliation",
        },
        {
            "type": "Successful",
            "status": "False",
            "reason": "Successful",
            "message": c.MESSAGE_SUCCEEDED,
        },
        {"type": "Failure", "status": "False", "reason": "", "message": ""},
    ],
    # markRunning after a failure: Failure flipped to False, reason and message kept.
    "running after failure": [
        {
            "type": "Running",
            "status": "True",
            "reason": "Running",
            "message": "Running reconciliation",
        },
        {"type": "Failure", "status": "False", "reason": "Failed", "message": "task X failed"},
        {"type": "Successful", "status": "False", "reason": "", "message": ""},
    ],
    # markError after a success: Successful flipped to False, reason Successful kept.
    "error after success": [
        {
            "type": "Running",
            "status": "False",
            "reason": "Successful",
            "message": c.MESSAGE_AWAITING,
        },
        {
            "type": "Successful",
            "status": "False",
            "reason": "Successful",
            "message": c.MESSAGE_SUCCEEDED,
        },
        {"type": "Failure", "status": "True", "reason": "Failed", "message": "bad annotation"},
    ],
    "empty reasons": [
        {"type": "Successful", "status": "Unknown", "reason": ""},
        {"type": "Failure", "status": "False"},
    ],
}


def with_times(conditions: list[dict[str, Any]]) -> dict[str, Any]:
    """Return a status holding ``conditions``, each with a valid lastTransitionTime."""
    return {"conditions": [{**x, "lastTransitionTime": S0} for x in conditions]}


def assert_honest(status: Mapping[str, Any]) -> None:
    """Assert the invariants every status this module returns must satisfy."""
    for condition in status["conditions"]:
        if condition["type"] in cl.MANAGED_TYPES:
            assert condition["status"] in ("True", "False", "Unknown"), condition
            assert isinstance(condition["reason"], str), condition
            assert condition["reason"], condition
            assert condition["reason"][0].isupper(), condition
            assert isinstance(condition["message"], str), condition
    successful = cl.find_condition(status, "Successful")
    if successful is not None:
        assert (successful["status"], successful["reason"]) != ("False", "Successful")


@pytest.mark.parametrize("start", [None, *OPERATOR_SDK_LEFTOVERS])
@pytest.mark.parametrize("sequence", list(sequences()), ids="-".join)
def test_no_transition_sequence_is_dishonest(start: str | None, sequence: list[str]) -> None:
    status: dict[str, Any] | None = None
    if start is not None:
        status = with_times(OPERATOR_SDK_LEFTOVERS[start])
    now = T0
    for name in sequence:
        now += timedelta(seconds=10)
        status = TRANSITIONS[name](status, 1, now)
        assert_honest(status)


# ------------------------------------------------------------------------------ migration


def test_running_repairs_operator_sdk_running_after_success() -> None:
    status = c.running(
        with_times(OPERATOR_SDK_LEFTOVERS["running after success"]), generation=1, now=T1
    )
    successful = cond(status, "Successful")
    assert (successful["status"], successful["reason"]) == ("True", "Successful")
    assert successful["message"] == c.MESSAGE_SUCCEEDED
    assert successful["lastTransitionTime"] == S1
    failure = cond(status, "Failure")
    assert (failure["status"], failure["reason"], failure["message"]) == ("False", "Successful", "")
    assert failure["lastTransitionTime"] == S0


def test_running_repairs_operator_sdk_running_after_failure() -> None:
    status = c.running(
        with_times(OPERATOR_SDK_LEFTOVERS["running after failure"]), generation=1, now=T1
    )
    failure = cond(status, "Failure")
    assert (failure["status"], failure["reason"], failure["message"]) == (
        "True",
        "Failed",
        "task X failed",
    )
    successful = cond(status, "Successful")
    assert (successful["status"], successful["reason"]) == ("False", "Failed")
    assert successful["message"] == c.MESSAGE_FAILED


def test_running_repairs_operator_sdk_error_after_success() -> None:
    status = c.running(
        with_times(OPERATOR_SDK_LEFTOVERS["error after success"]), generation=1, now=T1
    )
    successful = cond(status, "Successful")
    assert (successful["status"], successful["reason"], successful["message"]) == (
        "False",
        "Failed",
        c.MESSAGE_FAILED,
    )
    assert successful["lastTransitionTime"] == S0  # status False -> False
    assert cond(status, "Failure")["message"] == "bad annotation"


def test_running_marks_untellable_outcome_unknown() -> None:
    status = c.running(with_times(OPERATOR_SDK_LEFTOVERS["empty reasons"]), generation=1, now=T1)
    for ctype in ("Successful", "Failure"):
        condition = cond(status, ctype)
        assert (condition["status"], condition["reason"]) == ("Unknown", "Unknown")
        assert condition["message"] == c.MESSAGE_UNKNOWN


def test_running_does_not_add_missing_outcome_conditions() -> None:
    status = c.running(
        with_times(OPERATOR_SDK_LEFTOVERS["running after success"][:2]), generation=1, now=T1
    )
    assert types(status) == ["Running", "Successful", "Ready"]


@pytest.mark.parametrize("bad_status", ["Maybe", "", None, True, "true"])
def test_running_drops_outcome_conditions_with_invalid_status(bad_status: object) -> None:
    status = with_times(
        [
            {"type": "Successful", "status": bad_status, "reason": "Successful", "message": ""},
            {"type": "Failure", "status": bad_status, "reason": "Failed", "message": ""},
        ]
    )
    assert cl.find_condition(status, "Successful") is None
    assert types(c.running(status, generation=1, now=T1)) == ["Running", "Ready"]
