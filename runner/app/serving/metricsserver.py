"""The metrics endpoint: /metrics of the operator's registry, served as controller-runtime does.

Plain HTTP by default; `--metrics-secure` serves it over TLS (metricstls.py);
`--metrics-require-rbac` lets through only callers whose token and RBAC allow it
(metricsauth.py). The health probes and the roles' osdk_metric listener are not affected.
"""

from __future__ import annotations

from dataclasses import dataclass

from runner.app.serving.bind import BindAddress, Endpoint
from runner.app.serving.metrics import PrometheusMetrics
from runner.app.serving.metricsauth import MetricsAuth
from runner.app.serving.metricstls import MetricsTLS, cert_files
from runner.kube.client import KubeClient


@dataclass(frozen=True)
class MetricsSecurity:
    """`--metrics-secure` (TLS, metricstls.py), `--metrics-require-rbac` (metricsauth.py)."""

    secure: bool = False
    require_rbac: bool = False
    cert_dir: str | None = None
    cert_name: str = "tls.crt"
    key_name: str = "tls.key"


def metrics_endpoint(
    prometheus: PrometheusMetrics,
    address: BindAddress,
    security: MetricsSecurity,
    client: KubeClient,
) -> Endpoint:
    """/metrics: plain, or over TLS (--metrics-secure), behind the reviews
    (--metrics-require-rbac), as controller-runtime's metrics server."""
    middlewares = [MetricsAuth(client).middleware] if security.require_rbac else []
    tls = None
    if security.secure:
        tls = MetricsTLS(cert_files(security.cert_dir, security.cert_name, security.key_name))
    app = prometheus.app(middlewares)
    if tls is not None:
        app.on_startup.append(lambda _: _start(tls))
        app.on_cleanup.append(lambda _: tls.stop())
    return Endpoint(
        "metrics",
        app,
        address,
        "--metrics-bind-address",
        ssl_context=tls.context if tls is not None else None,
    )


async def _start(tls: MetricsTLS) -> None:
    tls.start()
