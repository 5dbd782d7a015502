"""kopf, imported and fenced: the one module that imports kopf and the one place that touches
its internals (hack/private_names.py keeps it so), each patch registered with the kopf releases
it is verified on (`FENCE`, runner/util/fence.py) and checked at start-up.

Every runner module gets kopf from here (`from .kopf_import import kopf`). The patches:

- **import-without-kubernetes**: kopf's `_cogs/helpers/thirdparty.py` imports `kubernetes.client`
  (~60 MB of generated models) when the package is installed, only to recognise its model
  objects, which the runner never hands to kopf. The package must stay installed (Ansible's
  kubernetes.core modules need it), so kopf is imported while a finder refuses `kubernetes`:
  kopf takes its documented "library not installed" path. The finder is removed afterwards; a
  later `import kubernetes` (exec plugins, runner/kube/clientconfig.py) works as usual.
- **namespace-observer-without-backoff**: kopf's reactor calls
  `observation.namespace_observer`; namespaces.py has it swapped for one without the error
  backoff when the namespaces are names the operator may not list.
- **crd-discovery-retry**: kopf's `observation.process_discovered_resource_event`, swapped for
  one that scans discovery again while it lags behind an established CRD (crddiscovery.py),
  which reads the registry's watched selectors and the insights' watched resources.
- **crd-watch-by-discovery**: kopf's `observation.resource_observer`, swapped (only when the
  operator may not list and watch CRDs) for one that scans discovery at start and then, while a
  watched kind is not served, every few seconds (crddiscovery.py), which calls kopf's processor
  of CRD events and waits for the insights' `ready_resources`.
- **watch-survives-its-crd**: kopf's `watching.continuous_watch` (one list-then-watch of a
  resource, which its `infinite_watch` repeats), wrapped so that a 404 (the kind's CRD was
  deleted: the list after the watch closed comes before kopf's observer stops the watcher) ends
  that round quietly instead of failing the operator (crddiscovery.py).
- **kopf-tasks**: at its end kopf waits for, then cancels, every task created since it started
  but those `run_tasks(ignored=...)` names; kopf's own tasks are recognised by their code's file
  (`NotKopfsTasks`), the others are ours to stop, in order (runner/app/manager/run.py).

On a kopf release none is verified on, or when one does not fit, kopf's own behaviour goes on
and one warning at start-up says what that costs (`fence.verify_all`).
"""

from __future__ import annotations

import asyncio
import dataclasses
import importlib.abc
import importlib.machinery
import inspect
import os
import sys
from collections.abc import (
    AsyncIterator,
    Awaitable,
    Callable,
    Collection,
    Coroutine,
    Iterable,
    Iterator,
    Sequence,
)
from types import ModuleType
from typing import Any

from runner.util.fence import Fence, Patch, Unfit

__all__ = [
    "FENCE",
    "discovered_resources",
    "kopf",
    "kopf_tasks_to_ignore",
    "not_found_error",
    "patch_crd_processor",
    "patch_namespace_observer",
    "patch_resource_observer",
    "patch_watch_stream",
    "process_crd_event",
    "resources_ready",
    "watched_selectors",
]

#: The kopf release lines these patches are verified on (pyproject pins kopf to them).
VERIFIED = ("1.45",)

Processor = Callable[..., Awaitable[None]]
Wrapper = Callable[[Processor], Processor]
Observer = Callable[..., Coroutine[Any, Any, None]]
Stream = Callable[..., AsyncIterator[Any]]


def _keywords(target: Callable[..., Any], *names: str) -> None:
    missing = [n for n in names if n not in inspect.signature(target).parameters]
    if missing:
        raise Unfit(f"{target.__qualname__} takes no {', '.join(missing)}")


def _fields(cls: type, *names: str) -> None:
    missing = set(names) - {f.name for f in dataclasses.fields(cls)}
    if missing:
        raise Unfit(f"{cls.__qualname__} has no {', '.join(sorted(missing))}")


# -- import-without-kubernetes ---------------------------------------------------------------


class _RefuseKubernetes(importlib.abc.MetaPathFinder):
    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname == "kubernetes" or fullname.startswith("kubernetes."):
            raise ModuleNotFoundError(
                f"No module named {fullname!r} (refused while importing kopf)", name=fullname
            )
        return None


_finder = _RefuseKubernetes()
_kubernetes_before = "kubernetes" in sys.modules
_import_failure: str | None = None  # why kopf was imported with kubernetes after all


def _check_import() -> None:
    if _import_failure is not None:
        raise Unfit(_import_failure)
    if _kubernetes_after and not _kubernetes_before:
        raise Unfit("kopf imported the kubernetes package all the same")


