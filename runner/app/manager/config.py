"""The manager's configuration: the command line's settings (`OperatorConfig`, with the
production flags: where the endpoints listen, how several replicas share the work), and the
watches of watches.yaml (`read_watches`)."""

from __future__ import annotations

import logging
import os
import sys
from dataclasses import dataclass, field
from pathlib import Path

from runner.ansible import collections_path
from runner.ansible.interface import LogEvents
from runner.ansible.retention import Caps
from runner.app.leases.lease import LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD
from runner.app.serving.metricsserver import MetricsSecurity
from runner.app.webhooks.certificates import DEFAULT_CERT_DIR
from runner.watches import Watch, WatchesError, load_watches

log = logging.getLogger("runner.manager")

DEFAULT_METRICS_BIND_ADDRESS = ":8443"  # ansible-operator's (plain HTTP unless secure)
DEFAULT_HEALTH_PROBE_BIND_ADDRESS = ":6789"
# Where operator-sdk's osdk_metric module posts (http://localhost:5050/metrics).
DEFAULT_ROLE_METRICS_BIND_ADDRESS = "127.0.0.1:5050"


@dataclass(frozen=True)
class ProductionConfig:
    """Metrics, probes, leader election and sharding (serving/endpoints.py, leadership.py,
    leases/sharding.py)."""

    metrics_bind_address: str = DEFAULT_METRICS_BIND_ADDRESS
    health_probe_bind_address: str = DEFAULT_HEALTH_PROBE_BIND_ADDRESS
    role_metrics_bind_address: str = DEFAULT_ROLE_METRICS_BIND_ADDRESS
    leader_elect: bool = False
    sharding: bool = False  # replicas divide the CRs (runner/app/leases/sharding.py)
    leader_election_id: str | None = None
    leader_election_namespace: str | None = None
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD
    metrics_security: MetricsSecurity = field(default_factory=MetricsSecurity)


@dataclass(frozen=True)
class WebhookConfig:
    """The `--webhook-*` flags (runner/app/cli/webhookflags.py; webhooks.py reads them)."""

    bind_address: str = ":9443"
    cert_dir: Path = DEFAULT_CERT_DIR
    service: str | None = None  # [NAMESPACE/]NAME: deployed
    url: str | None = None
    configuration_name: str | None = None
    ca_validity: float = 3 * 365 * 86400.0
    cert_validity: float = 365 * 86400.0


@dataclass(frozen=True)
class OperatorConfig:
    watches_file: Path
    namespaces: list[str] = field(default_factory=list)
    max_concurrent_reconciles: int | None = None
    reconcile_period: float | None = None
    verbosity: int = 2
    ansible_args: tuple[str, ...] = ()
    log_events: LogEvents = LogEvents.TASKS
    inject_owner_ref: bool = True
    owner_ref_on_update: bool = False
    artifacts_dir: Path = Path("/tmp/operator-runner")
    artifacts_caps: Caps = field(default_factory=Caps)  # all CRs' runs together (retention.py)
    graceful_shutdown_timeout: float = 30.0
    executor: str = "warm"  # or "plain"
    warm_idle_timeout: float = 120.0
    kubeconfig: str | None = None
    production: ProductionConfig = field(default_factory=ProductionConfig)  # metrics, probes, HA
    webhooks: WebhookConfig = field(default_factory=WebhookConfig)
    watch_roles: bool = False  # live reload: an edit of a role re-runs its CRs
    proxy_port: int = 0  # the roles' API proxy (--proxy-port); 0: a free port


def read_watches(watches_file: Path) -> list[Watch] | None:
    """watches.yaml's watches (warnings logged), or None after printing why it cannot be used."""
    try:
        loaded = load_watches(
            watches_file,
            environ=os.environ,
            roles_paths=[Path(p) for p in os.environ.get("ANSIBLE_ROLES_PATH", "").split(":") if p],
            collection_roots=collections_path.collection_roots(os.environ),
        )
    except WatchesError as err:
        print(f"operator-runner: {err}", file=sys.stderr)
        return None
    for warning in loaded.warnings:
        log.warning("%s", warning)
    if not loaded.watches:
        print(f"operator-runner: {watches_file}: no watches", file=sys.stderr)
        return None
    return loaded.watches
