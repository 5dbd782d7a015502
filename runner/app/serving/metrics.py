"""Prometheus metrics of the runner, served on `--metrics-bind-address` at `/metrics`.

operator-sdk's names first (dashboards and alerts built for it work unchanged):

- controller-runtime's and client-go's series (crmetrics.py): reconciles by result,
  errors, reconcile time, workers, the work queue family, `rest_client_requests_total`;
- `ansible_operator_build_info{commit,version}` = 1; `ansible_operator_reconcile_result`
  `{GVK,result}` (a gauge that only goes up, results `succeeded`/`failed`; both failures and
  errors count as `failed`) and the `ansible_operator_reconciles{GVK}` histogram (operator-sdk's
  stops its timer once the run is set up, a known fault; here it measures the whole reconcile).
  `GVK` is written as Go's `schema.GroupVersionKind.String()` does: `group/version, Kind=Kind`;
- `leader_election_master_status{name}`: 1 while this process holds the Lease, 0 otherwise;
  only with `--leader-elect` (controller-runtime's name);
- `resource_created_at_seconds{name,namespace,group,version,kind}`: each watched CR's
  creationTimestamp (whole seconds), set from its watch events, removed when it is deleted
  (operator-lib's InstrumentedEnqueueRequestForObject, the handler of ansible-operator's CR
  watches).

Ours, only where they tell what those do not (labels `kind` and `group` are the watch's):

- `operator_runner_reconciles_total{kind,group,result}`: `success`, `failure` (the Ansible run
  reported failed tasks), `error` (the reconcile could not complete: API errors, a run without a
  result, a bad annotation, a bug); controller-runtime counts the last two as one `error`.
- `operator_runner_failed_tasks_total{kind,group}`: failed Ansible tasks.
- `operator_runner_reconcile_duration_seconds{kind,group}`: the whole reconcile, with buckets
  up to 30 minutes (controller-runtime's end at 60 s; Ansible runs often take longer).
- `operator_runner_queue_scheduled{kind,group}`: keys waiting for a later time (resyncs,
  backoff, requeue_after), which `workqueue_depth` does not count;
  `operator_runner_queue_longest_wait_seconds{kind,group}`: how long the key due the longest
  has waited for a worker (a backlog that does not drain shows as a number that keeps growing).
- `operator_runner_build_info{version,python,ansible_core,ansible_runner,kopf}` = 1.
- the per-task metrics, `operator_runner_task_duration_seconds` and
  `operator_runner_task_results_total` (taskmetrics.py).

Plus the process metrics of prometheus-client (`process_*`, `python_*`).
"""

from __future__ import annotations

import contextlib
import importlib.metadata
import platform
from collections.abc import Callable, Iterable, Sequence
from typing import Any

from aiohttp import web
from prometheus_client import (
    GC_COLLECTOR,
    PLATFORM_COLLECTOR,
    PROCESS_COLLECTOR,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
)
from prometheus_client.aiohttp import make_aiohttp_handler
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runner import __version__
from runner.ansible.results import TaskResult
from runner.app.serving.crmetrics import ControllerRuntimeMetrics, controller_name
from runner.app.serving.taskmetrics import TaskMetrics
from runner.control.metrics import Requeue, Result, WorkerStats
from runner.kube.resources import ObjectRef

# A reconcile runs ansible-playbook: from a fraction of a second to many minutes.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


StatsSource = Callable[[], WorkerStats]


def gvk_label(group: str, version: str, kind: str) -> str:
    """Go's `schema.GroupVersionKind.String()`, operator-sdk's `GVK` label."""
    return f"{group}/{version}, Kind={kind}"


