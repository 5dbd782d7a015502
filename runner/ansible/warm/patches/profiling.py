"""Jobs under cProfile when $OPERATOR_RUNNER_PROFILE names a file prefix (PREFIX.<kind>.<pid>
per job, and PREFIX.worker.<pid> per task of a playbook job; see bench/README.md)."""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable
from typing import Any

PROFILE_ENV = "OPERATOR_RUNNER_PROFILE"
_PLAIN_RUN: list[Callable[[Any], None]] = []


def profiled(kind: str, target: Callable[[list[str]], int], argv: list[str]) -> int:
    """`target(argv)`, profiled when $OPERATOR_RUNNER_PROFILE is set."""
    prefix = os.environ.get(PROFILE_ENV)
    if not prefix:
        return target(argv)
    import cProfile

    profiler = cProfile.Profile(time.process_time)
    profiler.enable()
    try:
        return target(argv)
    finally:
        profiler.disable()
        profiler.dump_stats(f"{prefix}.{kind}.{os.getpid()}")


def install() -> bool:
    """Each task runs in a worker process forked from the playbook job: profile those too
    (only when the server itself runs with $OPERATOR_RUNNER_PROFILE)."""
    if not os.environ.get(PROFILE_ENV):
        return False
    from ansible.executor.process.worker import WorkerProcess

    run = WorkerProcess.run
    _PLAIN_RUN[:] = [run]

    def profiled_run(self: WorkerProcess) -> None:
        prefix = os.environ.get(PROFILE_ENV)
        if not prefix:
            run(self)
            return
        import cProfile

        monitoring = getattr(sys, "monitoring", None)  # 3.12+: the job's profiler came along
        if monitoring is not None and monitoring.get_tool(monitoring.PROFILER_ID):
            monitoring.set_events(monitoring.PROFILER_ID, 0)
            monitoring.free_tool_id(monitoring.PROFILER_ID)
        profiler = cProfile.Profile(time.process_time)
        profiler.enable()
        try:
            run(self)
        finally:
            profiler.disable()
            profiler.dump_stats(f"{prefix}.worker.{os.getpid()}")

    WorkerProcess.run = profiled_run
    return True


def check() -> None:
    from ansible.executor.process.worker import WorkerProcess

    if WorkerProcess.run is _PLAIN_RUN[0]:
        raise AssertionError("WorkerProcess.run is not wrapped")
