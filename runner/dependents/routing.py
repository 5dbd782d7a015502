"""The dependents' routing policy: which writes start a dependent watch, which changes reconcile
which primary CR.

A role's write through the proxy makes its kind watched (unless the watch says
`watchDependentResources: false`, blacklists the kind, or the object is the CR itself;
cluster-scoped objects only with `watchClusterScopedResources`). Namespaced objects in another
namespace are watched whatever that key says, as operator-sdk does (proxy.go's
addWatchToController), in the watched namespaces and theirs. A change to a dependent reconciles
the primary it points at, if that primary is one of our watches (a cluster-scoped object's
primary-resource annotations only with `watchClusterScopedResources`). A role's read by name of
a kind its watch lists in `watchReads` is followed (references.py).

The targets are the controllers, seen here only as `Target`: a watch and a way to enqueue.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from runner.dependents.ownership import Owner, Primary, RequestInfo, is_owner
from runner.dependents.watcher import DependentWatches
from runner.watches import Watch


class Target(Protocol):
    """What the routing needs of a controller."""

    @property
    def watch(self) -> Watch: ...

    def enqueue_named(self, namespace: str, name: str) -> bool: ...


class Routes:
    """The controllers by the group and kind of their CRs."""

    def __init__(self) -> None:
        self._by_kind: dict[tuple[str, str], Target] = {}

    def add(self, target: Target) -> None:
        gvk = target.watch.gvk
        self._by_kind[(gvk.group, gvk.kind)] = target

    def knows(self, primary: Primary) -> bool:
        """Is `primary` of a kind that one of our watches reconciles?"""
        return (primary.group, primary.kind) in self._by_kind

    def trigger(self, primary: Primary) -> bool:
        """A dependent changed: reconcile the primary CR it points at, if it is one of ours."""
        target = self._by_kind.get((primary.group, primary.kind))
        if target is None:
            return False
        if (
            primary.via_annotation
            and primary.cluster_scoped
            and not target.watch.watch_cluster_scoped_resources
        ):
            return False
        return target.enqueue_named(primary.namespace, primary.name)

    def follows(self, owner: Owner, group: str, version: str, kind: str = "") -> bool:
        """Does `owner`'s watch follow what its runs read of that kind (`watchReads`)? With
        `kind` "", of any kind of that group version (a cheap first question)."""
        target = self._by_kind.get((owner.group, owner.kind))
        return target is not None and any(
            (read.group, read.version) == (group, version) and kind in ("", read.kind)
            for read in target.watch.watch_reads
        )

    def on_write(
        self,
        dependents: DependentWatches,
        info: RequestInfo,
        owner: Owner,
        obj: Mapping[str, Any],
    ) -> None:
        """A role wrote `obj` for `owner`: watch its kind from now on, as the watch allows."""
        dependents.own_write(obj)
        target = self._by_kind.get((owner.group, owner.kind))
        if target is None or not target.watch.watch_dependent_resources:
            return
        watch = target.watch
        if is_owner(info, obj, owner) or blacklisted(watch, info, obj):
            return
        if not info.namespace and not watch.watch_cluster_scoped_resources:
            return  # cluster-scoped: only with watchClusterScopedResources, as operator-sdk
        dependents.ensure(info, cluster_wide=not info.namespace)


def blacklisted(watch: Watch, info: RequestInfo, obj: Mapping[str, Any]) -> bool:
    kind = str(obj.get("kind") or "")
    return any(
        (b.group, b.version, b.kind) == (info.group, info.version, kind) for b in watch.blacklist
    )
