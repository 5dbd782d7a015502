"""The series operator-sdk's Ansible operator exports through controller-runtime and client-go.

Names, labels and meanings as there, so dashboards and alerts built for operator-sdk work:

- controller-runtime (pkg/internal/controller/metrics): `controller_runtime_reconcile_total`
  `{controller,result}` with result `success`, `error`, `requeue`, `requeue_after` (a failed
  Ansible run is an `error`, as operator-sdk returns one; a success followed by a periodic resync
  is a `requeue_after`, as there); `controller_runtime_reconcile_errors_total{controller}`,
  `controller_runtime_terminal_reconcile_errors_total{controller}` (always 0: no error is
  terminal here), `controller_runtime_reconcile_panics_total{controller}` (a reconcile that
  raised unexpectedly: a bug, Go's panic), `controller_runtime_reconcile_time_seconds{controller}`
  (the whole reconcile, Ansible run included), `controller_runtime_active_workers{controller}`,
  `controller_runtime_max_concurrent_reconciles{controller}`.
- client-go's work queue (controller-runtime's pkg/metrics/workqueue.go), labels `name` and
  `controller` (both the controller's name): `workqueue_depth` (keys due now),
  `workqueue_adds_total`, `workqueue_queue_duration_seconds` (from due to handed to a worker),
  `workqueue_work_duration_seconds`, `workqueue_unfinished_work_seconds` (seconds of work in
  progress), `workqueue_longest_running_processor_seconds`, `workqueue_retries_total` (requeues
  after a failure, with backoff).
- client-go's `rest_client_requests_total{code,method,host}`: the operator's own requests to the
  API server (status, finalizers, Events, Leases, reviews, dependents' watches, and the roles'
  requests relayed by its proxy; kopf's watch streams of the CRs are not counted).

The controller's name is operator-sdk's: `<kind>-<version>-controller`, lower case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from runner.control.metrics import WorkerStats

#: controller-runtime's reconcile_time_seconds buckets.
RECONCILE_BUCKETS = (
    *(0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5, 0.6, 0.7),
    *(0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20),
    *(25, 30, 40, 50, 60),
)
#: client-go's workqueue buckets: prometheus.ExponentialBuckets(10e-9, 10, 12).
WORKQUEUE_BUCKETS = tuple(10e-9 * 10**i for i in range(12))
RESULTS = ("success", "error", "requeue", "requeue_after")


def controller_name(kind: str, version: str) -> str:
    """operator-sdk's controller name (internal/ansible/controller/controller.go)."""
    return f"{kind.lower()}-{version.lower()}-controller"


class _Gauges(Collector):
    """Workers and queue gauges, read from the controllers at scrape time."""

    def __init__(self) -> None:
        self.sources: dict[str, Callable[[], WorkerStats]] = {}

    def collect(self) -> Iterable[Metric]:
        controller = ["controller"]
        queue = ["name", "controller"]
        families = {
            "active": GaugeMetricFamily(
                "controller_runtime_active_workers",
                "Number of currently used workers per controller",
                labels=controller,
            ),
            "max": GaugeMetricFamily(
                "controller_runtime_max_concurrent_reconciles",
                "Maximum number of concurrent reconciles per controller",
                labels=controller,
            ),
            "depth": GaugeMetricFamily(
                "workqueue_depth", "Current depth of workqueue", labels=queue
            ),
            "unfinished": GaugeMetricFamily(
                "workqueue_unfinished_work_seconds",
                "How many seconds of work has been done that is in progress and hasn't been "
                "observed by work_duration. Large values indicate stuck threads.",
                labels=queue,
            ),
            "longest": GaugeMetricFamily(
                "workqueue_longest_running_processor_seconds",
                "How many seconds has the longest running processor for workqueue been running.",
                labels=queue,
            ),
        }
        for name, source in sorted(self.sources.items()):
            stats = source()
            families["active"].add_metric([name], stats.busy_workers)
            families["max"].add_metric([name], stats.workers)
            families["depth"].add_metric([name, name], stats.queue_depth)
            families["unfinished"].add_metric([name, name], sum(stats.running))
            families["longest"].add_metric([name, name], max(stats.running, default=0.0))
        return families.values()


class ControllerRuntimeMetrics:
    def __init__(self, registry: CollectorRegistry) -> None:
        def counter(name: str, text: str, labels: list[str]) -> Counter:
            return Counter(name, text, labels, registry=registry)

        self.total = counter(
            "controller_runtime_reconcile",
            "Total number of reconciliations per controller",
            ["controller", "result"],
        )
        self.errors = counter(
            "controller_runtime_reconcile_errors",
            "Total number of reconciliation errors per controller",
            ["controller"],
        )
        self.terminal = counter(
            "controller_runtime_terminal_reconcile_errors",
            "Total number of terminal reconciliation errors per controller",
            ["controller"],
        )
        self.panics = counter(
            "controller_runtime_reconcile_panics",
            "Total number of reconciliation panics per controller",
            ["controller"],
        )
        self.time = Histogram(
            "controller_runtime_reconcile_time_seconds",
            "Length of time per reconciliation per controller",
            ["controller"],
            buckets=RECONCILE_BUCKETS,
            registry=registry,
        )
        queue = ["name", "controller"]
        self.adds = counter("workqueue_adds", "Total number of adds handled by workqueue", queue)
        self.retries = counter(
            "workqueue_retries", "Total number of retries handled by workqueue", queue
        )
        self.latency = Histogram(
            "workqueue_queue_duration_seconds",
            "How long in seconds an item stays in workqueue before being requested",
            queue,
            buckets=WORKQUEUE_BUCKETS,
            registry=registry,
        )
        self.work = Histogram(
            "workqueue_work_duration_seconds",
            "How long in seconds processing an item from workqueue takes.",
            queue,
            buckets=WORKQUEUE_BUCKETS,
            registry=registry,
        )
        self.requests = counter(
            "rest_client_requests",
            "Number of HTTP requests, partitioned by status code, method, and host.",
            ["code", "method", "host"],
        )
        self._gauges = _Gauges()
        registry.register(self._gauges)

    def track(self, name: str, stats: Callable[[], WorkerStats]) -> None:
        """A controller's series, at 0 from the start; its gauges read from `stats`."""
        self._gauges.sources[name] = stats
        for result in RESULTS:
            self.total.labels(name, result)
        for family in (self.errors, self.terminal, self.panics, self.time):
            family.labels(name)
        for family in (self.adds, self.retries, self.latency, self.work):
            family.labels(name, name)

    def observe_reconcile(self, name: str, result: str, seconds: float, panic: bool) -> None:
        self.total.labels(name, result).inc()
        if result == "error":
            self.errors.labels(name).inc()
        if panic:
            self.panics.labels(name).inc()
        self.time.labels(name).observe(seconds)
        self.work.labels(name, name).observe(seconds)

    def observe_add(self, name: str) -> None:
        self.adds.labels(name, name).inc()

    def observe_retry(self, name: str) -> None:
        self.retries.labels(name, name).inc()

    def observe_wait(self, name: str, seconds: float) -> None:
        self.latency.labels(name, name).observe(seconds)

    def observe_request(self, method: str, host: str, code: str) -> None:
        self.requests.labels(code, method, host).inc()
