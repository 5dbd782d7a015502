"""The operator's endpoints, on their addresses: /metrics, the health probes, and the listener of
the roles' osdk_metric calls.

The manager starts them before it campaigns for the Lease, so a standby answers the probes and
serves its metrics while it waits. Each address is validated first (`Addresses.parse`: a bad
one stops start-up with one message naming its flag); `0` switches an endpoint off.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.app.serving.bind import BindAddress, BindAddressError, Endpoint, parse_bind_address
from runner.app.serving.health import Health
from runner.app.serving.metrics import PrometheusMetrics
from runner.app.serving.metricsserver import MetricsSecurity, metrics_endpoint
from runner.app.serving.rolemetrics import RoleMetrics
from runner.control.controller import Controller
from runner.control.metrics import NULL_METRICS, Metrics, WorkerStats
from runner.kube import requestlog
from runner.kube.client import KubeClient


def _address(flag: str, value: str) -> BindAddress | None:
    try:
        return parse_bind_address(value)
    except BindAddressError as err:
        raise SystemExit(f"operator-runner: {flag}: {err}") from None


@dataclass(frozen=True)
class Addresses:
    """Where each endpoint listens; None: switched off."""

    metrics: BindAddress | None
    health: BindAddress | None
    role_metrics: BindAddress | None

    @classmethod
    def parse(cls, metrics: str, health: str, role_metrics: str) -> Addresses:
        """The flags' values; a bad one exits with one message that names its flag."""
        return cls(
            _address("--metrics-bind-address", metrics),
            _address("--health-probe-bind-address", health),
            _address("--role-metrics-bind-address", role_metrics),
        )


class Serving:
    """The endpoints running, and what they report: `metrics` (what the controllers record
    into: Prometheus', or nothing when /metrics is off) and `health`."""

    def __init__(
        self,
        metrics: Metrics,
        health: Health,
        endpoints: list[Endpoint],
        role_metrics_url: str = "",
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.role_metrics_url = role_metrics_url  # where osdk_metric posts; "" when off
        self._endpoints = endpoints

    @classmethod
    async def start(
        cls,
        addresses: Addresses,
        security: MetricsSecurity,
        client: KubeClient,
        health: Health,
    ) -> Serving:
        metrics: Metrics = NULL_METRICS
        endpoints: list[Endpoint] = []
        role_metrics_url = ""
        try:
            if addresses.metrics is not None:
                prometheus = PrometheusMetrics()
                metrics = prometheus
                endpoints.append(metrics_endpoint(prometheus, addresses.metrics, security, client))
                requestlog.add_observer(prometheus.observe_request)
                await endpoints[-1].start()
            if addresses.health is not None:
                endpoints.append(
                    Endpoint(
                        "health probes",
                        health.app(),
                        addresses.health,
                        "--health-probe-bind-address",
                    )
                )
                await endpoints[-1].start()
            if addresses.role_metrics is not None:
                registry = metrics.registry if isinstance(metrics, PrometheusMetrics) else None
                role_metrics = RoleMetrics(registry)  # without /metrics: kept, not served
                endpoints.append(
                    Endpoint(
                        "roles' osdk_metric",
                        role_metrics.app(),
                        addresses.role_metrics,
                        "--role-metrics-bind-address",
                    )
                )
                await endpoints[-1].start()
                role_metrics_url = f"http://{endpoints[-1].bound[0]}/metrics"
        except BaseException:
            for endpoint in endpoints:
                await endpoint.stop()
            raise
        return cls(metrics, health, endpoints, role_metrics_url)

    def track(self, controller: Controller) -> None:
        """Report the controller's queue and workers in the metrics (read at scrape time)."""
        if not isinstance(self.metrics, PrometheusMetrics):
            return
        gvk = controller.watch.gvk

        def stats() -> WorkerStats:
            due = controller.queue.due()
            return WorkerStats(
                queue_depth=due,
                queue_scheduled=len(controller.queue) - due,
                busy_workers=controller.busy,
                workers=controller.workers,
                longest_wait=controller.queue.longest_wait(),
                running=controller.running_seconds(),
            )

        self.metrics.track(gvk.kind, gvk.group, gvk.version, stats)

    def set_leader(self, lease: str, leading: bool) -> None:
        """leader_election_master_status{name=lease}."""
        if isinstance(self.metrics, PrometheusMetrics):
            self.metrics.set_leader(lease, leading)

    async def close(self) -> None:
        """Stop the endpoints (the last thing before the process ends)."""
        for endpoint in self._endpoints:
            await endpoint.stop()
        if isinstance(self.metrics, PrometheusMetrics):
            requestlog.remove_observer(self.metrics.observe_request)
