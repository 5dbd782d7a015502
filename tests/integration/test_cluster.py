"""The local cluster is a real one: each test here fails against a fake API server."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from .conftest import Cluster
from .kit import wait_for

pytestmark = pytest.mark.integration


@pytest.fixture
def api(cluster: Cluster) -> Iterator[client.ApiClient]:
    with cluster.api_client() as c:
        yield c


def test_nodes_are_ready(api: client.ApiClient) -> None:
    nodes = client.CoreV1Api(api).list_node().items
    ready = [
        n.metadata.name
        for n in nodes
        if any(c.type == "Ready" and c.status == "True" for c in n.status.conditions or [])
    ]
    assert len(ready) >= 2, f"Ready nodes: {ready}"


def _deployment(name: str, replicas: int) -> dict[str, object]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {"containers": [{"name": "web", "image": "takeyan/flask:0.0.3"}]},
            },
        },
    }


def test_deployment_gets_running_pods_and_is_garbage_collected(
    api: client.ApiClient, namespace: str
) -> None:
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    apps.create_namespaced_deployment(namespace, _deployment("web", 3))

    def running_pods() -> list[client.V1Pod] | None:
        pods = core.list_namespaced_pod(namespace, label_selector="app=web").items
        running = [p for p in pods if p.status.phase == "Running" and p.status.pod_ip]
        return running if len(running) == 3 else None

    pods = wait_for(running_pods, timeout=60, what="3 Running Pods with IPs")
    assert len({p.status.pod_ip for p in pods}) == 3
    assert all(p.spec.node_name for p in pods), "the scheduler placed every Pod on a Node"
    replica_sets = apps.list_namespaced_replica_set(namespace, label_selector="app=web").items
    assert len(replica_sets) == 1

    apps.delete_namespaced_deployment("web", namespace)
    wait_for(
        lambda: (
            not apps.list_namespaced_replica_set(namespace, label_selector="app=web").items
            and not core.list_namespaced_pod(namespace, label_selector="app=web").items
        ),
        timeout=60,
        what="the garbage collector to remove the ReplicaSet and its Pods",
    )


def test_nodeport_service_gets_a_node_port(api: client.ApiClient, namespace: str) -> None:
    svc = client.CoreV1Api(api).create_namespaced_service(
        namespace,
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web"},
            "spec": {
                "type": "NodePort",
                "selector": {"app": "web"},
                "ports": [{"port": 5000, "targetPort": 5000}],
            },
        },
    )
    node_port = svc.spec.ports[0].node_port
    assert 30000 <= node_port <= 32767
    assert svc.spec.cluster_ip


def test_service_account_without_binding_is_forbidden(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    client.CoreV1Api(api).create_namespaced_service_account(
        namespace, {"metadata": {"name": "nobody"}}
    )
    token = (
        client.CoreV1Api(api)
        .create_namespaced_service_account_token(
            "nobody", namespace, {"spec": {"expirationSeconds": 600}}
        )
        .status.token
    )
    configuration = client.Configuration()
    configuration.host = api.configuration.host
    configuration.ssl_ca_cert = api.configuration.ssl_ca_cert
    configuration.verify_ssl = api.configuration.verify_ssl
    configuration.api_key = {"authorization": f"Bearer {token}"}
    with client.ApiClient(configuration) as as_nobody, pytest.raises(ApiException) as err:
        client.CoreV1Api(as_nobody).list_namespaced_pod(namespace)
    assert err.value.status == 403, err.value.body
    message = json.loads(err.value.body)["message"]
    assert 'cannot list resource "pods"' in message, message


def test_crd_structural_schema_rejects_invalid_object(
    cluster: Cluster, api: client.ApiClient, namespace: str
) -> None:
    group = f"t{uuid.uuid4().hex[:6]}.example.com"
    crd = {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"widgets.{group}"},
        "spec": {
            "group": group,
            "scope": "Namespaced",
            "names": {"plural": "widgets", "singular": "widget", "kind": "Widget"},
            "versions": [
                {
                    "name": "v1",
                    "served": True,
                    "storage": True,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "properties": {
                                "spec": {
                                    "type": "object",
                                    "required": ["size"],
                                    "properties": {"size": {"type": "integer", "minimum": 0}},
                                }
                            },
                        }
                    },
                }
            ],
        },
    }
    ext = client.ApiextensionsV1Api(api)
    ext.create_custom_resource_definition(crd)
    try:
        wait_for(
            lambda: any(
                c.type == "Established" and c.status == "True"
                for c in ext.read_custom_resource_definition(
                    crd["metadata"]["name"]
                ).status.conditions
                or []
            ),  # type: ignore[index]
            timeout=30,
            what="the CRD to be Established",
        )
        custom = client.CustomObjectsApi(api)
        body = {
            "apiVersion": f"{group}/v1",
            "kind": "Widget",
            "metadata": {"name": "w"},
            "spec": {"size": -1},
        }
        with pytest.raises(ApiException) as err:
            custom.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)
        assert err.value.status == 422
        assert "spec.size" in err.value.body
        body["spec"] = {"size": 2}
        custom.create_namespaced_custom_object(group, "v1", namespace, "widgets", body)
    finally:
        ext.delete_custom_resource_definition(crd["metadata"]["name"])  # type: ignore[index]
