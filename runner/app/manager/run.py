"""The manager of `operator-runner run`: watches.yaml -> kopf watches -> controllers -> reconcilers.

`Manager.serve` builds the operator's pieces in order and stops them in reverse:

1. connect: the credentials, and a first request that says what to fix when the server's
   certificate does not verify;
2. serve: /metrics, the health probes, the roles' osdk_metric listener and the webhooks
   (runner/app/serving; webhooks.py), before anything waits, so that a standby answers them too;
3. lead: with `--leader-elect`, once this replica holds the Lease (leadership.py); with
   `--sharding`, once it has joined the replicas that share the CRs (runner/app/leases);
4. build: the roles' API proxy, the dependent and read-following watches, one reconciler and
   controller per watch, live reload of the roles;
5. watch: kopf's watches feed the controllers (runner/app/source) until a signal or a lost Lease
   (shutdown.py);
6. stop: each part is registered on one exit stack as it starts (`parts`), so every way out
   (the end of the watch, a standby stopped, a `SystemExit` of a build step, an error) stops
   what started, in reverse order: the runs in progress get the grace period, then the proxy,
   the read-following and dependent watches, the shard and leader Leases, the webhooks, the
   endpoints, the executor, the prober and the client.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
from contextlib import AsyncExitStack
from typing import Any

from runner.ansible.artifacts import Artifacts
from runner.ansible.executor import Executor
from runner.ansible.retention import Retention
from runner.app.leases.leader import LeaderElector
from runner.app.leases.sharding import Membership, relabeller, sharding_config
from runner.app.manager.config import OperatorConfig, read_watches
from runner.app.manager.leadership import Leadership, election_config
from runner.app.manager.shutdown import Shutdown
from runner.app.manager.watchsettings import watch_options, watch_workers
from runner.app.manager.webhooks import WebhooksRunning, start_webhooks
from runner.app.process.capacity import run_slots
from runner.app.process.limits import memory_limit_bytes
from runner.app.serving.endpoints import Addresses, Serving
from runner.app.serving.health import Health
from runner.app.source import outage, watching
from runner.app.source.crddiscovery import (
    serve_crds_despite_discovery_lag,
    serve_crds_without_watching_them,
    survive_deleted_crds,
)
from runner.app.source.login import certificate_refused
from runner.app.source.namespaces import skip_refused_namespace_scan
from runner.control.controller import Controller
from runner.control.reload import RoleReloader
from runner.control.shards import Shards
from runner.dependents.inflight import WritesInFlight
from runner.dependents.ownership import Owner, RequestInfo
from runner.dependents.proxy import Proxy
from runner.dependents.references import References
from runner.dependents.routing import Routes
from runner.dependents.watcher import DependentWatches
from runner.kube import client as kube
from runner.kube import clientconfig
from runner.kube.client import KubeClient
from runner.kube.credentials import Credentials, CredentialsError
from runner.kube.probe import Prober
from runner.reconcile.reconciler import Reconciler
from runner.reconcile.recorder import EventRecorder
from runner.util import fence
from runner.watches import Watch
from runner.watches.sources import source_files

log = logging.getLogger("runner.manager")


def make_executor(config: OperatorConfig, max_parallel_runs: int | None = None) -> Executor:
    """The executor of the operator's runs (and of `operator-runner reconcile`'s one run)."""
    return Executor(
        roles_paths=[config.watches_file.resolve().parent / "roles"],
        tmp_dir=config.artifacts_dir / ".ansible-tmp",
        warm=config.executor == "warm",
        warm_idle_timeout=config.warm_idle_timeout,
        max_parallel_runs=max_parallel_runs,
        retention=Retention(config.artifacts_dir, config.artifacts_caps),
    )


class Manager:
    """One operator process: its pieces, built in order (`serve`), stopped in reverse.

    Each step registers what it starts on the exit stack `parts` at once, before anything that
    may fail after it: the stop order is the start order reversed, written nowhere else."""

    credentials: Credentials
    client: KubeClient
    prober: Prober
    executor: Executor
    serving: Serving
    webhooks: WebhooksRunning | None
    shutdown: Shutdown
    leadership: Leadership
    shards: Shards | None
    upstream: kube.AsyncUpstream
    dependents: DependentWatches
    references: References
    routes: Routes
    proxy: Proxy
    controllers: list[Controller]

    def __init__(self, config: OperatorConfig, watches: list[Watch]) -> None:
        self.config = config
        self.watches = watches

    async def serve(self) -> int:
        """Run the operator until it is stopped; its exit code."""
        async with AsyncExitStack() as parts:
            if not await self._connect(parts):
                return 1
            await self._start_serving(parts)
            if not await self.leadership.lead():  # stopped while standing by: nothing of ours ran
                return 0
            await self._join_shards(parts)
            await self._start_dependents(parts)
            self._start_controllers(parts)
            await self._watch()
        return self.shutdown.exit_code

    # -- 1. connect -------------------------------------------------------------------------

    async def _connect(self, parts: AsyncExitStack) -> bool:
        """The credentials, the client and the prober that watches the server through it; False
        (logged) when they cannot be used."""
        try:
            self.credentials = clientconfig.load(self.config.kubeconfig)
        except CredentialsError as err:
            log.error("%s", err)
            return False
        credentials = self.credentials
        log.info(
            "credentials: %s, server %s%s",
            credentials.source,
            credentials.server,
            f" (via the kubernetes package: {credentials.plugin} user)"
            if credentials.fallback
            else "",
        )
        self.client = KubeClient(credentials)
        parts.push_async_callback(self.client.close)
        refused = await certificate_refused(self.client)
        if refused is not None:
            log.error("%s", refused)
            return False
        self.prober = Prober(self.client)
        self.prober.start()
        parts.push_async_callback(self.prober.stop)
        return True

    # -- 2. serve ---------------------------------------------------------------------------

    async def _start_serving(self, parts: AsyncExitStack) -> None:
        """The executor, the endpoints (a bad flag exits here), the shutdown and leadership."""
        config, prod = self.config, self.config.production
        self.executor = make_executor(config, max_parallel_runs=run_slots(memory_limit_bytes()))
        parts.callback(self.executor.close)
        addresses = Addresses.parse(
            prod.metrics_bind_address,
            prod.health_probe_bind_address,
            prod.role_metrics_bind_address,
        )
        election = None
        if prod.leader_elect:
            election = election_config(
                prod.leader_election_id,
                prod.leader_election_namespace,
                (prod.lease_duration, prod.renew_deadline, prod.retry_period),
                [w.gvk.group for w in self.watches],
                os.environ,
            )
        health = Health(stale_after=prod.lease_duration)
        self.serving = await Serving.start(addresses, prod.metrics_security, self.client, health)
        parts.push_async_callback(self.serving.close)
        if self.serving.role_metrics_url:  # the bundled osdk_metric's default address
            self.executor.add_env({"OPERATOR_RUNNER_METRICS_URL": self.serving.role_metrics_url})
        self.webhooks = await start_webhooks(
            config, self.watches, self.credentials, self.client, self.executor, health
        )
        if self.webhooks is not None:
            parts.push_async_callback(self.webhooks.stop)
        self.shutdown = Shutdown(health, self.executor.cancel_all, config.graceful_shutdown_timeout)
        parts.callback(self.shutdown.stopping)  # not ready any more
        elector = None
        if election is not None:
            elector = LeaderElector(self.client, election, on_standby=health.standby)
        self.leadership = Leadership(elector, self.shutdown, health, self.serving.set_leader)
        parts.push_async_callback(self.leadership.close)  # stop renewing, release the Lease
        self.shutdown.take_signals()  # from now on: a standby too stops at SIGTERM

    # -- 3. lead: sharding ------------------------------------------------------------------

    async def _join_shards(self, parts: AsyncExitStack) -> None:
        """With --sharding: our Lease written, the live replicas known (leases/sharding.py)."""
        self.shards = None
        prod = self.config.production
        if not prod.sharding:
            return
        sharding = sharding_config(
            prod.leader_election_id,
            prod.leader_election_namespace,
            (prod.lease_duration, prod.renew_deadline, prod.retry_period),
            [w.gvk.group for w in self.watches],
            os.environ,
        )
        shards = Shards(sharding.identity, relabeller(self.client))
        margin = sharding.lease_duration - sharding.renew_deadline
        membership = Membership(
            self.client,
            sharding,
            shards.set_members,
            lambda reason: self.shutdown.lose(reason, margin),
        )
        parts.push_async_callback(self._leave_shards, shards, membership)
        try:
            await membership.join()
        except (kube.ApiError, OSError) as err:
            hint = ""
            if isinstance(err, kube.ApiError) and err.status in (401, 403):
                hint = (
                    "; the ServiceAccount needs get, list, create, update and delete on "
                    "leases.coordination.k8s.io in that namespace "
                    "(deploy/rbac/leader_election_role.yaml)"
                )
            raise SystemExit(
                f"operator-runner: --sharding: could not write this replica's Lease or list the "
                f"group's Leases in namespace {sharding.namespace}: {err}{hint}"
            ) from None
        log.info(
            "sharding: replica %s in group %s (Leases in %s)",
            sharding.identity,
            sharding.group,
            sharding.namespace,
        )
        self.shards = shards

    async def _leave_shards(self, shards: Shards, membership: Membership) -> None:
        """After the runs ended: no claims go on; on a clean exit our Lease is deleted (the
        others take over at once), else it only stops being renewed."""
        await shards.close()
        if self.shutdown.exit_code == 0:
            await membership.leave()
        else:
            await membership.stop()

    # -- 4. build ---------------------------------------------------------------------------

    async def _start_dependents(self, parts: AsyncExitStack) -> None:
        """The dependent watches, and the roles' API proxy that starts them."""
        config = self.config
        self.upstream = kube.AsyncUpstream(self.credentials)
        parts.push_async_callback(self.upstream.close)
        self.routes = Routes()
        writes = WritesInFlight()  # the roles' writes, whose events the watches hold till done
        self.dependents = DependentWatches(
            self.upstream, self.routes.trigger, config.namespaces, self.routes.knows, writes
        )
        parts.push_async_callback(self.dependents.stop)
        self.references = References(self.upstream, self.routes.trigger, config.namespaces, writes)
        parts.push_async_callback(self.references.stop)
        routes, dependents, references = self.routes, self.dependents, self.references

        def on_write(info: RequestInfo, owner: Owner, obj: dict[str, Any]) -> None:
            routes.on_write(dependents, info, owner, obj)
            references.wrote(info, owner, obj)

        self.proxy = Proxy(
            self.upstream,
            inject=config.inject_owner_ref,
            adopt=config.owner_ref_on_update,
            on_write=on_write,
            follows=routes.follows,
            on_read=references.read,
            writes=writes,
        )
        parts.push_async_callback(self.proxy.stop)  # its folder of kubeconfigs exists already
        try:
            await self.proxy.start(config.proxy_port)
        except OSError as err:
            raise SystemExit(
                f"operator-runner: --proxy-port={config.proxy_port}: cannot listen on "
                f"127.0.0.1: {err.strerror or err}; choose another port, or leave the flag out "
                "(a free port)"
            ) from None

    def _start_controllers(self, parts: AsyncExitStack) -> None:
        """One reconciler and controller per watch, started; live reload with --watch-roles."""
        config = self.config
        artifacts = Artifacts(config.artifacts_dir)
        recorder = EventRecorder(self.client)
        self.controllers = []
        parts.push_async_callback(self._stop_controllers)  # those tracked by then
        for watch in self.watches:
            options = watch_options(config, watch, os.environ)
            workers = watch_workers(config, watch, os.environ)
            reconciler = Reconciler(
                watch,
                options,
                self.client,
                self.executor,
                artifacts,
                recorder,
                self.proxy,
                self.references if watch.watch_reads else None,
            )
            controller = Controller(
                reconciler, workers, metrics=self.serving.metrics, shards=self.shards
            )
            self.serving.track(controller)
            self.shutdown.track(controller)
            self.routes.add(controller)
            controller.start()
            self.controllers.append(controller)
            log.info(
                "watching %s %s (%s, %d workers, resync %s)",
                watch.gvk.kind,
                watch.gvk.api_version,
                f"role {watch.role}" if watch.role else f"playbook {watch.playbook}",
                workers,
                f"every {options.reconcile_period:g} s" if options.reconcile_period else "off",
            )
        if config.watch_roles:
            project = config.watches_file.resolve().parent
            reload = RoleReloader(self.controllers, lambda watch: source_files(watch, project))
            reloader = asyncio.create_task(reload.run(), name="watch-roles")
            parts.push_async_callback(_cancelled, reloader)
            log.info("--watch-roles: an edit of a role or playbook re-runs its CRs")

    async def _stop_controllers(self) -> None:
        """No new runs; those in progress get the rest of the grace period (begun at the signal),
        or were cancelled at once when a Lease was lost."""
        self.shutdown.stopping()
        await self.shutdown.drained()
        await self.shutdown.stopped()

    # -- 5. watch ---------------------------------------------------------------------------

    async def _watch(self) -> None:
        """kopf's watches, until a signal or a lost Lease stops them."""
        cleanups: list[watching.Cleanup] = []
        if self.leadership.elector is not None:  # early Lease release
            cleanups.append(("operator-runner-release-lease", self.leadership.release_at_cleanup))
        # in kopf's cleanup: otherwise kopf waits 5 s for these tasks before it returns
        cleanups.append(("operator-runner-stop-dependent-watches", self.dependents.stop))
        cleanups.append(("operator-runner-stop-read-following", self.references.stop))
        handlers = watching.registry(self.controllers, self.credentials, cleanups)
        namespaces = self.config.namespaces
        log.info("namespaces: %s", ", ".join(namespaces) if namespaces else "all")
        await skip_refused_namespace_scan(self.client, namespaces)
        serve_crds_despite_discovery_lag()
        survive_deleted_crds()
        await serve_crds_without_watching_them(self.client)
        await watching.run(
            handlers,
            watches=self.watches,
            namespaces=namespaces,
            graceful_shutdown_timeout=self.config.graceful_shutdown_timeout,
            ready_flag=self.serving.health.kopf_ready,
            stop_flag=self.shutdown.stop_flag,
            take_signals=self.shutdown.take_signals,
        )


async def _cancelled(task: asyncio.Task[None]) -> None:
    task.cancel()
    with contextlib.suppress(asyncio.CancelledError):
        await task


def run_operator(config: OperatorConfig) -> int:
    if config.kubeconfig:
        os.environ["KUBECONFIG"] = config.kubeconfig
    watches = read_watches(config.watches_file)
    if watches is None:
        return 1
    outage.install()  # connection errors: one line per outage, no tracebacks
    for warning in fence.verify_all():  # other packages' internals we patch (kopf_import.py)
        log.warning("%s", warning)
    try:
        return asyncio.run(Manager(config, watches).serve())
    except KeyboardInterrupt:
        return 0
