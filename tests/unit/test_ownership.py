from __future__ import annotations

from typing import Any

import pytest

from runner.dependents.ownership import (
    PRIMARY_RESOURCE,
    PRIMARY_RESOURCE_TYPE,
    Owner,
    Primary,
    applies,
    fixup_patch,
    mark,
    owners_of,
    parse_path,
)
from runner.dependents.runaccess import is_loopback
from runner.dependents.watcher import fingerprint

OWNER = Owner("swallowlab.com/v1alpha1", "EchoFlask", "example", "ns", "uid-1")
CLUSTER_OWNER = Owner("example.com/v1", "Cluster", "top", "", "uid-2")


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("/api/v1/namespaces/ns/configmaps", ("", "v1", "ns", "configmaps", "", "")),
        ("/api/v1/namespaces/ns/pods/p/log", ("", "v1", "ns", "pods", "p", "log")),
        (
            "/apis/apps/v1/namespaces/ns/deployments/d/scale",
            ("apps", "v1", "ns", "deployments", "d", "scale"),
        ),
        (
            "/apis/rbac.authorization.k8s.io/v1/clusterroles/r",
            ("rbac.authorization.k8s.io", "v1", "", "clusterroles", "r", ""),
        ),
        ("/api/v1/namespaces/ns", ("", "v1", "", "namespaces", "ns", "")),
        ("/api/v1/namespaces", ("", "v1", "", "namespaces", "", "")),
        ("/api/v1/nodes?watch=1", ("", "v1", "", "nodes", "", "")),
    ],
)
def test_parse_path(path: str, expected: tuple[str, ...]) -> None:
    info = parse_path(path)
    assert info is not None
    assert (
        info.group,
        info.version,
        info.namespace,
        info.plural,
        info.name,
        info.subresource,
    ) == expected


@pytest.mark.parametrize("path", ["/version", "/apis", "/api", "/healthz", "/openapi/v2"])
def test_non_resource_paths(path: str) -> None:
    assert parse_path(path) is None


def test_only_whole_object_writes_apply() -> None:
    assert applies("POST", parse_path("/api/v1/namespaces/ns/configmaps"))
    assert applies("PATCH", parse_path("/apis/apps/v1/namespaces/ns/deployments/d"))
    assert not applies("GET", parse_path("/api/v1/namespaces/ns/configmaps"))
    assert not applies("PATCH", parse_path("/apis/apps/v1/namespaces/ns/deployments/d/status"))
    assert not applies("POST", parse_path("/api/v1/namespaces/ns/events"))


def cm(namespace: str = "ns", **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "c", "namespace": namespace, **meta},
    }


def test_same_namespace_gets_a_controller_reference_and_keeps_others() -> None:
    other = {"apiVersion": "v1", "kind": "X", "name": "x", "uid": "u0", "controller": True}
    info = parse_path("/api/v1/namespaces/ns/configmaps")
    assert info
    marked = mark(info, cm(ownerReferences=[other]), OWNER, cluster_scoped=False)
    refs = marked["metadata"]["ownerReferences"]
    assert refs[0] == other
    assert refs[1]["uid"] == "uid-1" and refs[1]["controller"] is False  # one controller only
    fresh = mark(info, cm(), OWNER, cluster_scoped=False)["metadata"]["ownerReferences"]
    assert fresh == [OWNER.reference(True)]
    once = mark(info, cm(), OWNER, cluster_scoped=False)
    assert mark(info, once, OWNER, cluster_scoped=False) == once  # idempotent


def test_other_namespace_and_cluster_scoped_get_annotations() -> None:
    info = parse_path("/api/v1/namespaces/elsewhere/configmaps")
    assert info
    marked = mark(info, cm("elsewhere"), OWNER, cluster_scoped=False)
    assert "ownerReferences" not in marked["metadata"]
    assert marked["metadata"]["annotations"] == {
        PRIMARY_RESOURCE: "ns/example",
        PRIMARY_RESOURCE_TYPE: "EchoFlask.swallowlab.com",
    }
    role = parse_path("/apis/rbac.authorization.k8s.io/v1/clusterroles")
    assert role
    assert (
        PRIMARY_RESOURCE
        in mark(role, {"metadata": {"name": "r"}}, OWNER, cluster_scoped=True)["metadata"][
            "annotations"
        ]
    )


