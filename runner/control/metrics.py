"""What the controllers record, as an interface: the Prometheus implementation is in the app
(runner/app/metrics.py); the controllers, and unit tests, see only this."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Protocol

Result = Literal["success", "failure", "error"]


class Metrics(Protocol):
    """What the controllers report. `NullMetrics` when metrics are off (and in unit tests)."""

    def observe_reconcile(
        self, kind: str, group: str, version: str, result: Result, seconds: float, failed_tasks: int
    ) -> None: ...

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        """A key was handed to a worker `seconds` after it became due."""


class NullMetrics:
    def observe_reconcile(
        self, kind: str, group: str, version: str, result: Result, seconds: float, failed_tasks: int
    ) -> None:
        return None

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        return None


NULL_METRICS: Metrics = NullMetrics()


@dataclass(frozen=True)
class WorkerStats:
    """The state of one controller at scrape time."""

    queue_depth: int
    queue_scheduled: int
    busy_workers: int
    workers: int
    longest_wait: float = 0.0  # seconds the key due the longest has waited for a worker