# -- namespace-observer-without-backoff, crd-discovery-retry: swaps in kopf's reactor ----------


def _swap(attribute: str, module: str = "") -> Callable[[Callable[[Any], Any]], None]:
    """The install of a swap: kopf calls `<module>.<attribute>` (a module global looked up at
    each call; default: its reactor's `observation`), so the wrapper is seen from then on; once
    only."""

    def install(wrapper: Callable[[Any], Any]) -> None:
        owner = sys.modules[module] if module else _observation
        current = getattr(owner, attribute)
        if getattr(current, "__wrapped__", None) is None:
            setattr(owner, attribute, wrapper(current))

    return install


def _check_namespace_observer() -> None:
    _keywords(_observation.namespace_observer, "settings")
    if not hasattr(kopf.OperatorSettings().networking, "error_backoffs"):
        raise Unfit("kopf's networking settings have no error_backoffs")


def _check_crd_processor() -> None:
    from kopf._cogs.structs.references import Insights, Selector

    _keywords(_observation.process_discovered_resource_event, "raw_event", "registry", "insights")
    _fields(Insights, "watched_resources")
    _fields(Selector, "group", "version", "kind")
    if not callable(getattr(Selector, "check", None)):
        raise Unfit("kopf's Selector has no check()")
    watched_selectors(kopf.OperatorRegistry())


def _check_resource_observer() -> None:
    from kopf._cogs.structs.references import Insights

    _keywords(_observation.resource_observer, "settings", "registry", "insights")
    _fields(Insights, "watched_resources", "ready_resources")
    if not hasattr(kopf.OperatorSettings().scanning, "disabled"):
        raise Unfit("kopf's scanning settings have no disabled")


_WATCHING = "kopf._cogs.clients.watching"


def _check_watch_stream() -> None:
    watching = sys.modules[_WATCHING]
    if not inspect.isasyncgenfunction(watching.continuous_watch):
        raise Unfit("kopf's continuous_watch is not an async generator")
    _keywords(watching.continuous_watch, "settings", "resource", "namespace")
    if not issubclass(not_found_error(), Exception):
        raise Unfit("kopf's APINotFoundError is not an exception")


def not_found_error() -> type[Exception]:
    """What kopf's API requests raise on 404 Not Found."""
    from kopf._cogs.clients.errors import APINotFoundError

    return APINotFoundError


def patch_watch_stream(wrapper: Callable[[Stream], Stream]) -> bool:
    """kopf's list-then-watch of one resource, wrapped (once); False: kopf's own goes on."""
    return FENCE.use("watch-survives-its-crd", wrapper)


def patch_namespace_observer(wrapper: Wrapper) -> bool:
    """kopf's namespace observer, wrapped (once); False: kopf's own goes on."""
    return FENCE.use("namespace-observer-without-backoff", wrapper)


def patch_crd_processor(wrapper: Wrapper) -> bool:
    """kopf's processor of CRD events, wrapped (once); False: kopf's own goes on."""
    return FENCE.use("crd-discovery-retry", wrapper)


def patch_resource_observer(wrapper: Callable[[Observer], Observer]) -> bool:
    """kopf's resource observer, wrapped (once); False: kopf's own goes on."""
    return FENCE.use("crd-watch-by-discovery", wrapper)


async def process_crd_event(**kwargs: Any) -> None:
    """kopf's processor of a CRD event (as its reactor calls it: wrapped, when it is)."""
    await _observation.process_discovered_resource_event(**kwargs)


async def resources_ready(insights: Any) -> None:
    """Until kopf's first scan of the resources is done (its insights' flag)."""
    await insights.ready_resources.wait()


def watched_selectors(registry: Any) -> Iterable[Any]:
    """The selectors of the registry's watching handlers (as kopf's revise_resources reads them)."""
    selectors: Iterable[Any] = registry._watching.get_all_selectors()
    return selectors


def discovered_resources(insights: Any) -> Iterable[Any]:
    """The resources kopf's discovery found and watches (its insights')."""
    resources: Iterable[Any] = insights.watched_resources
    return resources


# -- kopf-tasks ------------------------------------------------------------------------------


