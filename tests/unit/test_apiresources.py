"""runner.dependents.apiresources: what discovery says of a written resource, kept."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

from runner.dependents.apiresources import ApiResources, Served, from_path, served_in
from runner.dependents.ownership import parse_path

AUTHORIZATION = {
    "kind": "APIResourceList",
    "groupVersion": "authorization.k8s.io/v1",
    "resources": [
        {"name": "localsubjectaccessreviews", "namespaced": True, "verbs": ["create"]},
        {"name": "selfsubjectaccessreviews", "namespaced": False, "verbs": ["create"]},
        {"name": "subjectaccessreviews", "namespaced": False, "verbs": ["create"]},
    ],
}
RBAC = {
    "kind": "APIResourceList",
    "groupVersion": "rbac.authorization.k8s.io/v1",
    "resources": [
        {
            "name": "clusterroles",
            "namespaced": False,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
        {
            "name": "roles",
            "namespaced": True,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        },
    ],
}
CORE = {
    "kind": "APIResourceList",
    "groupVersion": "v1",
    "resources": [
        {
            "name": "pods",
            "kind": "Pod",
            "namespaced": True,
            "verbs": ["create", "get", "list", "watch"],
        },
        {"name": "pods/log", "kind": "Pod", "namespaced": True, "verbs": ["get"]},
    ],
}


class FakeDiscovery:
    def __init__(self, documents: dict[str, Mapping[str, Any] | None]) -> None:
        self.documents = documents
        self.asked: list[str] = []

    async def __call__(self, path: str) -> Mapping[str, Any] | None:
        self.asked.append(path)
        await asyncio.sleep(0)
        return self.documents.get(path, {})


def info(path: str) -> Any:
    parsed = parse_path(path)
    assert parsed is not None
    return parsed


def test_served_in_reads_scope_and_verbs_and_skips_subresources() -> None:
    served = served_in(CORE)
    assert set(served) == {"pods"}
    assert served["pods"].namespaced and not served["pods"].virtual


def test_reviews_are_virtual_roles_are_stored_and_scope_comes_from_discovery() -> None:
    fake = FakeDiscovery(
        {"/apis/authorization.k8s.io/v1": AUTHORIZATION, "/apis/rbac.authorization.k8s.io/v1": RBAC}
    )
    resources = ApiResources(fake)

    async def go() -> list[Served]:
        return [
            await resources.lookup(info("/apis/authorization.k8s.io/v1/selfsubjectaccessreviews")),
            await resources.lookup(
                info("/apis/authorization.k8s.io/v1/namespaces/ns/localsubjectaccessreviews")
            ),
            await resources.lookup(info("/apis/rbac.authorization.k8s.io/v1/clusterroles")),
            await resources.lookup(info("/apis/rbac.authorization.k8s.io/v1/namespaces/n/roles")),
        ]

    review, local, cluster_role, role = asyncio.run(go())
    assert review.virtual and review.cluster_scoped
    assert local.virtual and local.namespaced
    assert not cluster_role.virtual and cluster_role.cluster_scoped
    assert not role.virtual and role.namespaced
    # one request per group version, kept
    assert fake.asked == ["/apis/authorization.k8s.io/v1", "/apis/rbac.authorization.k8s.io/v1"]


def test_concurrent_writes_of_one_group_version_ask_once() -> None:
    fake = FakeDiscovery({"/api/v1": CORE})
    resources = ApiResources(fake)

    async def go() -> list[Served]:
        return await asyncio.gather(
            *(resources.lookup(info("/api/v1/namespaces/ns/pods")) for _ in range(5))
        )

    assert all(s.namespaced for s in asyncio.run(go()))
    assert fake.asked == ["/api/v1"]


def test_a_resource_discovery_does_not_list_is_asked_again_later_and_decided_by_its_path() -> None:
    """A CRD installed since the group version was read: read again, at most every
    REFRESH_AFTER s; meanwhile (and when discovery cannot answer) the path decides."""
    now = [100.0]
    fake = FakeDiscovery({"/apis/x.io/v1": {"resources": []}})
    resources = ApiResources(fake, clock=lambda: now[0])
    late = info("/apis/x.io/v1/namespaces/ns/lates")

    assert asyncio.run(resources.lookup(late)) == from_path(late) == Served(namespaced=True)
    assert asyncio.run(resources.lookup(late)).namespaced
    assert fake.asked == ["/apis/x.io/v1"]  # not again within REFRESH_AFTER
    now[0] += 5
    fake.documents["/apis/x.io/v1"] = {
        "resources": [{"name": "lates", "namespaced": True, "verbs": ["create"]}]
    }
    assert asyncio.run(resources.lookup(late)).virtual
    assert fake.asked == ["/apis/x.io/v1", "/apis/x.io/v1"]


def test_when_discovery_cannot_answer_the_path_decides_and_it_is_asked_again() -> None:
    fake = FakeDiscovery({"/apis/rbac.authorization.k8s.io/v1": None})
    resources = ApiResources(fake)
    cluster_role = info("/apis/rbac.authorization.k8s.io/v1/clusterroles")
    served = asyncio.run(resources.lookup(cluster_role))
    assert served.cluster_scoped and not served.virtual
    fake.documents["/apis/rbac.authorization.k8s.io/v1"] = RBAC
    assert asyncio.run(resources.lookup(cluster_role)).cluster_scoped
    assert len(fake.asked) == 2  # an unanswered read is not kept


def test_the_kind_discovery_names_and_none_where_it_cannot_tell() -> None:
    resources = ApiResources(FakeDiscovery({"/api/v1": CORE}))
    pod = asyncio.run(resources.lookup(info("/api/v1/namespaces/ns/pods/p")))
    assert pod.kind == "Pod" and not pod.virtual
    assert from_path(info("/api/v1/namespaces/ns/pods/p")).kind == ""
