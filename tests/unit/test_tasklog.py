"""The task log lines of a warm attempt: kept until the executor knows whether the run is made
again on the plain path (then at debug level), else said as warnings."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.ansible.interface import RunRequest
from runner.ansible.tasklog import log_task_event, settle, warm_attempt

FAILED = {"event": "runner_on_failed", "event_data": {"task": "Record the vars"}}
CHANGED = {"event": "runner_on_ok", "event_data": {"task": "Make it", "res": {"changed": True}}}


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


@pytest.mark.parametrize(
    ("made_again", "said"),
    [
        (
            True,
            (
                "DEBUG",
                "task failed: Record the vars (the warm attempt, made again on the plain path)",
            ),
        ),
        (False, ("WARNING", "task failed: Record the vars")),
    ],
)
def test_a_warm_attempts_failed_task_waits_for_the_verdict(
    caplog: pytest.LogCaptureFixture, made_again: bool, said: tuple[str, str]
) -> None:
    request = RunRequest(Path("."), "1", Path("p.yml"), "{}")
    with caplog.at_level("DEBUG", logger="runner.executor"):
        with warm_attempt() as deferred:
            log_task_event(FAILED, request)
            log_task_event(CHANGED, request)
        assert lines(caplog) == [("INFO", "task changed: Make it")]  # the failure waits
        settle(deferred, made_again)
    assert lines(caplog)[1:] == [said]


def test_outside_a_warm_attempt_a_failed_task_is_a_warning_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    request = RunRequest(Path("."), "1", Path("p.yml"), "{}")
    with caplog.at_level("DEBUG", logger="runner.executor"):
        log_task_event(FAILED, request)
    assert lines(caplog) == [("WARNING", "task failed: Record the vars")]
