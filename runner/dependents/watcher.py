"""Watches of dependent resources: a change to what a role made reconciles its owner.

Every kind a role writes through the proxy is watched from then on (unless the watch says
`watchDependentResources: false` or blacklists the kind). An update (other than to `status`)
or a deletion of such an object enqueues each primary CR it points at: through an
ownerReference, or, when `watchClusterScopedResources` is on, through operator-sdk's
primary-resource annotations (objects in other namespaces, cluster-scoped objects).

The list and watch of each kind are runner/kube/listwatch.py's (pages, bookmarks, a watch that
goes on from the last resourceVersion, a relist after 410 Gone, backoff); here, what a listing or
an event means: a relist is compared with what was seen. Only the objects that point at a CR of
ours (`ours`) are remembered, each by a fingerprint (a hash of everything but status and
bookkeeping): the others in the collection (a namespace's thousands of unrelated ConfigMaps)
cost the parsing of their page or event, and no memory.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import partial
from typing import Any

from runner.dependents.inflight import WritesInFlight
from runner.dependents.ownership import Primary, RequestInfo, owners_of
from runner.kube.client import AsyncUpstream
from runner.kube.listwatch import Event, Listed, ListWatch
from runner.kube.paths import resource_path
from runner.util.logs import cr_fields

log = logging.getLogger("runner.dependents")

Trigger = Callable[[Primary], bool]  # True when a watched primary was enqueued
Ours = Callable[[Primary], bool]  # True when a primary is of a kind we reconcile
_VOLATILE_META = ("resourceVersion", "managedFields", "generation")
_OWN_WRITES = 4096


@dataclass(frozen=True, order=True)
class Kind:
    group: str
    version: str
    plural: str
    namespace: str  # "" = all namespaces (or cluster-scoped)

    def path(self) -> str:
        return resource_path(self.group, self.version, self.plural, self.namespace)


def fingerprint(obj: Mapping[str, Any]) -> str:
    """A hash of the object without status and bookkeeping: equal when only those changed."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in _VOLATILE_META}
    # kind and apiVersion too: a watch event's object has them, a list's items do not
    rest = {k: v for k, v in obj.items() if k not in ("status", "metadata", "kind", "apiVersion")}
    text = json.dumps({"metadata": meta, **rest}, sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).hexdigest()


def _key(obj: Mapping[str, Any]) -> tuple[str, str]:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


class DependentWatches:
    def __init__(
        self,
        upstream: AsyncUpstream,
        trigger: Trigger,
        namespaces: list[str],
        ours: Ours = lambda primary: True,
        writes: WritesInFlight | None = None,
    ) -> None:
        self.upstream = upstream
        self.trigger = trigger
        self.namespaces = namespaces
        self.ours = ours
        self.writes = writes or WritesInFlight()  # the proxy's: events of those wait for them
        self._tasks: dict[Kind, asyncio.Task[None]] = {}
        self._stopped = False
        # (uid, resourceVersion) of what roles wrote through the proxy: the watch events of
        # a role's own writes do not call for another reconcile of its owner.
        self._own: OrderedDict[tuple[str, str], None] = OrderedDict()

    def own_write(self, obj: Mapping[str, Any]) -> None:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        if all(key):
            self._own[key] = None
            while len(self._own) > _OWN_WRITES:
                self._own.popitem(last=False)

    def _is_own(self, obj: Mapping[str, Any]) -> bool:
        meta = obj.get("metadata") or {}
        key = (str(meta.get("uid") or ""), str(meta.get("resourceVersion") or ""))
        if key in self._own:
            del self._own[key]
            return True
        return False

    def ensure(self, info: RequestInfo, cluster_wide: bool = False) -> None:
        """Watch `info`'s kind: in the watched namespaces and the object's own (a role may
        write into another namespace), or everywhere (all namespaces watched, a cluster-scoped
        kind, or `cluster_wide`)."""
        if self._stopped:
            return
        scopes = (
            [""]
            if cluster_wide or not self.namespaces or not info.namespace
            else sorted({*self.namespaces, info.namespace})
        )
        for namespace in scopes:
            kind = Kind(info.group, info.version, info.plural, namespace)
            if kind not in self._tasks:
                log.info(
                    "watching dependent %s%s", kind.path(), "" if namespace else " (all namespaces)"
                )
                self._tasks[kind] = asyncio.create_task(self._watch(kind), name=f"dep {kind}")

    async def stop(self) -> None:
        self._stopped = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def _watch(self, kind: Kind) -> None:
        seen: dict[tuple[str, str], str] = {}  # (namespace, name) -> fingerprint, ours only
        fresh: dict[tuple[str, str], str] = {}  # the same, from the listing being read
        changes = ListWatch(self.upstream, kind.path(), name=f"dependent watch {kind.path()}")
        async for change in changes.changes():
            try:
                if isinstance(change, Listed):
                    if change.first:
                        fresh.clear()
                    self._page(change, seen, fresh)
                    if change.last:
                        seen.clear()
                        seen.update(fresh)
                        fresh.clear()
                else:
                    namespace, name = _key(change.object)
                    key = (kind.group, kind.plural, namespace, name)
                    judge = partial(self._event, change, seen)
                    if not self.writes.hold(key, judge):
                        judge()  # (else once the write's answer is read)
            except Exception:  # a bug: say so, and go on with the next change
                log.exception("dependent watch %s: a change could not be handled", kind.path())

    def _is_ours(self, obj: Mapping[str, Any]) -> bool:
        return any(self.ours(primary) for primary in owners_of(obj))

    def _page(
        self,
        page: Listed,
        seen: dict[tuple[str, str], str],
        fresh: dict[tuple[str, str], str],
    ) -> None:
        """One page of a listing: ours remembered; after a broken stream (a relist), what
        changed meanwhile counts. (An object deleted meanwhile is not known to have been
        ours: its fingerprint alone was kept, so its CR waits for its next run.)"""
        for obj in page.items:
            if not self._is_ours(obj):
                continue
            key = _key(obj)
            fresh[key] = fingerprint(obj)
            if page.relist and seen.get(key) != fresh[key]:
                self._changed(obj)

    def _event(self, event: Event, seen: dict[tuple[str, str], str]) -> None:
        obj = event.object
        key = _key(obj)
        if not self._is_ours(obj):
            seen.pop(key, None)  # never ours, or no longer: nothing of ours to reconcile
            return
        if event.type == "DELETED":
            seen.pop(key, None)
            self._changed(obj)
            return
        new = fingerprint(obj)
        if seen.get(key) != new:
            previous = seen.get(key)
            seen[key] = new
            if self._is_own(obj):
                return
            if previous is not None or event.type == "MODIFIED":
                self._changed(obj)

    def _changed(self, obj: Mapping[str, Any]) -> None:
        namespace, name = _key(obj)
        for primary in owners_of(obj):
            if not self.trigger(primary):
                continue  # not a CR of ours (a ReplicaSet owning a Pod), or gone
            log.info(
                "dependent %s %s changed: reconciling %s %s/%s",
                obj.get("kind"),
                f"{namespace}/{name}" if namespace else name,
                primary.kind,
                primary.namespace,
                primary.name,
                extra=cr_fields(primary.kind, primary.namespace or None, primary.name),
            )