def test_a_cluster_scoped_object_that_names_the_crs_namespace_gets_annotations_only() -> None:
    """As operator-sdk: the resource's scope decides, not the body: a ClusterRole whose
    template keeps `metadata.namespace` (the CR's) gets no ownerReference (an owner in a
    namespace is invalid on it, and Kubernetes never collects by it)."""
    role = parse_path("/apis/rbac.authorization.k8s.io/v1/clusterroles")
    assert role
    body = {"kind": "ClusterRole", "metadata": {"name": "r", "namespace": "ns"}}
    marked = mark(role, body, OWNER, cluster_scoped=True)
    assert "ownerReferences" not in marked["metadata"]
    assert marked["metadata"]["annotations"][PRIMARY_RESOURCE] == "ns/example"
    ops = fixup_patch(role, {**body, "metadata": {**body["metadata"]}}, OWNER, cluster_scoped=True)
    assert [op["path"] for op in ops if op["op"] == "add"] == [
        "/metadata/annotations",
        "/metadata/annotations/operator-sdk~1primary-resource",
        "/metadata/annotations/operator-sdk~1primary-resource-type",
    ]
    # a cluster-scoped owner owns it
    owned = mark(role, body, CLUSTER_OWNER, cluster_scoped=True)
    assert owned["metadata"]["ownerReferences"][0]["uid"] == "uid-2"


def test_cluster_scoped_owner_owns_everything() -> None:
    info = parse_path("/api/v1/namespaces/any/configmaps")
    assert info
    assert (
        mark(info, cm("any"), CLUSTER_OWNER, cluster_scoped=False)["metadata"]["ownerReferences"][
            0
        ]["uid"]
        == "uid-2"
    )


def test_the_owner_itself_is_never_marked() -> None:
    info = parse_path("/apis/swallowlab.com/v1alpha1/namespaces/ns/echoflasks/example")
    assert info
    me = {
        "apiVersion": OWNER.api_version,
        "kind": "EchoFlask",
        "metadata": {"name": "example", "namespace": "ns"},
    }
    assert mark(info, me, OWNER, cluster_scoped=False) == me
    assert fixup_patch(info, me, OWNER, cluster_scoped=False) == []


def test_fixup_patch_after_a_patch() -> None:
    info = parse_path("/api/v1/namespaces/ns/configmaps/c")
    assert info
    ops = fixup_patch(info, cm(resourceVersion="7"), OWNER, cluster_scoped=False)
    assert ops[0] == {"op": "test", "path": "/metadata/resourceVersion", "value": "7"}
    assert ops[1] == {
        "op": "add",
        "path": "/metadata/ownerReferences",
        "value": [OWNER.reference(True)],
    }
    owned = mark(info, cm(resourceVersion="7"), OWNER, cluster_scoped=False)
    assert fixup_patch(info, owned, OWNER, cluster_scoped=False) == []
    far = parse_path("/api/v1/namespaces/far/configmaps/c")
    assert far
    ops = fixup_patch(far, cm("far", resourceVersion="1"), OWNER, cluster_scoped=False)
    assert {
        "op": "add",
        "path": "/metadata/annotations/operator-sdk~1primary-resource",
        "value": "ns/example",
    } in ops


def test_owners_of_reads_references_and_annotations() -> None:
    info = parse_path("/api/v1/namespaces/ns/configmaps")
    far = parse_path("/api/v1/namespaces/far/configmaps")
    assert info and far
    assert owners_of(mark(info, cm(), OWNER, cluster_scoped=False)) == [
        Primary("swallowlab.com", "EchoFlask", "ns", "example", via_annotation=False)
    ]
    assert owners_of(mark(far, cm("far"), OWNER, cluster_scoped=False)) == [
        Primary("swallowlab.com", "EchoFlask", "ns", "example", via_annotation=True)
    ]


def test_fingerprint_ignores_status_and_bookkeeping_only() -> None:
    base = {
        "kind": "Deployment",
        "metadata": {"name": "d", "resourceVersion": "1", "generation": 1, "labels": {"a": "1"}},
        "spec": {"replicas": 1},
        "status": {"ready": 0},
    }
    status_only = {
        **base,
        "status": {"ready": 1},
        "metadata": {**base["metadata"], "resourceVersion": "2"},
    }
    relabelled = {**base, "metadata": {**base["metadata"], "labels": {"a": "2"}}}
    rescaled = {**base, "spec": {"replicas": 2}}
    assert fingerprint(base) == fingerprint(status_only)
    assert fingerprint(base) != fingerprint(relabelled)
    assert fingerprint(base) != fingerprint(rescaled)


@pytest.mark.parametrize(
    ("remote", "ok"),
    [
        ("127.0.0.1", True),
        ("127.8.9.1", True),
        ("::1", True),
        ("10.0.0.5", False),
        ("192.168.1.2", False),
        ("", False),
        (None, False),
        ("garbage", False),
    ],
)
def test_proxy_serves_the_loopback_only(remote: str | None, ok: bool) -> None:
    assert is_loopback(remote) is ok


def test_fingerprint_of_a_list_item_equals_that_of_the_watched_object() -> None:
    """List items carry no kind/apiVersion: a relist must not look like a change."""
    watched = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "s"},
        "spec": {"ports": [{"port": 5000}]},
    }
    listed = {"metadata": {"name": "s"}, "spec": {"ports": [{"port": 5000}]}}
    assert fingerprint(watched) == fingerprint(listed)