class NotKopfsTasks(Collection["asyncio.Task[Any]"]):
    """The tasks kopf's shutdown is to leave alone: every task not running kopf's code.

    At its end, kopf waits 5 s for, then cancels, every task created since it started
    (`run_tasks(ignored=...)` names those to skip): the API proxy's request handlers of runs
    still going in their grace period, the metrics and health endpoints' connections, the
    shutdown's own drain. Those are ours to stop, in order."""

    def __contains__(self, task: object) -> bool:
        coro = task.get_coro() if isinstance(task, asyncio.Task) else None
        code = getattr(coro, "cr_code", None)
        return code is None or not code.co_filename.startswith(_kopf_dir())

    def __iter__(self) -> Iterator[asyncio.Task[Any]]:
        return iter(())

    def __len__(self) -> int:
        return 0


class EveryTask(NotKopfsTasks):
    """Without the patch: kopf's shutdown leaves every task alone (its own too; asyncio cancels
    those still going when the process ends), so that it never cancels ours."""

    def __contains__(self, task: object) -> bool:
        return True


def _kopf_dir() -> str:
    return os.path.dirname(kopf.__file__) + os.sep


def _check_kopf_tasks() -> None:
    from kopf._cogs.aiokits import aiotasks

    _keywords(kopf.run_tasks, "ignored")
    _keywords(aiotasks.all_tasks, "ignored")


def kopf_tasks_to_ignore() -> Collection[asyncio.Task[Any]]:
    """What `kopf.run_tasks(ignored=...)` is to leave alone: every task not kopf's."""
    return NotKopfsTasks() if FENCE.use("kopf-tasks") else EveryTask()


FENCE = Fence(
    "kopf",
    (
        Patch(
            "import-without-kubernetes",
            ("kopf._cogs.helpers.thirdparty:V1ObjectMetaSync",),
            VERIFIED,
            _check_import,
            None,  # at import time, below
            "kopf imported with the kubernetes package (~60 MB more memory)",
        ),
        Patch(
            "namespace-observer-without-backoff",
            (
                "kopf._core.reactor.observation:namespace_observer",
                "kopf._core.reactor.running:observation.namespace_observer",
            ),
            VERIFIED,
            _check_namespace_observer,
            _swap("namespace_observer"),
            "with WATCH_NAMESPACE names the operator may not list, kopf retries the refused "
            "Namespaces list through its error backoff (~54 s) before it watches them",
        ),
        Patch(
            "crd-discovery-retry",
            (
                "kopf._core.reactor.observation:process_discovered_resource_event",
                "kopf._core.intents.registries:OperatorRegistry.__init__",
            ),
            VERIFIED,
            _check_crd_processor,
            _swap("process_discovered_resource_event"),
            "the CRs of a CRD established before discovery lists it are served from the next "
            "change of the CRD or a restart",
        ),
        Patch(
            "crd-watch-by-discovery",
            (
                "kopf._core.reactor.observation:resource_observer",
                "kopf._core.reactor.observation:process_discovered_resource_event",
                "kopf._cogs.structs.references:Insights",
            ),
            VERIFIED,
            _check_resource_observer,
            _swap("resource_observer"),
            "without the permission to list and watch CRDs, kopf retries the refused list "
            "through its error backoff (an error line each) and serves no CRD installed later",
        ),
        Patch(
            "watch-survives-its-crd",
            (
                f"{_WATCHING}:continuous_watch",
                f"{_WATCHING}:infinite_watch",
                "kopf._cogs.clients.errors:APINotFoundError",
            ),
            VERIFIED,
            _check_watch_stream,
            _swap("continuous_watch", _WATCHING),
            "a watched kind's CRD deleted while the operator runs can stop the whole operator "
            "(kopf's watch of it lists again, gets 404 before kopf stops the watch, and "
            "escalates)",
        ),
        Patch(
            "kopf-tasks",
            ("kopf._cogs.aiokits.aiotasks:all_tasks", "kopf._core.reactor.running:run_tasks"),
            VERIFIED,
            _check_kopf_tasks,
            None,  # it reads which file a task's code is in
            "kopf's tasks still going at its end are not cancelled by kopf but when the "
            "process ends",
        ),
    ),
)

# -- the import ------------------------------------------------------------------------------

if FENCE.verified("import-without-kubernetes"):
    sys.meta_path.insert(0, _finder)
    try:
        import kopf
    except ModuleNotFoundError as err:  # this kopf cannot do without kubernetes: import it plainly
        _import_failure = f"kopf cannot be imported without kubernetes: {err}"
        for _name in [m for m in sys.modules if m == "kopf" or m.startswith("kopf.")]:
            del sys.modules[_name]
    finally:
        sys.meta_path.remove(_finder)
import kopf  # noqa: E402 (imported above already, unless that failed)
from kopf._core.reactor import observation as _observation  # noqa: E402

_kubernetes_after = "kubernetes" in sys.modules
