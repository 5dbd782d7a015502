"""Prometheus metrics of the runner, served on `--metrics-bind-address` at `/metrics`.

Ours (labels `kind` and `group` are the watch's):

- `operator_runner_reconciles_total{kind,group,result}`: reconciles by result: `success`,
  `failure` (the Ansible run reported failed tasks), `error` (the reconcile could not complete:
  API errors, a run without a result, a bad annotation, a bug).
- `operator_runner_reconcile_duration_seconds{kind,group}`: the whole reconcile, from taking
  the key off the queue to the status written, Ansible run included. (operator-sdk's
  `ansible_operator_reconciles` histogram stops its timer once the run is set up: a known fault
  that makes every reconcile look instant.)
- `operator_runner_failed_tasks_total{kind,group}`: failed Ansible tasks.
- `operator_runner_queue_depth{kind,group}`: keys due now and waiting for a worker;
  `operator_runner_queue_scheduled{kind,group}`: keys waiting for a later time (resyncs,
  backoff, requeue_after); `operator_runner_busy_workers{kind,group}`,
  `operator_runner_workers{kind,group}`, and `operator_runner_queue_longest_wait_seconds`
  `{kind,group}`: how long the key due the longest has waited for a worker (a backlog that does
  not drain shows as a number that keeps growing). These are read from the controllers at
  scrape time.
- controller-runtime's work queue names, for its dashboards: `workqueue_depth{name}` (keys due
  now) and `workqueue_queue_duration_seconds{name}`, how long each key waited for a worker once
  due (`name` is `<kind>.<group>`, lower case).
- `operator_runner_build_info{version,python,ansible_core,ansible_runner,kopf}` = 1.
- `leader_election_master_status{name}`: 1 while this process holds the Lease (the name
  controller-runtime uses), 0 otherwise; only with `--leader-elect`.

operator-sdk's names, for existing dashboards and alerts: `ansible_operator_reconcile_result`
`{GVK,result}` (a gauge that only goes up, results `succeeded`/`failed`; both failures and
errors count as `failed`) and the `ansible_operator_reconciles{GVK}` histogram (here it measures
the whole reconcile too). `GVK` is written as Go's `schema.GroupVersionKind.String()` does:
`group/version, Kind=Kind`.

Plus the process metrics of prometheus-client (`process_*`, `python_*`).
"""

from __future__ import annotations

import importlib.metadata
import platform
from collections.abc import Callable, Iterable

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
from runner.control.metrics import Result, WorkerStats

# A reconcile runs ansible-playbook: from a fraction of a second to many minutes.
DURATION_BUCKETS = (0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


StatsSource = Callable[[], WorkerStats]


def queue_name(kind: str, group: str) -> str:
    """A controller's name in controller-runtime's workqueue metrics."""
    return f"{kind}.{group}".lower() if group else kind.lower()


#: Seconds a key waits for a worker once due: from at once to a backlog of many minutes.
WAIT_BUCKETS = (0.01, 0.1, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0, 1800.0)


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
    """Queue and worker gauges, read from the controllers when Prometheus scrapes."""

    def __init__(self) -> None:
        self.sources: dict[tuple[str, str], StatsSource] = {}

    def collect(self) -> Iterable[Metric]:
        labels = ["kind", "group"]
        families = {
            "depth": GaugeMetricFamily(
                "operator_runner_queue_depth", "Keys due now, waiting for a worker.", labels=labels
            ),
            "scheduled": GaugeMetricFamily(
                "operator_runner_queue_scheduled",
                "Keys waiting for a later time (resync, backoff, requeue_after).",
                labels=labels,
            ),
            "busy": GaugeMetricFamily(
                "operator_runner_busy_workers", "Workers running a reconcile now.", labels=labels
            ),
            "workers": GaugeMetricFamily(
                "operator_runner_workers", "Workers (max concurrent reconciles).", labels=labels
            ),
            "longest": GaugeMetricFamily(
                "operator_runner_queue_longest_wait_seconds",
                "How long the key due the longest has waited for a worker.",
                labels=labels,
            ),
            "workqueue_depth": GaugeMetricFamily(
                "workqueue_depth",
                "Current depth of workqueue (controller-runtime).",
                labels=["name"],
            ),
        }
        for (kind, group), source in sorted(self.sources.items()):
            stats = source()
            values = [kind, group]
            families["depth"].add_metric(values, stats.queue_depth)
            families["scheduled"].add_metric(values, stats.queue_scheduled)
            families["busy"].add_metric(values, stats.busy_workers)
            families["workers"].add_metric(values, stats.workers)
            families["longest"].add_metric(values, stats.longest_wait)
            families["workqueue_depth"].add_metric([queue_name(kind, group)], stats.queue_depth)
        return families.values()


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
        self.queue_wait = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested "
            "(controller-runtime's name; here: since it became due).",
            ["name"],
            buckets=WAIT_BUCKETS,
            registry=self.registry,
        )
        self._controllers = _ControllerCollector()
        self.registry.register(self._controllers)

    def track(self, kind: str, group: str, source: StatsSource) -> None:
        """Report the queue and workers of a controller (read at scrape time)."""
        self._controllers.sources[(kind, group)] = source
        for result in ("success", "failure", "error"):  # series exist from the start at 0
            self.reconciles.labels(kind, group, result)
        self.failed_tasks.labels(kind, group)
        self.duration.labels(kind, group)
        self.queue_wait.labels(queue_name(kind, group))

    def observe_reconcile(
        self, kind: str, group: str, version: str, result: Result, seconds: float, failed_tasks: int
    ) -> None:
        self.reconciles.labels(kind, group, result).inc()
        self.duration.labels(kind, group).observe(seconds)
        if failed_tasks:
            self.failed_tasks.labels(kind, group).inc(failed_tasks)
        gvk = gvk_label(group, version, kind)
        self.sdk_results.labels(gvk, "succeeded" if result == "success" else "failed").inc()
        self.sdk_reconciles.labels(gvk).observe(seconds)

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        self.queue_wait.labels(queue_name(kind, group)).observe(seconds)

    def set_leader(self, name: str, leading: bool) -> None:
        self.leader.labels(name).set(1 if leading else 0)

    def app(self) -> web.Application:
        app = web.Application()
        app.router.add_get("/metrics", make_aiohttp_handler(self.registry))
        return app
