"""How a kind's fields merge, from the API server's OpenAPI v3 documents (read, then kept).

A strategic merge patch merges a list by the key its schema names
(`x-kubernetes-patch-merge-key`, with `x-kubernetes-patch-strategy: merge`), server-side apply
by `x-kubernetes-list-type: map` and `x-kubernetes-list-map-keys`; patching.py applies them
along a `SchemaShape`. Built-in kinds (their schemas are named `io.k8s.*`) take strategic merge
patches; custom resources do not (the API server answers 415, and kubernetes.core then sends a
merge patch).

`/openapi/v3` lists a document per group version (`apis/apps/v1`), each read once when a write
of that group version is first answered. When the server cannot say (no OpenAPI, or not
allowed), the group decides: the core group and the groups that ship with Kubernetes are
built-in, and every list is replaced whole.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.dependents.patching import Plain, Shape

log = logging.getLogger("runner.proxy")

#: GET a path of the API server: its JSON, {} when not served, None when it could not be read.
Fetch = Callable[[str], Awaitable[Mapping[str, Any] | None]]

#: The API groups Kubernetes itself serves (their kinds take strategic merge patches), when
#: the OpenAPI documents cannot say.
BUILT_IN_GROUPS = frozenset(
    {
        "",
        "apps",
        "batch",
        "autoscaling",
        "policy",
        "extensions",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "internal.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
        "storagemigration.k8s.io",
    }
)


@dataclass(frozen=True)
class SchemaShape:
    """One field of a kind's OpenAPI schema (patching.Shape)."""

    schemas: Mapping[str, Any]
    node: Mapping[str, Any]

    def _resolved(self) -> Mapping[str, Any]:
        node: Mapping[str, Any] = self.node
        for _ in range(8):  # $ref, or v3's allOf: [{$ref}]
            ref = node.get("$ref")
            if ref is None and isinstance(node.get("allOf"), list) and node["allOf"]:
                ref = node["allOf"][0].get("$ref") if isinstance(node["allOf"][0], dict) else None
            if not isinstance(ref, str):
                return node
            target = self.schemas.get(ref.rsplit("/", 1)[-1])
            if not isinstance(target, Mapping):
                return node
            node = target
        return node

    def _extension(self, name: str) -> Any:
        if name in self.node:
            return self.node[name]
        return self._resolved().get(name)

    def child(self, key: str) -> Shape:
        node = self._resolved()
        properties = node.get("properties")
        if isinstance(properties, Mapping) and isinstance(properties.get(key), Mapping):
            return SchemaShape(self.schemas, properties[key])
        extra = node.get("additionalProperties")
        if isinstance(extra, Mapping):
            return SchemaShape(self.schemas, extra)
        return Plain()

    def items(self) -> Shape:
        items = self._resolved().get("items")
        return SchemaShape(self.schemas, items) if isinstance(items, Mapping) else Plain()

    def merge_key(self) -> str | None:
        key = self._extension("x-kubernetes-patch-merge-key")
        return str(key) if key else None

    def merges(self) -> bool:
        strategy = str(self._extension("x-kubernetes-patch-strategy") or "")
        return "merge" in strategy.split(",")

    def list_keys(self) -> tuple[str, ...]:
        keys = self._extension("x-kubernetes-list-map-keys")
        return tuple(str(k) for k in keys) if isinstance(keys, list) else ()

    def list_type(self) -> str:
        return str(self._extension("x-kubernetes-list-type") or "atomic")


@dataclass(frozen=True)
class KindSchema:
    """A kind's shape, and whether it takes strategic merge patches."""

    shape: Shape
    built_in: bool


def find_kind(
    document: Mapping[str, Any], group: str, version: str, kind: str
) -> KindSchema | None:
    """The schema of `kind` in a group version's OpenAPI v3 document."""
    schemas = (document.get("components") or {}).get("schemas") or {}
    for name, schema in schemas.items():
        if not isinstance(schema, Mapping):
            continue
        for gvk in schema.get("x-kubernetes-group-version-kind") or ():
            if (
                isinstance(gvk, Mapping)
                and gvk.get("group", "") == group
                and gvk.get("version") == version
                and gvk.get("kind") == kind
            ):
                return KindSchema(SchemaShape(schemas, schema), str(name).startswith("io.k8s."))
    return None


def guessed(group: str) -> KindSchema:
    """When no schema can be read: built-in by group, lists replaced whole."""
    return KindSchema(Plain(), group in BUILT_IN_GROUPS)


class PatchSchemas:
    """The OpenAPI v3 documents of the group versions written, read once and kept."""

    def __init__(self, fetch: Fetch) -> None:
        self._fetch = fetch
        self._index: Mapping[str, Any] | None = None
        self._documents: dict[str, Mapping[str, Any]] = {}
        self._lock = asyncio.Lock()

    async def kind(self, group: str, version: str, kind: str) -> KindSchema:
        path = f"apis/{group}/{version}" if group else f"api/{version}"
        async with self._lock:  # one reading at a time; the documents are big
            document = await self._document(path)
        found = find_kind(document, group, version, kind) if document else None
        if found is None:
            log.debug(
                "no OpenAPI schema of %s %s/%s: lists are replaced whole", kind, group, version
            )
            return guessed(group)
        return found

    async def _document(self, path: str) -> Mapping[str, Any] | None:
        if path in self._documents:
            return self._documents[path]
        if self._index is None:
            self._index = await self._fetch("/openapi/v3")
            if self._index is None:
                return None  # asked again next time
        entry = (self._index.get("paths") or {}).get(path) or {}
        url = entry.get("serverRelativeURL") if isinstance(entry, Mapping) else None
        if not isinstance(url, str):
            self._documents[path] = {}
            return None
        document = await self._fetch(url)
        if document is None:
            return None
        self._documents[path] = document
        return document
