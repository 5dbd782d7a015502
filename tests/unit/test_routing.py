"""runner.dependents.routing: which writes start dependent watches, which changes reconcile."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, cast

from runner.dependents.ownership import Owner, Primary, RequestInfo
from runner.dependents.routing import Routes
from runner.dependents.watcher import DependentWatches
from runner.watches import GVK, Watch

ECHO = GVK("x.io", "v1", "Echo")
OWNER = Owner("x.io/v1", "Echo", "e", "ns", "uid-1")


@dataclass
class FakeTarget:
    watch: Watch
    enqueued: list[tuple[str, str]] = field(default_factory=list)

    def enqueue_named(self, namespace: str, name: str) -> bool:
        self.enqueued.append((namespace, name))
        return True


@dataclass
class FakeDependents:
    own: list[Any] = field(default_factory=list)
    ensured: list[tuple[RequestInfo, bool]] = field(default_factory=list)

    def own_write(self, obj: Any) -> None:
        self.own.append(obj)

    def ensure(self, info: RequestInfo, cluster_wide: bool) -> None:
        self.ensured.append((info, cluster_wide))


def routes(**options: Any) -> tuple[Routes, FakeTarget]:
    target = FakeTarget(Watch(gvk=ECHO, role="/roles/echo", **options))
    r = Routes()
    r.add(target)
    return r, target


def write(r: Routes, info: RequestInfo, obj: dict[str, Any]) -> FakeDependents:
    deps = FakeDependents()
    r.on_write(cast(DependentWatches, deps), info, OWNER, obj)
    return deps


POD = RequestInfo("", "v1", "ns", "pods", "p")
POD_OBJ = {"kind": "Pod", "apiVersion": "v1", "metadata": {"name": "p", "namespace": "ns"}}


def test_a_write_in_the_crs_namespace_is_watched_there() -> None:
    r, _ = routes()
    deps = write(r, POD, POD_OBJ)
    assert deps.own == [POD_OBJ]
    assert deps.ensured == [(POD, False)]


def test_no_watch_without_watch_dependent_resources_or_when_blacklisted() -> None:
    r, _ = routes(watch_dependent_resources=False)
    assert write(r, POD, POD_OBJ).ensured == []
    r, _ = routes(blacklist=(GVK("", "v1", "Pod"),))
    assert write(r, POD, POD_OBJ).ensured == []


def test_cross_namespace_writes_are_watched_regardless_of_the_key() -> None:
    """As operator-sdk: a namespaced dependent in another namespace is watched (through the
    primary-resource annotations) whether or not watchClusterScopedResources is on."""
    other = RequestInfo("", "v1", "other", "pods", "p")
    for options in ({}, {"watch_cluster_scoped_resources": True}):
        r, _ = routes(**options)
        assert write(r, other, POD_OBJ).ensured == [(other, False)]  # there, not everywhere


def test_cluster_scoped_writes_need_watch_cluster_scoped_resources() -> None:
    node = RequestInfo("", "v1", "", "namespaces", "n")
    obj = {"kind": "Namespace", "apiVersion": "v1", "metadata": {"name": "n"}}
    r, _ = routes()
    assert write(r, node, obj).ensured == []
    r, _ = routes(watch_cluster_scoped_resources=True)
    assert write(r, node, obj).ensured == [(node, True)]


def test_triggers_reach_our_primaries_only() -> None:
    r, target = routes()
    assert r.trigger(Primary("x.io", "Echo", "ns", "e", via_annotation=False))
    assert not r.trigger(Primary("apps", "ReplicaSet", "ns", "rs", via_annotation=False))
    assert r.trigger(Primary("x.io", "Echo", "ns", "f", via_annotation=True))  # other namespace
    far = Primary("x.io", "Echo", "ns", "g", via_annotation=True, cluster_scoped=True)
    assert not r.trigger(far)  # a cluster-scoped dependent: only with the key
    assert target.enqueued == [("ns", "e"), ("ns", "f")]
    r, target = routes(watch_cluster_scoped_resources=True)
    assert r.trigger(far) and target.enqueued == [("ns", "g")]


def test_knows_the_kinds_of_its_watches_only() -> None:
    r, _ = routes()
    assert r.knows(Primary("x.io", "Echo", "ns", "e", via_annotation=False))
    assert not r.knows(Primary("apps", "ReplicaSet", "ns", "rs", via_annotation=False))


def test_follows_the_kinds_of_watch_reads_only() -> None:
    r, _ = routes(watch_reads=(GVK("", "v1", "Secret"), GVK("cert-manager.io", "v1", "Cert")))
    assert r.follows(OWNER, "", "v1", "Secret")
    assert r.follows(OWNER, "", "v1"), "some kind of the core group is followed"
    assert not r.follows(OWNER, "", "v1", "ConfigMap")
    assert not r.follows(OWNER, "apps", "v1")
    assert r.follows(OWNER, "cert-manager.io", "v1", "Cert")
    stranger = Owner("y.io/v1", "Other", "o", "ns", "uid-2")
    assert not r.follows(stranger, "", "v1", "Secret")
    r, _ = routes()
    assert not r.follows(OWNER, "", "v1"), "off by default"
