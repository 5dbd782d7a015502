"""A run's warm attempt (runner/ansible/warm/attempt.py): its hold given back once, its failure
record read into typed failures, the redo rule, and its failed tasks' warnings kept until the
verdict (then at debug level when the run is made again on the plain path)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.interface import RunRequest
from runner.ansible.tasklog import log_task_event
from runner.ansible.warm.attempt import Hold, PatchFailure, WarmAttempt, describe
from runner.ansible.warm.jobenv import FAILURES_ENV

FAILED = {"event": "runner_on_failed", "event_data": {"task": "Record the vars"}}
CHANGED = {"event": "runner_on_ok", "event_data": {"task": "Make it", "res": {"changed": True}}}
REQUEST = RunRequest(Path("."), "1", Path("p.yml"), "{}")


class FakePool:
    def __init__(self, folder: Path) -> None:
        self.failures = folder
        self.env = {"OPERATOR_RUNNER_PLAYBOOK_SOCKET": str(folder / "playbook.sock")}


def lines(caplog: pytest.LogCaptureFixture) -> list[tuple[str, str]]:
    return [(r.levelname, r.getMessage()) for r in caplog.records]


def attempt_on(tmp_path: Path, given_up: list[str], held: list[int]) -> WarmAttempt:
    held.append(1)
    pool: Any = FakePool(tmp_path)
    return WarmAttempt(Hold(pool, held.pop), given_up.append)


def record(attempt: WarmAttempt, *failures: dict[str, object]) -> None:
    """What guard.py writes in a job of the run."""
    path = Path(attempt.env()[FAILURES_ENV])
    path.write_text("".join(json.dumps(f) + "\n" for f in failures))


@pytest.mark.parametrize(
    ("redo", "cancelled", "said"),
    [
        (
            True,
            False,
            (
                "DEBUG",
                "task failed: Record the vars (the warm attempt, made again on the plain path)",
            ),
        ),
        (True, True, ("WARNING", "task failed: Record the vars")),  # cancelled: not made again
        (False, False, ("WARNING", "task failed: Record the vars")),  # handed back: not again
    ],
)
def test_a_failed_patch_gives_up_and_the_run_is_made_again_unless_handed_back_or_cancelled(
    tmp_path: Path,
    caplog: pytest.LogCaptureFixture,
    redo: bool,
    cancelled: bool,
    said: tuple[str, str],
) -> None:
    given_up: list[str] = []
    held: list[int] = []
    attempt = attempt_on(tmp_path, given_up, held)
    with caplog.at_level("DEBUG", logger="runner.executor"):
        log_task_event(FAILED, REQUEST, attempt.keep)
        log_task_event(CHANGED, REQUEST, attempt.keep)
        assert lines(caplog) == [("INFO", "task changed: Make it")]  # the failure waits
        record(attempt, {"patch": "direct", "error": "AttributeError: x", "redo": redo})
        assert attempt.end(cancelled=cancelled) is (redo and not cancelled)
        assert attempt.end() is False  # the verdict is given once
    assert lines(caplog)[1:] == [said]
    assert attempt.failures == (PatchFailure("direct", "AttributeError: x", redo),)
    assert given_up == ["patch direct failed in a run: AttributeError: x"]
    assert held == [] and list(tmp_path.iterdir()) == []  # hold given back, record read


def test_a_clean_warm_run_says_its_warnings_and_is_not_made_again(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    given_up: list[str] = []
    held: list[int] = []
    attempt = attempt_on(tmp_path, given_up, held)
    with caplog.at_level("DEBUG", logger="runner.executor"):
        log_task_event(FAILED, REQUEST, attempt.keep)
        assert attempt.end() is False
        log_task_event(FAILED, REQUEST, attempt.keep)  # after the verdict: at once
    assert lines(caplog) == [("WARNING", "task failed: Record the vars")] * 2
    assert given_up == [] and held == [] and attempt.failures == ()


def test_a_plain_attempt_keeps_nothing_and_its_failed_task_is_a_warning_at_once(
    caplog: pytest.LogCaptureFixture,
) -> None:
    released: list[int] = []
    attempt = WarmAttempt(Hold(None, lambda: released.append(1)), lambda reason: None)
    assert not attempt.warm and attempt.env() == {}
    with caplog.at_level("DEBUG", logger="runner.executor"):
        log_task_event(FAILED, REQUEST, attempt.keep)
        log_task_event(FAILED, REQUEST)
    assert lines(caplog) == [("WARNING", "task failed: Record the vars")] * 2
    assert attempt.end() is False and released == [1]


def test_an_abandoned_attempt_gives_its_hold_back_once_and_says_nothing(tmp_path: Path) -> None:
    given_up: list[str] = []
    held: list[int] = []
    attempt = attempt_on(tmp_path, given_up, held)
    attempt.abandon()
    attempt.abandon()
    assert attempt.end() is False and held == [] and given_up == []


def test_record_lines_are_parsed_into_typed_failures() -> None:
    assert PatchFailure.parse('{"patch": "cli", "error": "E: x", "redo": false}') == (
        PatchFailure("cli", "E: x", redo=False)
    )
    assert PatchFailure.parse('{"patch": "cli", "error": "E: x"}').redo  # redo unless told
    assert PatchFailure.parse("Traceback (most recent call last):") == PatchFailure(
        "?", "Traceback (most recent call last):"
    )
    assert describe([PatchFailure("a", "x"), PatchFailure("b", "y")]) == (
        "patch a failed in a run: x; patch b failed in a run: y"
    )
