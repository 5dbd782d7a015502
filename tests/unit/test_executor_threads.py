"""The executor's runs wait in threads of their own (runner/ansible/executor.py, RUN_THREADS):
however many runs are in flight, asyncio's default pool stays free for the short calls that
share it (an admission's quick run starting, the client's credentials, a run's log); and they,
with the processes they start, are niced below the event loop, where admissions start theirs."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.executor import Executor
from runner.ansible.interface import RunResult
from runner.ansible.results import RunSummary
from runner.util.priority import RUN_NICENESS

# One more run in flight than asyncio's default pool has threads (min(32, CPUs + 4)).
RUNS = min(32, (os.cpu_count() or 1) + 4) + 1
WAIT = 10.0  # seconds: a bound for what should happen at once, never a window
HOLD = 2 * WAIT  # seconds a held run waits at most (the test lets them go well before)


def test_runs_in_flight_leave_the_default_pool_free(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = Executor(roles_paths=[tmp_path / "roles"], tmp_dir=tmp_path / "tmp", warm=False)
    inside: list[int] = []
    release = threading.Event()

    def held_run(request: Any) -> RunResult:  # a run that lasts until the test lets it end
        inside.append(threading.get_ident())
        release.wait(HOLD)
        return RunResult("successful", 0, RunSummary())

    monkeypatch.setattr(executor, "run_sync", held_run)

    async def scenario() -> list[RunResult]:
        runs = [asyncio.create_task(executor.run(object())) for _ in range(RUNS)]  # type: ignore[arg-type]
        # every run inside its thread at once (on the default pool, only its size would be)
        deadline = asyncio.get_running_loop().time() + WAIT
        while len(inside) < RUNS:
            assert asyncio.get_running_loop().time() < deadline, f"{len(inside)} of {RUNS} runs"
            await asyncio.sleep(0.01)
        # and a short call on the default pool is answered while all of them wait
        short = await asyncio.wait_for(asyncio.to_thread(threading.get_ident), WAIT)
        assert short not in inside
        release.set()
        return await asyncio.gather(*runs)

    try:
        results = asyncio.run(scenario())
    finally:
        release.set()
        executor.close()
    assert [r.status for r in results] == ["successful"] * RUNS


@pytest.mark.skipif(sys.platform != "linux", reason="nice values are per thread on Linux only")
def test_runs_and_what_they_start_are_niced_below_the_operator(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    executor = Executor(roles_paths=[tmp_path / "roles"], tmp_dir=tmp_path / "tmp", warm=False)

    def started_process_nice(request: Any) -> int:  # what ansible-runner's spawn would get
        child = subprocess.run(
            [sys.executable, "-c", "import os; print(os.getpriority(os.PRIO_PROCESS, 0))"],
            capture_output=True,
            text=True,
            check=True,
        )
        return int(child.stdout)

    monkeypatch.setattr(executor, "run_sync", started_process_nice)
    base = os.getpriority(os.PRIO_PROCESS, 0)
    try:
        nice = asyncio.run(executor.run(object()))  # type: ignore[arg-type]
        after = os.getpriority(os.PRIO_PROCESS, 0)
    finally:
        executor.close()
    assert nice == min(base + RUN_NICENESS, 19)
    assert after == base  # the operator's own thread keeps its priority
