"""A write's dry run, answered without the API server (the preview's proxy, previewproxy.py).

A role in check mode writes with `?dryRun=All` (kubernetes.core's server-side dry run): the API
server would answer with the object as it would be, and store nothing. The preview answers
those requests itself, so that nothing but reads reaches the API server, from the object as it
is now (read) and the write's body:

- create (POST): the object of the body, in the path's namespace (409 when it exists);
- replace (PUT): the body, keeping what the server keeps (uid, resourceVersion, creation time,
  and `status` unless the status subresource is written; 409 on a stale resourceVersion);
- patch (PATCH): the patch applied (patching.py; strategic merge patches along the kind's
  OpenAPI schema, patchschema.py); server-side apply of an object that is not there creates it;
- delete (DELETE): the object, marked deleted when finalizers hold it; a collection's delete
  answers the objects it would remove;
- a subresource's create (an eviction, a token request) and a virtual resource's (a
  SelfSubjectAccessReview): the body, as sent.

What the API server would add beyond that (defaults of new fields, admission webhooks' changes,
its validation) is not there: docs/upgrading.md says what that means for a preview.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import urlencode

import yaml

from runner.dependents import patching
from runner.dependents.ownership import RequestInfo
from runner.dependents.patchschema import PatchSchemas

#: GET a path: (HTTP status, its JSON when 200).
Read = Callable[[str], Awaitable[tuple[int, dict[str, Any] | None]]]

_KEPT_META = ("uid", "creationTimestamp", "resourceVersion", "generation", "managedFields")
_VERBS = {"POST": "create", "PUT": "replace", "PATCH": "patch", "DELETE": "delete"}


@dataclass(frozen=True)
class Answer:
    """The answer to one write, and what the write would have done."""

    status: int
    body: dict[str, Any]
    verb: str  # create, replace, patch, delete, or the subresource's name

    @property
    def ok(self) -> bool:
        return 200 <= self.status < 300


def status_body(code: int, reason: str, message: str) -> dict[str, Any]:
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }


_REASONS = {404: "NotFound", 409: "Conflict", 415: "UnsupportedMediaType", 422: "Invalid"}


def _failure(code: int, message: str, verb: str) -> Answer:
    return Answer(code, status_body(code, _REASONS.get(code, "BadRequest"), message), verb)


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _describe(info: RequestInfo, name: str = "") -> str:
    where = "/".join(p for p in (info.namespace, name or info.name) if p)
    return f'{info.plural} "{where}"' if where else info.plural


class DryRun:
    """Answers dry-run writes from what `read` says of the objects now (module doc)."""

    def __init__(self, read: Read, schemas: PatchSchemas) -> None:
        self._read = read
        self._schemas = schemas

    async def answer(
        self,
        method: str,
        info: RequestInfo,
        body: Any,
        content_type: str,
        query: Mapping[str, str],
        virtual: bool = False,
    ) -> Answer:
        verb = _VERBS.get(method, method.lower())
        if info.subresource and info.subresource != "status" and method == "POST":
            return Answer(201, body if isinstance(body, dict) else {}, info.subresource)
        if virtual:
            return Answer(201, body if isinstance(body, dict) else {}, verb)
        if method == "POST":
            return await self._create(info, body)
        if method == "DELETE":
            if not info.name:
                return await self._delete_collection(info, query)
            return await self._delete(info)
        status, current = await self._read(info.path(info.name))
        if status == 404 or current is None:
            if (
                method == "PATCH"
                and content_type == patching.APPLY_PATCH
                and isinstance(body, dict)
            ):
                return await self._create(info, body)
            return _failure(404, f"{_describe(info)} not found", verb)
        if method == "PUT":
            return self._replace(info, current, body)
        return await self._patch(info, current, body, content_type)

    async def _create(self, info: RequestInfo, body: Any) -> Answer:
        if not isinstance(body, dict):
            return _failure(422, "the body of a create is not an object", "create")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if info.namespace:
            meta["namespace"] = info.namespace
        name = meta.get("name") or info.name
        if not name and meta.get("generateName"):
            name = f"{meta['generateName']}xxxxx"  # the server's five random characters
        if not name:
            return _failure(
                422, "metadata.name: Required value: name or generateName is required", "create"
            )
        meta["name"] = name
        status, _ = await self._read(info.path(name))
        if status == 200:
            return Answer(
                409,
                status_body(409, "AlreadyExists", f"{_describe(info, name)} already exists"),
                "create",
            )
        meta.setdefault("creationTimestamp", _now())
        return Answer(201, obj, "create")

    def _replace(self, info: RequestInfo, current: dict[str, Any], body: Any) -> Answer:
        if not isinstance(body, dict):
            return _failure(422, "the body of a replace is not an object", "replace")
        now_meta = current.get("metadata") or {}
        asked = (body.get("metadata") or {}).get("resourceVersion")
        if asked and asked != now_meta.get("resourceVersion"):
            return _failure(409, _stale(info), "replace")
        if info.subresource == "status":
            obj = copy.deepcopy(current)
            obj["status"] = copy.deepcopy(body.get("status"))
            return Answer(200, obj, "replace")
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        for key in _KEPT_META:
            if key in now_meta:
                meta[key] = copy.deepcopy(now_meta[key])
        if "status" in current:
            obj["status"] = copy.deepcopy(current["status"])
        return Answer(200, obj, "replace")

    async def _patch(
        self, info: RequestInfo, current: dict[str, Any], body: Any, content_type: str
    ) -> Answer:
        asked = ((body.get("metadata") or {}) if isinstance(body, dict) else {}).get(
            "resourceVersion"
        )
        if asked and asked != (current.get("metadata") or {}).get("resourceVersion"):
            return _failure(409, _stale(info), "patch")
        gv = str(current.get("apiVersion") or info.api_version)
        group, _, version = gv.rpartition("/")
        schema = await self._schemas.kind(group, version, str(current.get("kind") or ""))
        done = patching.apply_patch(current, body, content_type, schema.shape, schema.built_in)
        if done.error:
            return _failure(done.status, done.error, "patch")
        obj = done.obj
        if info.subresource == "status":
            kept = copy.deepcopy(current)
            kept["status"] = obj.get("status")
            obj = kept
        elif "status" in current:
            obj["status"] = copy.deepcopy(current["status"])
        obj["metadata"] = {**(obj.get("metadata") or {}), **_kept(current)}
        return Answer(200, obj, "patch")

    async def _delete(self, info: RequestInfo) -> Answer:
        status, current = await self._read(info.path(info.name))
        if status == 404 or current is None:
            return _failure(404, f"{_describe(info)} not found", "delete")
        obj = copy.deepcopy(current)
        meta = obj.setdefault("metadata", {})
        if meta.get("finalizers"):
            meta.setdefault("deletionTimestamp", _now())
            meta.setdefault("deletionGracePeriodSeconds", 0)
            return Answer(200, obj, "delete")
        details = {"name": info.name, "kind": info.plural, "uid": meta.get("uid", "")}
        body = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success"}
        return Answer(200, {**body, "details": details}, "delete")

    async def _delete_collection(self, info: RequestInfo, query: Mapping[str, str]) -> Answer:
        selectors = {k: v for k, v in query.items() if k in ("labelSelector", "fieldSelector")}
        path = info.path()
        if selectors:
            path += "?" + urlencode(selectors)
        status, listing = await self._read(path)
        if status != 200 or listing is None:
            return _failure(
                status if status >= 400 else 500, f"cannot list {info.plural}", "delete"
            )
        return Answer(200, listing, "delete")


def _kept(current: dict[str, Any]) -> dict[str, Any]:
    meta = current.get("metadata") or {}
    return {k: copy.deepcopy(meta[k]) for k in _KEPT_META if k in meta}


def _stale(info: RequestInfo) -> str:
    return (
        f"Operation cannot be fulfilled on {_describe(info)}: the object has been modified; "
        "please apply your changes to the latest version and try again"
    )


def parse_body(raw: bytes, content_type: str) -> Any:
    """A write's body: JSON, or YAML for server-side apply; None when it is neither."""
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        pass
    if content_type != patching.APPLY_PATCH:
        return None
    try:
        return yaml.safe_load(raw)
    except yaml.YAMLError:
        return None
