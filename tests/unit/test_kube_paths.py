"""runner.kube.paths: the one builder of API paths, and the request builders that use it."""

from __future__ import annotations

from runner.dependents.ownership import RequestInfo, parse_path
from runner.kube import client as kube
from runner.kube.paths import api_version, resource_path
from runner.kube.resources import ObjectRef, Resource


def test_api_version() -> None:
    assert api_version("", "v1") == "v1"
    assert api_version("apps", "v1") == "apps/v1"


def test_core_and_group_paths() -> None:
    assert resource_path("", "v1", "pods") == "/api/v1/pods"
    assert resource_path("", "v1", "pods", "ns", "p") == "/api/v1/namespaces/ns/pods/p"
    assert resource_path("apps", "v1", "deployments", "") == "/apis/apps/v1/deployments"
    assert (
        resource_path("x.io", "v1", "echos", "ns", "e", "status")
        == "/apis/x.io/v1/namespaces/ns/echos/e/status"
    )


def test_names_are_quoted() -> None:
    assert (
        resource_path("", "v1", "pods", "n s", "a/b?c") == "/api/v1/namespaces/n%20s/pods/a%2Fb%3Fc"
    )


def test_cluster_scoped_resources_ignore_the_namespace() -> None:
    nodes = Resource("", "v1", "nodes", "Node", namespaced=False)
    assert kube.get_object(ObjectRef(nodes, "ns", "n1")).path == "/api/v1/nodes/n1"


def test_status_and_leases_and_events() -> None:
    echo = Resource("x.io", "v1", "echos", "Echo")
    ref = ObjectRef(echo, "ns", "e")
    assert kube.patch_status(ref, {}).path == "/apis/x.io/v1/namespaces/ns/echos/e/status"
    assert kube.lease_path("ops", "op") == "/apis/coordination.k8s.io/v1/namespaces/ops/leases/op"
    assert kube.create_event("ns", {}).path == "/api/v1/namespaces/ns/events"


def test_a_status_write_may_name_its_field_manager() -> None:
    ref = ObjectRef(Resource("x.io", "v1", "echos", "Echo"), "ns", "e")
    assert kube.patch_status(ref, {}).url_path == "/apis/x.io/v1/namespaces/ns/echos/e/status"
    named = kube.patch_status(ref, {}, "operator-runner/ansible-core-2.18")
    assert named.url_path.endswith("/status?fieldManager=operator-runner%2Fansible-core-2.18")


def test_a_page_of_a_collection() -> None:
    echo = Resource("x.io", "v1", "echos", "Echo")
    first = kube.list_objects(echo, "ns", "a=b")
    assert first.url_path == "/apis/x.io/v1/namespaces/ns/echos?limit=500&labelSelector=a%3Db"
    assert (
        kube.list_objects(echo, None, cont="t").url_path
        == "/apis/x.io/v1/echos?limit=500&continue=t"
    )


def test_a_parsed_path_builds_back() -> None:
    for path in ("/apis/apps/v1/namespaces/ns/deployments/web", "/api/v1/namespaces/ns/pods/p"):
        info = parse_path(path)
        assert isinstance(info, RequestInfo)
        assert info.path(info.name) == path


def test_discovery_finds_a_kind_and_its_names() -> None:
    from runner.kube.resources import find_resource

    assert kube.get_api_resources("", "v1").path == "/api/v1"
    assert kube.get_api_resources("swallowlab.com", "v1alpha1").path == (
        "/apis/swallowlab.com/v1alpha1"
    )
    listing = {
        "resources": [
            {"name": "echoflasks/status", "kind": "EchoFlask", "namespaced": True},
            {
                "name": "echoflasks",
                "singularName": "echoflask",
                "kind": "EchoFlask",
                "namespaced": True,
                "shortNames": ["ef"],
            },
        ]
    }
    found = find_resource(listing, "swallowlab.com", "v1alpha1", "EchoFlask")
    assert found is not None
    resource, names = found
    assert resource == Resource("swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask", True)
    assert names == ("echoflasks", "echoflask", "ef")
    assert find_resource(listing, "swallowlab.com", "v1alpha1", "Echo") is None
