"""What the controllers record, as an interface: the Prometheus implementation is in the app
(runner/app/serving/metrics.py); the controllers, and unit tests, see only this."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal, Protocol

from runner.ansible.results import TaskResult
from runner.kube.resources import ObjectRef

Result = Literal["success", "failure", "error"]
#: What the worker does with the key after a reconcile that did not fail (controller-runtime's
#: results): "" nothing, "requeue" at once, "requeue_after" later (resync, requeue_after).
Requeue = Literal["", "requeue", "requeue_after"]


class Metrics(Protocol):
    """What the controllers report. `NullMetrics` when metrics are off (and in unit tests)."""

    def observe_reconcile(
        self,
        kind: str,
        group: str,
        version: str,
        result: Result,
        seconds: float,
        failed_tasks: int,
        requeue: Requeue = "",
        panic: bool = False,
    ) -> None:
        """A reconcile ended; `panic`: it raised unexpectedly (a bug)."""

    def observe_tasks(self, kind: str, group: str, tasks: Sequence[TaskResult]) -> None:
        """A run's task results (reconcile or finalizer), each with its label and duration."""

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        """A key was handed to a worker `seconds` after it became due."""

    def observe_add(self, kind: str, group: str) -> None:
        """A key was put on the queue (now or for later)."""

    def observe_retry(self, kind: str, group: str) -> None:
        """A key was put back on the queue after a failure (with backoff)."""

    def observe_resource(
        self, kind: str, group: str, version: str, ref: ObjectRef, created: float | None
    ) -> None:
        """A watch event of a CR: `created` is its creationTimestamp (s since the epoch), None
        when it is gone (operator-sdk's resource_created_at_seconds)."""


class NullMetrics:
    def observe_reconcile(
        self,
        kind: str,
        group: str,
        version: str,
        result: Result,
        seconds: float,
        failed_tasks: int,
        requeue: Requeue = "",
        panic: bool = False,
    ) -> None:
        return None

    def observe_tasks(self, kind: str, group: str, tasks: Sequence[TaskResult]) -> None:
        return None

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        return None

    def observe_add(self, kind: str, group: str) -> None:
        return None

    def observe_retry(self, kind: str, group: str) -> None:
        return None

    def observe_resource(
        self, kind: str, group: str, version: str, ref: ObjectRef, created: float | None
    ) -> None:
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
    running: tuple[float, ...] = ()  # seconds each reconcile in progress has run so far
