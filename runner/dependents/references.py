"""Read-following watches (`watchReads`): a change to an object that a run of a CR read
reconciles that CR.

A role reads a Secret or ConfigMap it does not own (a password another tool rotates, a
certificate cert-manager renews, a ConfigMap a team edits): a GET by name through the proxy
(`k8s_info` with a `name`, a `k8s` lookup with a `resource_name`, the read `k8s` makes before
it writes; found or not: an object created later counts too). When the CR's watch lists the
object's kind in `watchReads`, the routing (routing.py) hands the read here: the object becomes
one of the CR's reads (readindex.py: until a later successful run no longer reads it), and its
collection is watched. A change to what matters (`read_fingerprint`: the data, the spec, the
labels, the annotations but bookkeeping ones; not status, resourceVersion, managedFields)
enqueues every CR that read the object as it was before, in the event lane.

A list is not a read of each of its items: what a role lists is what a selector matches, which
changes when objects come and go, not only when one of them changes; following it would mean
watching every item of every listing the role makes (and memory for each).

The watches: one list-then-watch (runner/kube/listwatch.py) per resource and namespace where
CRs read (or one per resource across all namespaces when the operator watches all of them, and
for cluster-scoped kinds), started at the first read there and kept for the operator's life. A
listing, in pages, checks the objects read against what they are now (a change between a read
and the watch's start, or while the watch was down, counts); of the other objects in the
collection nothing is kept. Watches by name would cost one connection per object.

A restart: every CR is reconciled when the operator starts (as operator-sdk does), and those
runs read again what the roles read: the reads are derived again, never stored (nothing written
on the CRs, no ConfigMap to keep). A change made while the operator was down is what that first
run reads. With sharding, each replica follows the reads of the runs it makes, so only the
replica that holds a CR reconciles it; a CR handed over is run at once by its new holder, and
the old one forgets its reads at its next change.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import logging
from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import Any

from runner.dependents.inflight import WritesInFlight
from runner.dependents.ownership import Owner, Primary, RequestInfo, is_owner
from runner.dependents.readindex import CrKey, Fingerprint, ObjKey, ReadIndex, Res
from runner.dependents.watcher import Kind
from runner.kube.client import AsyncUpstream
from runner.kube.listwatch import Event, Listed, ListWatch
from runner.kube.resources import ObjectRef
from runner.util.logs import cr_fields

log = logging.getLogger("runner.references")

Trigger = Callable[[Primary], bool]  # True when the CR was enqueued (it is ours to run)

#: Annotations that say who wrote what, not what the object holds.
BOOKKEEPING_ANNOTATIONS = frozenset(
    {
        "kubectl.kubernetes.io/last-applied-configuration",
        "deployment.kubernetes.io/revision",
        "control-plane.alpha.kubernetes.io/leader",
        "operator-sdk/primary-resource",
        "operator-sdk/primary-resource-type",
    }
)
_NOT_CONTENT = frozenset({"metadata", "status", "kind", "apiVersion"})


def read_fingerprint(obj: Mapping[str, Any]) -> bytes:
    """What matters of an object a role read: equal when only status or bookkeeping changed."""
    meta = obj.get("metadata") or {}
    annotations = {
        k: v for k, v in (meta.get("annotations") or {}).items() if k not in BOOKKEEPING_ANNOTATIONS
    }
    content = {k: v for k, v in obj.items() if k not in _NOT_CONTENT}
    text = json.dumps([meta.get("labels") or {}, annotations, content], sort_keys=True, default=str)
    return hashlib.blake2b(text.encode(), digest_size=16).digest()


def cr_of(owner: Owner) -> CrKey:
    return owner.group, owner.kind, owner.namespace, owner.name


def cr_of_ref(ref: ObjectRef) -> CrKey:
    return ref.resource.group, ref.resource.kind, ref.namespace or "", ref.name


def _key(obj: Mapping[str, Any]) -> ObjKey:
    meta = obj.get("metadata") or {}
    return str(meta.get("namespace") or ""), str(meta.get("name") or "")


def _shown(res: Res, key: ObjKey) -> str:
    return f"{res[2]} {key[0]}/{key[1]}" if key[0] else f"{res[2]} {key[1]}"


class References:
    """The reads of the runs of this replica, and the watches that follow them."""

    def __init__(
        self,
        upstream: AsyncUpstream,
        trigger: Trigger,
        namespaces: list[str],
        writes: WritesInFlight | None = None,
    ) -> None:
        self.upstream = upstream
        self.trigger = trigger
        self.namespaces = namespaces  # [] = all: one watch per resource
        self.writes = writes or WritesInFlight()  # the proxy's: events of those wait for them
        self.index = ReadIndex()
        self._tasks: dict[Kind, asyncio.Task[None]] = {}
        self._stopped = False

    # -- what runs do (from the proxy) ------------------------------------------------------

    def read(self, info: RequestInfo, owner: Owner, obj: Mapping[str, Any] | None) -> None:
        """A run of `owner` read `info`'s object by name, as `obj` (None: not found)."""
        if obj is not None and is_owner(info, obj, owner):
            return  # the CR itself: its own changes reconcile it already
        res, key = (info.group, info.version, info.plural), (info.namespace, info.name)
        fingerprint = None if obj is None else read_fingerprint(obj)
        self._reconcile(self.index.read(cr_of(owner), res, key, fingerprint), res, key)
        self._ensure(res, info.namespace)

    def wrote(self, info: RequestInfo, owner: Owner, obj: Mapping[str, Any]) -> None:
        """A run of `owner` wrote `obj`: the others that read it are reconciled, not `owner`."""
        name = str((obj.get("metadata") or {}).get("name") or info.name)
        res, key = (info.group, info.version, info.plural), (info.namespace, name)
        if self.index.follows(res, key):
            outdated = self.index.wrote(cr_of(owner), res, key, read_fingerprint(obj))
            self._reconcile(outdated, res, key)

    # -- what the reconciler says -----------------------------------------------------------

    def settle(self, ref: ObjectRef, succeeded: bool) -> None:
        """A run of `ref` ended: after a success, what it did not read is no longer followed."""
        self.index.settle(cr_of_ref(ref), succeeded)

    def forget(self, ref: ObjectRef) -> None:
        """`ref` is gone: its reads follow nothing."""
        self.index.forget(cr_of_ref(ref))

    # -- the watches ------------------------------------------------------------------------

    def _ensure(self, res: Res, namespace: str) -> None:
        """Watch `res` in `namespace` (everywhere when the operator watches all namespaces)."""
        if self._stopped:
            return
        kind = Kind(*res, namespace if self.namespaces else "")
        if kind not in self._tasks:
            where = f"in namespace {kind.namespace}" if kind.namespace else "(all namespaces)"
            log.info("following the reads of %s %s: %s", res[2], where, kind.path())
            self._tasks[kind] = asyncio.create_task(self._watch(kind), name=f"reads {kind}")

    async def stop(self) -> None:
        self._stopped = True
        for task in self._tasks.values():
            task.cancel()
        await asyncio.gather(*self._tasks.values(), return_exceptions=True)

    async def _watch(self, kind: Kind) -> None:
        res: Res = (kind.group, kind.version, kind.plural)
        before: list[ObjKey] = []  # what was read when the listing began
        listed: set[ObjKey] = set()  # what of it the listing has shown so far
        changes = ListWatch(self.upstream, kind.path(), name=f"read-following watch {kind.path()}")
        async for change in changes.changes():
            try:
                if isinstance(change, Listed):
                    if change.first:
                        before, listed = self.index.keys(res, kind.namespace), set()
                    self._page(res, change.items, listed)
                    if change.last:
                        for key in before:
                            if key not in listed:  # gone meanwhile, or never there
                                self._seen(res, key, None)
                        before, listed = [], set()
                else:
                    key = _key(change.object)
                    if self.index.follows(res, key):  # most objects no run read
                        judge = partial(self._event, res, key, change)
                        if not self.writes.hold((res[0], res[2], *key), judge):
                            judge()
            except Exception:  # a bug: say so, and go on with the next change
                log.exception("read-following watch %s: a change failed", kind.path())

    def _event(self, res: Res, key: ObjKey, event: Event) -> None:
        gone = event.type == "DELETED"
        self._seen(res, key, None if gone else read_fingerprint(event.object))

    def _page(self, res: Res, items: Iterable[Mapping[str, Any]], listed: set[ObjKey]) -> None:
        for obj in items:
            key = _key(obj)
            if self.index.follows(res, key):
                listed.add(key)
                self._seen(res, key, read_fingerprint(obj))

    def _seen(self, res: Res, key: ObjKey, fingerprint: Fingerprint) -> None:
        self._reconcile(self.index.changed(res, key, fingerprint), res, key)

    def _reconcile(self, crs: Iterable[CrKey], res: Res, key: ObjKey) -> None:
        for cr in crs:
            group, kind, namespace, name = cr
            if not self.trigger(Primary(group, kind, namespace, name, via_annotation=False)):
                self.index.forget(cr)  # gone, or another replica's now: its reads are not ours
                continue
            log.info(
                "%s changed, which %s %s read: reconciling it",
                _shown(res, key),
                kind,
                f"{namespace}/{name}" if namespace else name,
                extra=cr_fields(kind, namespace or None, name),
            )
