"""What a production deployment needs around the controllers: metrics, probes, leader election.

The manager's use of it, in order:

    production = await Production.start(config.production, client, watches, executor.cancel_all)
    if not await production.lead():       # SIGTERM while standing by: nothing ran, exit 0
        ...
    production.register(registry, config.graceful_shutdown_timeout)
    Controller(..., metrics=production.metrics); production.track(controller)
    kopf.operator(..., ready_flag=production.ready_flag, stop_flag=production.stop_flag)
    finally: production.stopping(); <stop the controllers>; await production.close()
    return production.exit_code

`start` validates the flags (a bad address or a missing namespace exits at once with one
message) and starts the metrics and health endpoints, so a standby serves both while it waits.
`lead` returns at once without leader election; with it, once this process holds the Lease,
and it keeps renewing it in the background while the runs in progress finish after SIGTERM:
the Lease is released only once nothing of ours runs any more, in kopf's cleanup phase
(`register`), or at the latest in `close`.

When the Lease is lost (not renewed within the renew deadline, or taken over), every run is
cancelled and the workers stopped at once, kopf is told to stop, and the process exits 1; if
that takes longer than the margin before others may take the Lease, it is ended with
`os._exit(1)`.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import signal
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from runner.app.leases.leader import LeaderElector
from runner.app.leases.lease import (
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    ElectionConfig,
    ElectionError,
    default_election_id,
    election_namespace,
    new_identity,
)
from runner.app.serving.bind import BindAddress, BindAddressError, Endpoint, parse_bind_address
from runner.app.serving.health import Health
from runner.app.serving.metrics import PrometheusMetrics
from runner.app.serving.metricsserver import MetricsSecurity, metrics_endpoint
from runner.app.serving.rolemetrics import RoleMetrics
from runner.app.source.kopf_import import kopf
from runner.control.controller import Controller, drain
from runner.control.metrics import NULL_METRICS, Metrics, WorkerStats
from runner.kube import requestlog
from runner.kube.client import KubeClient
from runner.watches import Watch

log = logging.getLogger("runner.production")

DEFAULT_METRICS_BIND_ADDRESS = ":8443"  # ansible-operator's (plain HTTP unless secure)
DEFAULT_HEALTH_PROBE_BIND_ADDRESS = ":6789"
# Where operator-sdk's osdk_metric module posts (http://localhost:5050/metrics).
DEFAULT_ROLE_METRICS_BIND_ADDRESS = "127.0.0.1:5050"


@dataclass(frozen=True)
class ProductionConfig:
    metrics_bind_address: str = DEFAULT_METRICS_BIND_ADDRESS
    health_probe_bind_address: str = DEFAULT_HEALTH_PROBE_BIND_ADDRESS
    role_metrics_bind_address: str = DEFAULT_ROLE_METRICS_BIND_ADDRESS
    leader_elect: bool = False
    sharding: bool = False  # replicas divide the CRs (runner/app/sharding.py)
    leader_election_id: str | None = None
    leader_election_namespace: str | None = None
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD
    metrics_security: MetricsSecurity = field(default_factory=MetricsSecurity)


def _address(flag: str, value: str) -> BindAddress | None:
    try:
        return parse_bind_address(value)
    except BindAddressError as err:
        raise SystemExit(f"operator-runner: {flag}: {err}") from None


def election_config(
    config: ProductionConfig, watches: list[Watch], environ: Mapping[str, str]
) -> ElectionConfig:
    try:
        return ElectionConfig(
            namespace=election_namespace(config.leader_election_namespace, environ),
            name=config.leader_election_id or default_election_id(w.gvk.group for w in watches),
            identity=new_identity(),
            lease_duration=config.lease_duration,
            renew_deadline=config.renew_deadline,
            retry_period=config.retry_period,
        )
    except ElectionError as err:
        raise SystemExit(f"operator-runner: {err}") from None


class Production:
    def __init__(
        self,
        metrics: Metrics,
        health: Health,
        endpoints: list[Endpoint],
        elector: LeaderElector | None,
        cancel_runs: Callable[[], None],
        graceful_timeout: float = 30.0,
    ) -> None:
        self.metrics = metrics
        self.health = health
        self.elector = elector
        self.stop_flag = asyncio.Event()  # kopf.operator(stop_flag=...); set on SIGTERM too
        self.exit_code = 0
        self._endpoints = endpoints
        self._cancel_runs = cancel_runs
        self._controllers: list[Controller] = []
        self._hold: asyncio.Task[None] | None = None
        self._stoppers: list[asyncio.Task[bool]] = []
        self._drain: asyncio.Task[bool] | None = None
        self.graceful_timeout = graceful_timeout
        self.hard_exit: Callable[[float], None] = _hard_exit  # replaceable in tests
        self.overdue_exit: Callable[[float, int], None] = _overdue_exit  # replaceable in tests
        self.role_metrics_url = ""  # where osdk_metric posts; "" when switched off

    @property
    def ready_flag(self) -> asyncio.Event:
        """kopf.operator(ready_flag=...): raised once kopf has started."""
        return self.health.kopf_ready

    @classmethod
    async def start(
        cls,
        config: ProductionConfig,
        client: KubeClient,
        watches: list[Watch],
        cancel_runs: Callable[[], None],
        environ: Mapping[str, str] = os.environ,
        graceful_timeout: float = 30.0,
        *,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> Production:
        metrics_at = _address("--metrics-bind-address", config.metrics_bind_address)
        health_at = _address("--health-probe-bind-address", config.health_probe_bind_address)
        role_metrics_at = _address("--role-metrics-bind-address", config.role_metrics_bind_address)
        election = election_config(config, watches, environ) if config.leader_elect else None
        health = Health(stale_after=config.lease_duration, clock=clock)
        metrics: Metrics = NULL_METRICS
        endpoints: list[Endpoint] = []
        try:
            if metrics_at is not None:
                prometheus = PrometheusMetrics()
                metrics = prometheus
                endpoints.append(
                    metrics_endpoint(prometheus, metrics_at, config.metrics_security, client)
                )
                requestlog.add_observer(prometheus.observe_request)
                await endpoints[-1].start()
            if health_at is not None:
                endpoints.append(
                    Endpoint(
                        "health probes", health.app(), health_at, "--health-probe-bind-address"
                    )
                )
                await endpoints[-1].start()
            role_metrics_url = ""
            if role_metrics_at is not None:
                registry = metrics.registry if isinstance(metrics, PrometheusMetrics) else None
                role_metrics = RoleMetrics(registry)  # without /metrics: kept, not served
                endpoints.append(
                    Endpoint(
                        "roles' osdk_metric",
                        role_metrics.app(),
                        role_metrics_at,
                        "--role-metrics-bind-address",
                    )
                )
                await endpoints[-1].start()
                role_metrics_url = f"http://{endpoints[-1].bound[0]}/metrics"
        except BaseException:
            for endpoint in endpoints:
                await endpoint.stop()
            raise
        elector = None
        if election is not None:
            elector = LeaderElector(
                client, election, on_standby=health.standby, now=now, clock=clock
            )
        production = cls(metrics, health, endpoints, elector, cancel_runs, graceful_timeout)
        production.role_metrics_url = role_metrics_url
        return production

    # -- leadership -------------------------------------------------------------------------

    async def lead(self) -> bool:
        """True once this process may reconcile; False when it was stopped before that."""
        self._install_signal_handlers()
        elector = self.elector
        if elector is None:
            self.health.leading()
            return not self.stop_flag.is_set()
        self._set_leader(False)
        acquire = asyncio.create_task(elector.acquire(), name="leader-election-acquire")
        stopped = asyncio.create_task(self.stop_flag.wait(), name="leader-election-stop")
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (acquire, stopped):
            if not task.done():
                task.cancel()
        await asyncio.gather(acquire, stopped, return_exceptions=True)
        if self.stop_flag.is_set():
            log.info("stopped while standing by")
            await elector.release()
            return False
        acquire.result()  # re-raise what went wrong (a bug: API errors are retried)
        self.health.leading()
        self._set_leader(True)
        self._hold = asyncio.create_task(self._keep_lease(elector), name="leader-election-renew")
        return True

    async def _keep_lease(self, elector: LeaderElector) -> None:
        reason = await elector.hold()
        self._lost(reason)

    def _lost(self, reason: str) -> None:
        assert self.elector is not None
        config = self.elector.config
        self.lose(f"leader election lost: {reason}", config.lease_duration - config.renew_deadline)

    def lose(self, reason: str, margin: float) -> None:
        """The right to run is gone (leadership, or a shard's Lease): cancel every run, stop,
        exit 1; within `margin` s (less 1 s), before others may take over, at the latest."""
        log.error("%s; stopping every reconcile now and exiting", reason)
        self.exit_code = 1
        self.health.lost()
        self._set_leader(False)
        self._cancel_runs()
        for controller in self._controllers:
            self._stoppers.append(asyncio.create_task(controller.stop(0)))
        self.stop_flag.set()
        margin = max(1.0, margin - 1.0)
        asyncio.get_running_loop().call_later(margin, self.hard_exit, margin)

    def _set_leader(self, leading: bool) -> None:
        if self.elector is not None and isinstance(self.metrics, PrometheusMetrics):
            self.metrics.set_leader(self.elector.config.name, leading)

    def take_signals(self) -> None:
        """SIGTERM/SIGINT are ours: call again once kopf has installed its own handlers (in
        kopf.spawn_tasks), so that the workers stop taking keys the moment the signal arrives,
        not once kopf's own shutdown is over."""
        self._install_signal_handlers()

    def _install_signal_handlers(self) -> None:
        loop = asyncio.get_running_loop()
        for signum in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError, ValueError):
                loop.add_signal_handler(signum, self._on_signal, signum)

    def _on_signal(self, signum: int) -> None:
        name = signal.Signals(signum).name
        if self.stop_flag.is_set():
            log.info("signal %s: already stopping", name)
            return
        busy = sum(c.busy for c in self._controllers)
        log.info(
            "signal %s: stopping: no new runs; %d running get up to %g s to finish",
            name,
            busy,
            self.graceful_timeout,
        )
        self.begin_shutdown()
        self.stop_flag.set()  # kopf's shutdown, meanwhile (its watches, its cleanup handlers)

    # -- shutdown: no new runs, the grace period for those running, then out ----------------

    def begin_shutdown(self) -> asyncio.Task[bool]:
        """Stop every worker taking keys now and give the runs in progress the grace period,
        once (the signal, kopf's cleanup and the manager all wait for the same drain). The
        process is gone 2 s after the grace period at the latest (`overdue_exit`)."""
        if self._drain is None:
            self.health.stopping()
            for controller in self._controllers:
                controller.stop_taking()
            self._drain = asyncio.get_running_loop().create_task(
                drain(self._controllers, self.graceful_timeout, self._cancel_runs, log),
                name="shutdown-drain",
            )
            late = self.graceful_timeout + OVERDUE_AFTER_GRACE
            asyncio.get_running_loop().call_later(late, self._overdue, late)
        return self._drain

    def _overdue(self, after: float) -> None:
        self.overdue_exit(after, self.exit_code)

    async def drained(self) -> bool:
        """Once the runs in progress ended (or were cancelled after the grace period)."""
        return await asyncio.shield(self.begin_shutdown())

    # -- shutdown with leader election: release the Lease as early as is safe --------------

    def register(self, registry: kopf.OperatorRegistry) -> None:
        """With leader election, drain the controllers and release the Lease in kopf's cleanup.

        kopf runs cleanup handlers once its watches stopped, but only then waits up to 5 s for
        the tasks spawned meanwhile (dependent watches, ...) before it returns; releasing the
        Lease here, as soon as no run of ours goes on and none can start, spares the standby
        that wait.
        """
        if self.elector is None:
            return

        async def release_lease(**_: Any) -> None:
            try:
                await self._drain_and_release()
            except Exception:  # never fail kopf's cleanup; close() releases as a fallback
                log.exception("releasing the Lease at shutdown failed")

        kopf.on.cleanup(registry=registry, id="operator-runner-release-lease")(release_lease)

    async def _drain_and_release(self) -> None:
        self.health.stopping()
        elector = self.elector
        if self.exit_code or elector is None or not elector.leading:
            return
        log.info("stopping: the Lease is released once the running reconciles ended")
        await self.drained()
        await self._stop_renewing()
        await elector.release()
        self._set_leader(False)

    async def _stop_renewing(self) -> None:
        if self._hold is not None:
            self._hold.cancel()
            await asyncio.gather(self._hold, return_exceptions=True)

    # -- controllers ------------------------------------------------------------------------

    def track(self, controller: Controller) -> None:
        """Report the controller's queue and workers in the metrics; stop it if leadership goes."""
        self._controllers.append(controller)
        if isinstance(self.metrics, PrometheusMetrics):
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

    # -- shutdown ---------------------------------------------------------------------------

    def stopping(self) -> None:
        """Shutdown began: not ready any more."""
        self.health.stopping()

    async def close(self) -> None:
        """After the controllers stopped: stop renewing, release the Lease, stop the endpoints."""
        self.health.stopping()
        if self._stoppers:
            await asyncio.gather(*self._stoppers, return_exceptions=True)
        await self._stop_renewing()
        if self.elector is not None and self.exit_code == 0:
            await self.elector.release()
            self._set_leader(False)
        for endpoint in self._endpoints:
            await endpoint.stop()
        if isinstance(self.metrics, PrometheusMetrics):
            requestlog.remove_observer(self.metrics.observe_request)


#: After the grace period, what cancelled runs, the Lease's release and the endpoints may take
#: before the process is ended anyway.
OVERDUE_AFTER_GRACE = 1.8


def _overdue_exit(after: float, code: int) -> None:
    log.warning("still not stopped %g s after shutdown began: exiting now", after)
    logging.shutdown()
    os._exit(code)


def _hard_exit(margin: float) -> None:
    log.critical("lost the Lease and still not stopped after %g s: exiting now", margin)
    logging.shutdown()
    os._exit(1)
