"""kopf as the manager runs it: the watch events of every controller's CRs, and nothing else.

kopf does the watching only (`on.event` handlers: no state, annotations or finalizers of its
own on users' objects, no Events of its own); the controllers own the queue and the runs. The
registry holds, in this order, the cleanup handlers the manager gives (releasing the Lease,
stopping the dependent watches), the login with our credentials, and one `on.event` handler per
controller. `run` starts kopf in its two halves, so that the manager takes the signals back in
between.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Iterable, Mapping
from typing import Any

from runner.app.source.kopf_import import kopf, kopf_tasks_to_ignore
from runner.app.source.login import connection_info
from runner.control.controller import Controller
from runner.kube.credentials import Credentials
from runner.kube.listwatch import PAGE_SIZE
from runner.kube.resources import ObjectRef, Resource
from runner.watches import GVK, Watch
from runner.watches.labelselectors import selector_text

#: (id, coroutine function): a handler of kopf's cleanup phase.
Cleanup = tuple[str, Callable[[], Awaitable[None]]]


def _resource(resource: kopf.Resource) -> Resource:
    return Resource(
        group=resource.group,
        version=resource.version,
        plural=resource.plural,
        kind=resource.kind or "",
        namespaced=bool(resource.namespaced),
    )


def register(registry: kopf.OperatorRegistry, controller: Controller) -> None:
    """The controller's CRs' watch events, handed to `Controller.on_event`."""
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


def registry(
    controllers: Iterable[Controller], credentials: Credentials, cleanups: Iterable[Cleanup]
) -> kopf.OperatorRegistry:
    """kopf's registry: the cleanup handlers, the login, and each controller's watch."""
    handlers = kopf.OperatorRegistry()
    for name, cleanup in cleanups:
        _on_cleanup(handlers, name, cleanup)

    @kopf.on.login(registry=handlers)
    def login(settings: kopf.OperatorSettings, **_: Any) -> kopf.ConnectionInfo:
        """Called again by kopf on 401: a rotated token is read then."""
        return connection_info(credentials, trust_env=settings.networking.trust_env)

    for controller in controllers:
        register(handlers, controller)
    return handlers


def _on_cleanup(
    handlers: kopf.OperatorRegistry, name: str, cleanup: Callable[[], Awaitable[None]]
) -> None:
    async def handler(**_: Any) -> None:
        await cleanup()

    kopf.on.cleanup(registry=handlers, id=name)(handler)


def _kind_of(gvk: GVK) -> Callable[[kopf.Resource], bool]:
    """kopf's resource selector of exactly this group, version and kind."""
    return lambda r: (r.group, r.version, r.kind) == (gvk.group, gvk.version, gvk.kind)


def settings(
    graceful_shutdown_timeout: float, watches: Iterable[Watch] = ()
) -> kopf.OperatorSettings:
    """kopf's settings: no Events of its own, no peering, watches that reconnect in time; the
    CRs listed a page at a time, and each watch's `selector` sent with the list and the watch
    of its kind, so that the API server sends only the CRs it selects (kopf's own `labels=`
    filters would receive them all and drop them here)."""
    settings = kopf.OperatorSettings()
    settings.posting.enabled = False  # our Events only
    settings.peering.standalone = True
    settings.process.ultimate_exiting_timeout = graceful_shutdown_timeout + 15
    settings.watching.server_timeout = 300
    settings.watching.client_timeout = 330
    settings.watching.connect_timeout = 10
    settings.watching.chunk_size = PAGE_SIZE
    for watch in watches:
        if text := selector_text(watch.selector):
            settings.watching.label_selectors[_kind_of(watch.gvk)] = text
    return settings


async def run(
    handlers: kopf.OperatorRegistry,
    *,
    watches: Iterable[Watch],
    namespaces: list[str],
    graceful_shutdown_timeout: float,
    ready_flag: asyncio.Event,
    stop_flag: asyncio.Event,
    take_signals: Callable[[], None],
) -> None:
    """kopf.operator, in its two halves: kopf.spawn_tasks installs kopf's signal handlers, which
    set kopf's own stop and only then, once kopf's shutdown is over, would ours run; so ours are
    put back in between (`take_signals`: the workers stop taking keys at the signal)."""
    operator_tasks = await kopf.spawn_tasks(
        registry=handlers,
        settings=settings(graceful_shutdown_timeout, watches),
        standalone=True,
        clusterwide=not namespaces,
        namespaces=namespaces,
        ready_flag=ready_flag,
        stop_flag=stop_flag,
    )
    take_signals()
    await kopf.run_tasks(operator_tasks, ignored=kopf_tasks_to_ignore())