def _version_of(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def build_info() -> dict[str, str]:
    return {
        "version": __version__,
        "python": platform.python_version(),
        "ansible_core": _version_of("ansible-core"),
        "ansible_runner": _version_of("ansible-runner"),
        "kopf": _version_of("kopf"),
    }


class _ControllerCollector(Collector):
    """Our queue gauges, read from the controllers when Prometheus scrapes."""

    def __init__(self) -> None:
        self.sources: dict[tuple[str, str], StatsSource] = {}

    def collect(self) -> Iterable[Metric]:
        labels = ["kind", "group"]
        scheduled = GaugeMetricFamily(
            "operator_runner_queue_scheduled",
            "Keys waiting for a later time (resync, backoff, requeue_after).",
            labels=labels,
        )
        longest = GaugeMetricFamily(
            "operator_runner_queue_longest_wait_seconds",
            "How long the key due the longest has waited for a worker.",
            labels=labels,
        )
        for (kind, group), source in sorted(self.sources.items()):
            stats = source()
            scheduled.add_metric([kind, group], stats.queue_scheduled)
            longest.add_metric([kind, group], stats.longest_wait)
        return [scheduled, longest]


class PrometheusMetrics:
    """The metrics of one operator process, in a registry of their own."""

    def __init__(self, *, process_metrics: bool = True) -> None:
        disable_created_metrics()  # type: ignore[no-untyped-call]  # no `*_created` series
        self.registry = CollectorRegistry(auto_describe=True)
        if process_metrics:
            for collector in (PROCESS_COLLECTOR, PLATFORM_COLLECTOR, GC_COLLECTOR):
                self.registry.register(collector)
        labels = ["kind", "group"]
        self.reconciles = Counter(
            "operator_runner_reconciles",
            "Reconciles by result: success, failure (failed tasks), error (could not complete).",
            [*labels, "result"],
            registry=self.registry,
        )
        self.duration = Histogram(
            "operator_runner_reconcile_duration_seconds",
            "Duration of whole reconciles, the Ansible run included.",
            labels,
            buckets=DURATION_BUCKETS,
            registry=self.registry,
        )
        self.failed_tasks = Counter(
            "operator_runner_failed_tasks",
            "Failed Ansible tasks.",
            labels,
            registry=self.registry,
        )
        info = build_info()
        self.build_info = Gauge(
            "operator_runner_build_info",
            "Versions of the runner and what it runs on; always 1.",
            list(info),
            registry=self.registry,
        )
        self.build_info.labels(**info).set(1)
        self.sdk_build_info = Gauge(  # operator-sdk's (internal/ansible/metrics/metrics.go)
            "ansible_operator_build_info",
            "Build information for the ansible-operator binary",
            ["commit", "version"],
            registry=self.registry,
        )
        self.sdk_build_info.labels("", __version__).set(1)
        self.leader = Gauge(
            "leader_election_master_status",
            "1 while this process holds the leader election Lease, else 0.",
            ["name"],
            registry=self.registry,
        )
        # operator-sdk's names (internal/ansible/metrics/metrics.go)
        self.sdk_results = Gauge(
            "ansible_operator_reconcile_result",
            "Gauge of reconciles and their results (operator-sdk compatible).",
            ["GVK", "result"],
            registry=self.registry,
        )
        self.sdk_reconciles = Histogram(
            "ansible_operator_reconciles",
            "How long in seconds a reconcile takes (operator-sdk compatible; the whole reconcile).",
            ["GVK"],
            registry=self.registry,
        )
        # operator-lib's (handler/internal/metrics), set by ansible-operator's CR watches
        self.created_at = Gauge(
            "resource_created_at_seconds",
            "Timestamp at which a resource was created",
            ["name", "namespace", "group", "version", "kind"],
            registry=self.registry,
        )
        self.controller_runtime = ControllerRuntimeMetrics(self.registry)
        self.tasks = TaskMetrics(self.registry)
        self._names: dict[tuple[str, str], str] = {}  # (kind, group) -> controller name
        self._controllers = _ControllerCollector()
        self.registry.register(self._controllers)

    def track(self, kind: str, group: str, version: str, source: StatsSource) -> None:
        """Report the queue and workers of a controller (read at scrape time)."""
        self._controllers.sources[(kind, group)] = source
        name = self._names[(kind, group)] = controller_name(kind, version)
        self.controller_runtime.track(name, source)
        for result in ("success", "failure", "error"):  # series exist from the start at 0
            self.reconciles.labels(kind, group, result)
        self.failed_tasks.labels(kind, group)
        self.duration.labels(kind, group)

    def _name(self, kind: str, group: str, version: str = "") -> str:
        return self._names.get((kind, group)) or controller_name(kind, version or "v1")

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
        self.reconciles.labels(kind, group, result).inc()
        self.duration.labels(kind, group).observe(seconds)
        if failed_tasks:
            self.failed_tasks.labels(kind, group).inc(failed_tasks)
        gvk = gvk_label(group, version, kind)
        self.sdk_results.labels(gvk, "succeeded" if result == "success" else "failed").inc()
        self.sdk_reconciles.labels(gvk).observe(seconds)
        cr_result = "error" if result != "success" else (requeue or "success")
        self.controller_runtime.observe_reconcile(
            self._name(kind, group, version), cr_result, seconds, panic
        )

    def observe_tasks(self, kind: str, group: str, tasks: Sequence[TaskResult]) -> None:
        self.tasks.observe(kind, group, tasks)

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        self.controller_runtime.observe_wait(self._name(kind, group), seconds)

    def observe_add(self, kind: str, group: str) -> None:
        self.controller_runtime.observe_add(self._name(kind, group))

    def observe_retry(self, kind: str, group: str) -> None:
        self.controller_runtime.observe_retry(self._name(kind, group))

    def observe_resource(
        self, kind: str, group: str, version: str, ref: ObjectRef, created: float | None
    ) -> None:
        labels = (ref.name, ref.namespace or "", group, version, kind)
        if created is not None:
            self.created_at.labels(*labels).set(created)
        else:
            with contextlib.suppress(KeyError):  # never seen (not selected), or seen gone
                self.created_at.remove(*labels)

    def observe_request(self, method: str, host: str, code: str) -> None:
        """An API request of the operator's (rest_client_requests_total)."""
        self.controller_runtime.observe_request(method, host, code)

    def set_leader(self, name: str, leading: bool) -> None:
        self.leader.labels(name).set(1 if leading else 0)

    def app(self, middlewares: Iterable[Any] = ()) -> web.Application:
        app = web.Application(middlewares=list(middlewares))
        app.router.add_get("/metrics", make_aiohttp_handler(self.registry))
        return app
