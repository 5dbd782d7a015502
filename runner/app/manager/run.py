"""The manager: watches.yaml -> kopf watches -> controllers -> reconcilers.

kopf does the watching only (`on.event` handlers: no state, annotations or finalizers of its
own on users' objects, no Events of its own); the controllers own the queue and the runs.
"""

from __future__ import annotations

import asyncio
import logging
import os
import sys
from collections.abc import Collection, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.ansible import collections_path
from runner.ansible.artifacts import Artifacts
from runner.ansible.executor import Executor
from runner.ansible.interface import LogEvents
from runner.app.leases.sharding import Membership, relabeller, sharding_config
from runner.app.manager.production import Production, ProductionConfig
from runner.app.manager.watchsettings import watch_options, watch_workers
from runner.app.process.cpus import memory_limit_bytes, run_slots
from runner.app.source import outage
from runner.app.source.crddiscovery import serve_crds_despite_discovery_lag
from runner.app.source.kopf_import import kopf
from runner.app.source.login import certificate_refused, connection_info
from runner.app.source.namespaces import skip_refused_namespace_scan
from runner.control.controller import Controller
from runner.control.reload import RoleReloader
from runner.control.shards import Shards
from runner.dependents.proxy import Proxy
from runner.dependents.routing import Routes
from runner.dependents.watcher import DependentWatches
from runner.kube import client as kube
from runner.kube import clientconfig
from runner.kube import credentials as creds
from runner.kube.client import KubeClient
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.reconciler import Reconciler
from runner.reconcile.recorder import EventRecorder
from runner.watches import Watch, WatchesError, load_watches
from runner.watches.sources import source_files

log = logging.getLogger("runner.manager")


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
    graceful_shutdown_timeout: float = 30.0
    executor: str = "warm"  # or "plain"
    warm_idle_timeout: float = 120.0
    kubeconfig: str | None = None
    production: ProductionConfig = field(default_factory=ProductionConfig)  # metrics, probes, HA
    watch_roles: bool = False  # live reload: an edit of a role re-runs its CRs
    proxy_port: int = 0  # the roles' API proxy (--proxy-port); 0: a free port


def make_executor(config: OperatorConfig, max_parallel_runs: int | None = None) -> Executor:
    """The executor of the operator's runs (and of `operator-runner reconcile`'s one run)."""
    return Executor(
        roles_paths=[config.watches_file.resolve().parent / "roles"],
        tmp_dir=config.artifacts_dir / ".ansible-tmp",
        warm=config.executor == "warm",
        warm_idle_timeout=config.warm_idle_timeout,
        max_parallel_runs=max_parallel_runs,
    )


def _resource(resource: kopf.Resource) -> Resource:
    return Resource(
        group=resource.group,
        version=resource.version,
        plural=resource.plural,
        kind=resource.kind or "",
        namespaced=bool(resource.namespaced),
    )


def register(registry: kopf.OperatorRegistry, controller: Controller) -> None:
    gvk = controller.watch.gvk

    async def on_event(
        event: Mapping[str, Any], resource: kopf.Resource, body: kopf.Body, **_: Any
    ) -> None:
        ref = ObjectRef(_resource(resource), body.metadata.namespace, body.metadata.name or "")
        controller.on_event(ref, event.get("type"), body)

    kopf.on.event(
        group=gvk.group or None,
        version=gvk.version,
        kind=gvk.kind,
        registry=registry,
        id=f"watch-{gvk.kind}.{gvk.group}",
    )(on_event)


def _settings(config: OperatorConfig) -> kopf.OperatorSettings:
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False  # our Events only
    settings.peering.standalone = True
    settings.process.ultimate_exiting_timeout = config.graceful_shutdown_timeout + 15
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    return settings


class NotKopfsTasks(Collection["asyncio.Task[Any]"]):
    """The tasks kopf's shutdown is to leave alone: every task not running kopf's code.

    At its end, kopf waits 5 s for, then cancels, every task created since it started
    (`run_tasks(ignored=...)` names those to skip): the API proxy's request handlers of runs
    still going in their grace period, the metrics and health endpoints' connections, the
    shutdown's own drain. Those are ours to stop, in order."""

    def __contains__(self, task: object) -> bool:
        coro = task.get_coro() if isinstance(task, asyncio.Task) else None
        code = getattr(coro, "cr_code", None)
        return code is None or not code.co_filename.startswith(_KOPF_DIR)

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(())

    def __len__(self) -> int:
        return 0


_KOPF_DIR = os.path.dirname(kopf.__file__) + os.sep


