"""AdmissionReview (admission.k8s.io/v1) in and out, as plain values (pure).

The request as the API server sends it (`AdmissionRequest.read`), and the response it expects
(`answer`): the review's apiVersion and kind, the request's uid, `allowed`, a `status` with the
code and message of a denial, `warnings`, and for a change a base64 JSON Patch.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

REVIEW_VERSION = "admission.k8s.io/v1"


class ReviewError(ValueError):
    """Not an AdmissionReview this webhook can answer."""


@dataclass(frozen=True)
class AdmissionRequest:
    """What the API server asks (its field names in snake_case)."""

    uid: str
    operation: str  # CREATE, UPDATE, DELETE, CONNECT
    kind: Mapping[str, str]  # {group, version, kind}
    resource: Mapping[str, str]  # {group, version, resource}
    name: str
    namespace: str
    user_info: Mapping[str, Any]
    object: dict[str, Any] | None
    old_object: dict[str, Any] | None
    dry_run: bool
    sub_resource: str = ""
    request_kind: Mapping[str, str] = field(default_factory=dict)
    request_resource: Mapping[str, str] = field(default_factory=dict)
    options: Mapping[str, Any] | None = None
    api_version: str = REVIEW_VERSION

    @classmethod
    def read(cls, review: Mapping[str, Any]) -> AdmissionRequest:
        request = review.get("request")
        if review.get("kind") != "AdmissionReview" or not isinstance(request, Mapping):
            raise ReviewError("not an AdmissionReview with a request")
        uid = request.get("uid")
        if not isinstance(uid, str) or not uid:
            raise ReviewError("the AdmissionReview's request has no uid")

        def mapping(key: str) -> dict[str, Any]:
            value = request.get(key)
            return dict(value) if isinstance(value, Mapping) else {}

        obj, old = request.get("object"), request.get("oldObject")
        return cls(
            uid=uid,
            operation=str(request.get("operation") or ""),
            kind=mapping("kind"),
            resource=mapping("resource"),
            name=str(request.get("name") or ""),
            namespace=str(request.get("namespace") or ""),
            user_info=mapping("userInfo"),
            object=dict(obj) if isinstance(obj, Mapping) else None,
            old_object=dict(old) if isinstance(old, Mapping) else None,
            dry_run=bool(request.get("dryRun")),
            sub_resource=str(request.get("subResource") or ""),
            request_kind=mapping("requestKind"),
            request_resource=mapping("requestResource"),
            options=mapping("options") or None,
            api_version=str(review.get("apiVersion") or REVIEW_VERSION),
        )

    @property
    def subject(self) -> dict[str, Any]:
        """The object the request is about: the new one, or on DELETE the old one."""
        return self.object or self.old_object or {}

    def only_finalizers(self) -> bool:
        """An UPDATE that changes nothing but metadata.finalizers (and what the API server keeps
        itself: resourceVersion, managedFields, generation): finalizer bookkeeping, the
        operator's own, which no role has to judge."""
        if self.operation != "UPDATE" or self.object is None or self.old_object is None:
            return False
        bookkeeping = {"finalizers", "resourceVersion", "managedFields", "generation"}

        def rest(obj: Mapping[str, Any]) -> dict[str, Any]:
            meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in bookkeeping}
            return {**{k: v for k, v in obj.items() if k not in ("metadata", "status")}, "m": meta}

        return rest(self.object) == rest(self.old_object)

    def describe(self) -> str:
        """`Kind namespace/name` for messages (a generateName as `prefix*`)."""
        meta = self.subject.get("metadata") or {}
        name = self.name or meta.get("name") or (f"{meta.get('generateName', '')}*")
        where = f"{self.namespace}/{name}" if self.namespace else name
        return f"{self.kind.get('kind', 'object')} {where}"


@dataclass(frozen=True)
class Verdict:
    """The answer: allowed or not (with a message), warnings, and a JSON Patch to apply."""

    allowed: bool
    message: str = ""
    warnings: tuple[str, ...] = ()
    patch: Sequence[Mapping[str, Any]] = ()
    code: int = 403


def answer(request: AdmissionRequest, verdict: Verdict) -> dict[str, Any]:
    """The AdmissionReview that answers `request`."""
    response: dict[str, Any] = {"uid": request.uid, "allowed": verdict.allowed}
    if not verdict.allowed:
        response["status"] = {
            "code": verdict.code,
            "message": verdict.message,
            "reason": "Forbidden" if verdict.code == 403 else "BadRequest",
        }
    if verdict.warnings:
        response["warnings"] = list(verdict.warnings)
    if verdict.allowed and verdict.patch:
        response["patchType"] = "JSONPatch"
        response["patch"] = base64.b64encode(json.dumps(list(verdict.patch)).encode()).decode()
    return {"apiVersion": request.api_version, "kind": "AdmissionReview", "response": response}
