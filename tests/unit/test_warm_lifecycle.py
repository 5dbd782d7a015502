"""The warm executor's life in an operator (runner/ansible/warm/lifecycle.py), with a fake
pool: chosen by the line, proved once by the canary, given up for good with one warning."""

from __future__ import annotations

import logging
import threading
from pathlib import Path
from typing import Any, ClassVar

import pytest

from runner.ansible.warm import lifecycle
from runner.ansible.warm.pool import Started


class FakePool:
    started: ClassVar[list[FakePool]] = []
    report: ClassVar[Started] = Started(
        ansible="2.18.19", installed=["direct", "localtmp"], skipped=["x"]
    )

    def __init__(self, env: Any) -> None:
        self.stopped = False
        FakePool.started.append(self)

    @property
    def failures(self) -> Any:
        return Path("/nonexistent")

    def wait_ready(self) -> Started:
        return FakePool.report

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture
def pools(monkeypatch: pytest.MonkeyPatch) -> list[FakePool]:
    monkeypatch.setattr(lifecycle, "WarmPool", FakePool)
    monkeypatch.setattr(lifecycle, "ansible_core_version", lambda: "2.18.19")
    FakePool.started = []
    FakePool.report = Started(ansible="2.18.19", installed=["direct", "localtmp"], skipped=["x"])
    return FakePool.started


def _warnings(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelno == logging.WARNING]


def test_proved_once_then_warm_until_idle(
    pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    canaries: list[object] = []
    warm = lifecycle.WarmLifecycle({}, True, 0, lambda pool: canaries.append(pool))
    caplog.set_level(logging.INFO)
    hold = warm.hold()
    assert hold.pool is pools[0] and warm.running
    hold.release()
    hold.release()  # given back once, however often it is released
    warm._stop_if_idle()  # stopped (as when idle); the next run starts it again, no canary
    assert pools[0].stopped and not warm.running
    hold = warm.hold()
    assert hold.pool is pools[1]
    hold.release()
    warm.close()
    assert canaries == [pools[0]] and pools[1].stopped
    infos = [r.getMessage() for r in caplog.records if r.levelno == logging.INFO]
    assert infos[1:] == [
        "warm executors stopped after 0 s without runs (they start again with the next run)"
    ]
    assert infos[0].startswith(
        "executor: warm (fork server), ansible-core 2.18.19, 2 patches (not on this line: x); "
        "up in "
    )


def test_a_failed_canary_means_the_plain_path_for_good(
    pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    warm = lifecycle.WarmLifecycle({}, True, 0, lambda pool: "the canary run gave 'x'")
    assert warm.hold().pool is None
    assert warm.hold().pool is None and len(pools) == 1 and pools[0].stopped
    assert _warnings(caplog) == [
        "warm executor given up: the canary run gave 'x' (ansible-core 2.18.19); "
        "runs take the plain path from now on"
    ]


def test_a_server_that_failed_names_the_patch(
    pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    FakePool.report = Started(ansible="2.18.19", failure="patch direct failed: install: x")
    warm = lifecycle.WarmLifecycle({}, True, 0, lambda pool: None)
    assert warm.hold().pool is None
    assert _warnings(caplog) == [
        "warm executor given up: patch direct failed: install: x (ansible-core 2.18.19); "
        "runs take the plain path from now on"
    ]


def test_given_up_while_runs_hold_it_the_server_goes_with_the_last(
    pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    warm = lifecycle.WarmLifecycle({}, True, 120, lambda pool: None)
    first, second = warm.hold(), warm.hold()
    assert first.pool is second.pool is pools[0]
    for _ in range(3):  # every run that saw a failure reports it: one warning
        warm.give_up("patch direct failed in a run: boom")
    assert len(_warnings(caplog)) == 1
    first.release()
    assert not pools[0].stopped  # the other run still uses it
    second.release()
    assert pools[0].stopped and warm.hold().pool is None


def test_a_line_not_verified_never_starts_a_server(
    monkeypatch: pytest.MonkeyPatch, pools: list[FakePool], caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.setattr(lifecycle, "ansible_core_version", lambda: "2.22.0")
    warm = lifecycle.WarmLifecycle({}, True, 0, lambda pool: None)
    assert not warm.enabled and warm.hold().pool is None and not pools
    assert _warnings(caplog) == [
        "warm executor not used: ansible-core 2.22.0 is not among the lines the warm executor "
        "is verified on (2.15 to 2.21); runs take the plain path"
    ]
    plain = lifecycle.WarmLifecycle({}, False, 0, lambda pool: None)
    assert plain.why_plain == "--executor=plain"


def test_close_stops_a_server_that_is_still_starting_without_waiting_for_it(
    pools: list[FakePool], monkeypatch: pytest.MonkeyPatch
) -> None:
    """The operator's stop never waits on a start (a cold start with its canary takes ~20 s):
    the starting server is stopped, its start ends with no pool and no warning."""
    started, go_on = threading.Event(), threading.Event()

    def slow_ready(self: FakePool) -> Any:
        started.set()
        go_on.wait(10)
        return FakePool.report

    monkeypatch.setattr(FakePool, "wait_ready", slow_ready)
    warm = lifecycle.WarmLifecycle({}, True, 0, lambda pool: None)
    starting = warm.start_ahead()
    assert starting is not None and started.wait(10)
    warm.close()  # returns while the start still waits
    assert pools[0].stopped and not starting.done()
    go_on.set()
    assert starting.result(10) is None and not warm.running
    assert warm.hold().pool is None  # nothing starts once closed