async def _serve(config: OperatorConfig, watches: list[Watch]) -> int:
    try:
        credentials = clientconfig.load(config.kubeconfig)
    except creds.CredentialsError as err:
        log.error("%s", err)
        return 1
    log.info(
        "credentials: %s, server %s%s",
        credentials.source,
        credentials.server,
        f" (via the kubernetes package: {credentials.plugin} user)" if credentials.fallback else "",
    )
    client = KubeClient(credentials)
    refused = await certificate_refused(client)
    if refused is not None:
        log.error("%s", refused)
        await client.close()
        return 1
    prober = outage.Prober(client)
    prober.start()
    artifacts = Artifacts(config.artifacts_dir)
    executor = make_executor(config, max_parallel_runs=run_slots(memory_limit_bytes()))
    recorder = EventRecorder(client)
    # -- metrics, health probes, leader election (runner/app/production.py) --
    production = await Production.start(
        config.production,
        client,
        watches,
        executor.cancel_all,
        graceful_timeout=config.graceful_shutdown_timeout,
    )
    if production.role_metrics_url:  # the bundled osdk_metric's default address
        executor.add_env({"OPERATOR_RUNNER_METRICS_URL": production.role_metrics_url})
    if not await production.lead():  # stopped while standing by: nothing of ours ran
        await prober.stop()
        await production.close()
        await client.close()
        return 0
    shards, membership = await _join_shards(config, watches, client, production)
    # --
    registry = kopf.OperatorRegistry()
    production.register(registry)  # early Lease release
    upstream = kube.AsyncUpstream(credentials)
    routes = Routes()
    dependents = DependentWatches(upstream, routes.trigger, config.namespaces)

    async def stop_dependent_watches(**_: Any) -> None:
        """In kopf's cleanup: otherwise kopf waits 5 s for these tasks before it returns."""
        await dependents.stop()

    kopf.on.cleanup(registry=registry, id="operator-runner-stop-dependent-watches")(
        stop_dependent_watches
    )
    proxy = Proxy(
        upstream,
        inject=config.inject_owner_ref,
        adopt=config.owner_ref_on_update,
        on_write=lambda info, owner, obj: routes.on_write(dependents, info, owner, obj),
    )
    try:
        await proxy.start(config.proxy_port)
    except OSError as err:
        raise SystemExit(
            f"operator-runner: --proxy-port={config.proxy_port}: cannot listen on 127.0.0.1: "
            f"{err.strerror or err}; choose another port, or leave the flag out (a free port)"
        ) from None

    @kopf.on.login(registry=registry)
    def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
        """Called again by kopf on 401: a rotated token is read then."""
        return connection_info(credentials, trust_env=settings.networking.trust_env)

    controllers = []
    for watch in watches:
        options = watch_options(config, watch, os.environ)
        workers = watch_workers(config, watch, os.environ)
        reconciler = Reconciler(watch, options, client, executor, artifacts, recorder, proxy)
        controller = Controller(reconciler, workers, metrics=production.metrics, shards=shards)
        production.track(controller)
        routes.add(controller)
        register(registry, controller)
        controller.start()
        controllers.append(controller)
        log.info(
            "watching %s %s (%s, %d workers, resync %s)",
            watch.gvk.kind,
            watch.gvk.api_version,
            f"role {watch.role}" if watch.role else f"playbook {watch.playbook}",
            workers,
            f"every {options.reconcile_period:g} s" if options.reconcile_period else "off",
        )
    reloader: asyncio.Task[None] | None = None
    if config.watch_roles:
        project = config.watches_file.resolve().parent
        reload = RoleReloader(controllers, lambda watch: source_files(watch, project))
        reloader = asyncio.create_task(reload.run(), name="watch-roles")
        log.info("--watch-roles: an edit of a role or playbook re-runs its CRs")
    namespaces = config.namespaces
    log.info("namespaces: %s", ", ".join(namespaces) if namespaces else "all")
    await skip_refused_namespace_scan(client, namespaces)
    serve_crds_despite_discovery_lag()
    try:
        # kopf.operator, in its two halves: kopf.spawn_tasks installs kopf's signal handlers,
        # which set kopf's own stop and only then, once kopf's shutdown is over, would ours
        # run; so ours are put back in between (the workers stop taking keys at the signal).
        operator_tasks = await kopf.spawn_tasks(
            registry=registry,
            settings=_settings(config),
            standalone=True,
            clusterwide=not namespaces,
            namespaces=namespaces,
            ready_flag=production.ready_flag,
            stop_flag=production.stop_flag,
        )
        production.take_signals()
        await kopf.run_tasks(operator_tasks, ignored=NotKopfsTasks())
    finally:
        if reloader is not None:
            reloader.cancel()
        production.stopping()
        await production.drained()  # begun at the signal: the rest of the grace period
        if membership is not None and shards is not None and production.exit_code == 0:
            await shards.close()
            await membership.leave()  # no run of ours goes on: the others take over
        await production.close()  # after the runs ended: release the Lease, stop the endpoints
        await prober.stop()
        await dependents.stop()
        await proxy.stop()
        await upstream.close()
        executor.close()
        await client.close()
    return production.exit_code


async def _join_shards(
    config: OperatorConfig, watches: list[Watch], client: KubeClient, production: Production
) -> tuple[Shards | None, Membership | None]:
    """With --sharding: our Lease written, the live replicas known (runner/app/sharding.py)."""
    prod = config.production
    if not prod.sharding:
        return None, None
    sharding = sharding_config(
        prod.leader_election_id,
        prod.leader_election_namespace,
        (prod.lease_duration, prod.renew_deadline, prod.retry_period),
        [w.gvk.group for w in watches],
        os.environ,
    )
    shards = Shards(sharding.identity, relabeller(client))
    margin = sharding.lease_duration - sharding.renew_deadline
    membership = Membership(
        client, sharding, shards.set_members, lambda reason: production.lose(reason, margin)
    )
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
    return shards, membership


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


def run_operator(config: OperatorConfig) -> int:
    if config.kubeconfig:
        os.environ["KUBECONFIG"] = config.kubeconfig
    watches = read_watches(config.watches_file)
    if watches is None:
        return 1
    outage.install()  # connection errors: one line per outage, no tracebacks
    try:
        return asyncio.run(_serve(config, watches))
    except KeyboardInterrupt:
        return 0
