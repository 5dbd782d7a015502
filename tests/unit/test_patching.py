"""The API server's patches, applied by the preview's proxy (runner/dependents/patching.py), and
the kinds' merge rules from OpenAPI v3 documents (patchschema.py)."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import pytest

from runner.dependents import patching
from runner.dependents.patching import (
    APPLY_PATCH,
    JSON_PATCH,
    MERGE_PATCH,
    STRATEGIC_MERGE_PATCH,
    Plain,
    apply_patch,
    json_patch,
    merge_patch,
)
from runner.dependents.patchschema import PatchSchemas, find_kind

REF = "#/components/schemas/"
# A slice of kube-apiserver's /openapi/v3/apis/apps/v1, as it writes it (v3: $ref in allOf).
APPS_V1: dict[str, Any] = {
    "components": {
        "schemas": {
            "io.k8s.api.apps.v1.Deployment": {
                "properties": {
                    "metadata": {"allOf": [{"$ref": REF + "io.k8s.meta.ObjectMeta"}]},
                    "spec": {"allOf": [{"$ref": REF + "io.k8s.api.apps.v1.DeploymentSpec"}]},
                },
                "x-kubernetes-group-version-kind": [
                    {"group": "apps", "kind": "Deployment", "version": "v1"}
                ],
            },
            "io.k8s.api.apps.v1.DeploymentSpec": {
                "properties": {
                    "replicas": {"type": "integer"},
                    "template": {"allOf": [{"$ref": REF + "io.k8s.api.core.v1.PodTemplateSpec"}]},
                }
            },
            "io.k8s.api.core.v1.PodTemplateSpec": {
                "properties": {"spec": {"allOf": [{"$ref": REF + "io.k8s.api.core.v1.PodSpec"}]}}
            },
            "io.k8s.api.core.v1.PodSpec": {
                "properties": {
                    "containers": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": REF + "io.k8s.api.core.v1.Container"}]},
                        "x-kubernetes-list-map-keys": ["name"],
                        "x-kubernetes-list-type": "map",
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge",
                    },
                    "tolerations": {"type": "array", "items": {"type": "object"}},
                }
            },
            "io.k8s.api.core.v1.Container": {
                "properties": {
                    "image": {"type": "string"},
                    "args": {"type": "array", "items": {"type": "string"}},
                    "env": {
                        "type": "array",
                        "items": {"allOf": [{"$ref": REF + "io.k8s.api.core.v1.EnvVar"}]},
                        "x-kubernetes-patch-merge-key": "name",
                        "x-kubernetes-patch-strategy": "merge",
                    },
                }
            },
            "io.k8s.api.core.v1.EnvVar": {"properties": {"name": {}, "value": {}}},
            "io.k8s.meta.ObjectMeta": {
                "properties": {
                    "labels": {"type": "object", "additionalProperties": {"type": "string"}},
                    "finalizers": {
                        "type": "array",
                        "items": {"type": "string"},
                        "x-kubernetes-list-type": "set",
                        "x-kubernetes-patch-strategy": "merge",
                    },
                }
            },
        }
    }
}


def deployment_shape() -> patching.Shape:
    found = find_kind(APPS_V1, "apps", "v1", "Deployment")
    assert found is not None and found.built_in
    return found.shape


def deployment(**container: Any) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "resourceVersion": "7", "finalizers": ["a"]},
        "spec": {
            "replicas": 2,
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "web",
                            "image": "nginx:1",
                            "terminationMessagePath": "/dev/termination-log",  # a default
                            "env": [{"name": "A", "value": "1"}, {"name": "B", "value": "2"}],
                            **container,
                        },
                        {"name": "sidecar", "image": "busybox"},
                    ],
                    "tolerations": [{"key": "x"}],
                }
            },
        },
    }


def test_a_merge_patch_merges_mappings_replaces_lists_and_removes_nulls() -> None:
    target = {"a": {"b": 1, "c": 2}, "l": [1, 2], "gone": 1}
    patched = merge_patch(target, {"a": {"b": 3}, "l": [3], "gone": None, "new": {"x": None}})
    assert patched == {"a": {"b": 3, "c": 2}, "l": [3], "new": {}}
    assert target["gone"] == 1, "the target is left as it was"


def test_a_json_patch_applies_each_operation_and_a_failed_test_is_a_conflict() -> None:
    doc = {"metadata": {"labels": {"a": "1"}}, "items": [1, 2]}
    ops = [
        {"op": "add", "path": "/metadata/labels/b~1c", "value": "2"},
        {"op": "replace", "path": "/items/0", "value": 9},
        {"op": "add", "path": "/items/-", "value": 3},
        {"op": "remove", "path": "/metadata/labels/a"},
        {"op": "copy", "from": "/items/1", "path": "/copied"},
        {"op": "move", "from": "/copied", "path": "/moved"},
    ]
    assert json_patch(doc, ops) == {
        "metadata": {"labels": {"b/c": "2"}},
        "items": [9, 2, 3],
        "moved": 2,
    }
    failed = apply_patch(
        doc, [{"op": "test", "path": "/items/0", "value": 5}], JSON_PATCH, Plain(), True
    )
    assert failed.status == 409 and "test" in failed.error
    missing = apply_patch(doc, [{"op": "remove", "path": "/nope"}], JSON_PATCH, Plain(), True)
    assert missing.status == 422


def test_a_strategic_merge_patch_of_the_same_definition_changes_nothing() -> None:
    """kubernetes.core patches an existing object with the role's whole definition: the
    server's defaults (terminationMessagePath) and the other containers stay, so an unchanged
    definition leaves the object as it is (the preview says `unchanged`)."""
    live = deployment()
    definition = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web"},
        "spec": {
            "replicas": 2,
            "template": {"spec": {"containers": [{"name": "web", "image": "nginx:1"}]}},
        },
    }
    done = apply_patch(live, definition, STRATEGIC_MERGE_PATCH, deployment_shape(), True)
    assert done.obj == live


def test_a_strategic_merge_patch_merges_lists_by_their_key() -> None:
    patch = {
        "metadata": {"finalizers": ["b"]},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {"name": "web", "image": "nginx:2", "env": [{"name": "B", "value": "3"}]},
                        {"name": "sidecar", "$patch": "delete"},
                        {"name": "new", "image": "x"},
                    ],
                    "tolerations": [{"key": "y"}],
                }
            }
        },
    }
    obj = apply_patch(deployment(), patch, STRATEGIC_MERGE_PATCH, deployment_shape(), True).obj
    assert obj["metadata"]["finalizers"] == ["a", "b"], "a set: merged"
    pod = obj["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["containers"]] == ["web", "new"]
    web = pod["containers"][0]
    assert web["image"] == "nginx:2" and web["terminationMessagePath"] == "/dev/termination-log"
    assert web["env"] == [{"name": "A", "value": "1"}, {"name": "B", "value": "3"}]
    assert pod["tolerations"] == [{"key": "y"}], "no merge strategy: replaced"


def test_a_custom_resource_takes_no_strategic_merge_patch() -> None:
    done = apply_patch({"spec": {}}, {"spec": {"a": 1}}, STRATEGIC_MERGE_PATCH, Plain(), False)
    assert done.status == 415 and MERGE_PATCH in done.error
    assert apply_patch({"spec": {}}, {"spec": {"a": 1}}, MERGE_PATCH, Plain(), False).obj == {
        "spec": {"a": 1}
    }


def test_server_side_apply_merges_map_lists_by_their_keys() -> None:
    applied = {"spec": {"template": {"spec": {"containers": [{"name": "web", "image": "v3"}]}}}}
    obj = apply_patch(deployment(), applied, APPLY_PATCH, deployment_shape(), True).obj
    containers = obj["spec"]["template"]["spec"]["containers"]
    assert [(c["name"], c["image"]) for c in containers] == [("web", "v3"), ("sidecar", "busybox")]


def test_the_schemas_are_read_once_per_group_version_and_guessed_without_them() -> None:
    reads: list[str] = []

    async def fetch(path: str) -> Mapping[str, Any] | None:
        reads.append(path)
        if path == "/openapi/v3":
            return {
                "paths": {"apis/apps/v1": {"serverRelativeURL": "/openapi/v3/apis/apps/v1?hash=1"}}
            }
        return APPS_V1 if path.startswith("/openapi/v3/apis/apps/v1") else {}

    async def go() -> None:
        schemas = PatchSchemas(fetch)
        first = await schemas.kind("apps", "v1", "Deployment")
        again = await schemas.kind("apps", "v1", "Deployment")
        assert first.built_in and again.built_in
        assert (
            first.shape.child("spec")
            .child("template")
            .child("spec")
            .child("containers")
            .merge_key()
            == "name"
        )
        custom = await schemas.kind("example.com", "v1", "Thing")
        assert not custom.built_in, "not in the index: a custom resource's group"
        core = await schemas.kind("", "v1", "ConfigMap")
        assert core.built_in, "the core group, even when its document cannot be read"

    asyncio.run(go())
    assert reads == ["/openapi/v3", "/openapi/v3/apis/apps/v1?hash=1"]


@pytest.mark.parametrize("group", ["apps", "", "networking.k8s.io"])
def test_built_in_groups_are_known_without_openapi(group: str) -> None:
    from runner.dependents.patchschema import guessed

    assert guessed(group).built_in
    assert not guessed("gateway.networking.k8s.io").built_in
