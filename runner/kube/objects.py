"""Requests on any object of a known resource, and the resources the webhooks use.

The generic side of client.py's builders (pure, sent by a `KubeClient`): GET, create, replace,
merge patch, delete of one object; and the kinds the webhooks and their certificates touch:
Secrets (the CA), the Validating/MutatingWebhookConfigurations and the CRDs (their caBundle),
the SelfSubjectReview that tells the operator who it is (so its own writes skip its
webhooks), and the SelfSubjectAccessReview that tells it what it may do (optional permissions:
listing CRDs).
"""

from __future__ import annotations

from typing import Any

from runner.kube.client import MERGE_PATCH, Request, object_path
from runner.kube.paths import resource_path
from runner.kube.resources import ObjectRef, Resource

JSON = dict[str, Any]

SECRETS = Resource("", "v1", "secrets", "Secret")
VALIDATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "validatingwebhookconfigurations",
    "ValidatingWebhookConfiguration",
    namespaced=False,
)
MUTATING_WEBHOOK_CONFIGURATIONS = Resource(
    "admissionregistration.k8s.io",
    "v1",
    "mutatingwebhookconfigurations",
    "MutatingWebhookConfiguration",
    namespaced=False,
)
CUSTOM_RESOURCE_DEFINITIONS = Resource(
    "apiextensions.k8s.io",
    "v1",
    "customresourcedefinitions",
    "CustomResourceDefinition",
    namespaced=False,
)


def ref(resource: Resource, namespace: str | None, name: str) -> ObjectRef:
    return ObjectRef(resource, namespace if resource.namespaced else None, name)


def get(target: ObjectRef) -> Request:
    return Request("GET", object_path(target.resource, target.namespace, target.name))


def create(resource: Resource, namespace: str | None, body: JSON) -> Request:
    """POST to the collection (409 when the name is taken)."""
    return Request("POST", object_path(resource, namespace), body=body)


def replace(target: ObjectRef, body: JSON) -> Request:
    """PUT; the body's metadata.resourceVersion makes it a 409 when the object moved on."""
    return Request("PUT", object_path(target.resource, target.namespace, target.name), body=body)


def merge_patch(target: ObjectRef, patch: JSON) -> Request:
    """RFC 7386 merge patch (a metadata.resourceVersion in it is a precondition: 409)."""
    return Request(
        "PATCH",
        object_path(target.resource, target.namespace, target.name),
        body=patch,
        content_type=MERGE_PATCH,
    )


def delete(target: ObjectRef) -> Request:
    return Request("DELETE", object_path(target.resource, target.namespace, target.name))


def self_subject_review() -> Request:
    """Who the operator's credentials are (authentication.k8s.io/v1, Kubernetes 1.28+):
    the answer's status.userInfo.username."""
    body = {"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"}
    return Request(
        "POST", resource_path("authentication.k8s.io", "v1", "selfsubjectreviews"), body=body
    )


def self_subject_access_review(resource: Resource, verb: str, namespace: str = "") -> Request:
    """May the operator's credentials do `verb` on `resource` (in `namespace`; "" = in every
    namespace, or cluster-scoped): the answer's status.allowed (authorization.k8s.io/v1)."""
    attributes = {"group": resource.group, "resource": resource.plural, "verb": verb}
    if namespace:
        attributes["namespace"] = namespace
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": attributes},
    }
    return Request(
        "POST", resource_path("authorization.k8s.io", "v1", "selfsubjectaccessreviews"), body=body
    )
