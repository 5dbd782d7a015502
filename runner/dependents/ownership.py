"""Owner references and primary-resource annotations on what roles write (pure).

As operator-sdk's proxy does (`k8sutil.SupportsOwnerReference`): an object a role writes in its
CR's namespace (or any object, when the CR is cluster-scoped) gets an ownerReference to the CR;
an object in another namespace, or a cluster-scoped object of a namespaced CR, gets the
annotations `operator-sdk/primary-resource: <ns>/<name>` and
`operator-sdk/primary-resource-type: <Kind>.<group>` instead (ownerReferences cannot cross
namespaces). Whether the object is cluster-scoped is the caller's to say, from discovery
(runner/dependents/apiresources.py), never from the body's `metadata.namespace`; its namespace
is the request path's. When this happens is the proxy's choice (runner/dependents/proxy.py): on
create, as operator-sdk, or with `--owner-ref-on-update` on every write (replace, every kind of
patch, server-side apply). Existing references are kept; ours is added when absent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.kube.paths import api_version, resource_path

PRIMARY_RESOURCE = "operator-sdk/primary-resource"
PRIMARY_RESOURCE_TYPE = "operator-sdk/primary-resource-type"


@dataclass(frozen=True)
class Owner:
    """The CR a run reconciles."""

    api_version: str
    kind: str
    name: str
    namespace: str  # "" when cluster-scoped
    uid: str

    @property
    def group(self) -> str:
        return self.api_version.rpartition("/")[0]

    @property
    def type_annotation(self) -> str:
        return f"{self.kind}.{self.group}" if self.group else self.kind

    @property
    def key_annotation(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name

    def reference(self, controller: bool) -> dict[str, Any]:
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "uid": self.uid,
            "controller": controller,
            "blockOwnerDeletion": True,
        }


def owner_of(obj: Mapping[str, Any]) -> Owner:
    meta = obj.get("metadata") or {}
    return Owner(
        api_version=str(obj.get("apiVersion", "")),
        kind=str(obj.get("kind", "")),
        name=str(meta.get("name", "")),
        namespace=str(meta.get("namespace") or ""),
        uid=str(meta.get("uid", "")),
    )


@dataclass(frozen=True)
class RequestInfo:
    """What an API path names (the subset of the API server's RequestInfo we need)."""

    group: str
    version: str
    namespace: str  # "" for cluster-scoped paths
    plural: str
    name: str = ""
    subresource: str = ""

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)

    def path(self, name: str | None = None) -> str:
        """The path of this resource in `namespace` (all namespaces when ""), or of `name`."""
        return resource_path(self.group, self.version, self.plural, self.namespace, name)


def parse_path(path: str) -> RequestInfo | None:
    """Parse a resource path such as `/apis/apps/v1/namespaces/ns/deployments/web/scale`."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) >= 2 and parts[0] == "api":
        group, version, rest = "", parts[1], parts[2:]
    elif len(parts) >= 3 and parts[0] == "apis":
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace, rest = rest[1], rest[2:]
    elif len(rest) in (1, 2) and rest[0] == "namespaces":  # the Namespace objects themselves
        return RequestInfo(group, version, "", "namespaces", rest[1] if len(rest) == 2 else "")
    if not rest or len(rest) > 3:
        return None
    return RequestInfo(
        group=group,
        version=version,
        namespace=namespace,
        plural=rest[0],
        name=rest[1] if len(rest) > 1 else "",
        subresource=rest[2] if len(rest) > 2 else "",
    )


def is_owner(info: RequestInfo, obj: Mapping[str, Any], owner: Owner) -> bool:
    meta = obj.get("metadata") or {}
    return (
        obj.get("kind") == owner.kind
        and obj.get("apiVersion") == owner.api_version
        and (meta.get("name") or info.name) == owner.name
        and info.namespace == owner.namespace
    )


def applies(method: str, info: RequestInfo | None) -> bool:
    """Writes of whole objects get owners; subresources (status, scale, ...) do not."""
    if info is None or info.subresource:
        return False
    if info.group in ("", "events.k8s.io") and info.plural == "events":
        return False
    return method in ("POST", "PUT", "PATCH")


def takes_reference(info: RequestInfo, owner: Owner, *, cluster_scoped: bool) -> bool:
    """True: an ownerReference can point at the owner; False: annotate instead.

    A cluster-scoped owner may own anything; a namespaced one only objects of a namespaced
    resource in its own namespace (the path's).
    """
    if not owner.namespace:
        return True
    return not cluster_scoped and info.namespace == owner.namespace


def has_reference(obj: Mapping[str, Any], owner: Owner) -> bool:
    refs = (obj.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("uid") == owner.uid for r in refs if isinstance(r, Mapping))


def has_annotations(obj: Mapping[str, Any], owner: Owner) -> bool:
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    return (
        annotations.get(PRIMARY_RESOURCE) == owner.key_annotation
        and annotations.get(PRIMARY_RESOURCE_TYPE) == owner.type_annotation
    )


def is_marked(
    info: RequestInfo, obj: Mapping[str, Any], owner: Owner, *, cluster_scoped: bool
) -> bool:
    if takes_reference(info, owner, cluster_scoped=cluster_scoped):
        return has_reference(obj, owner)
    return has_annotations(obj, owner)


def mark(
    info: RequestInfo, obj: dict[str, Any], owner: Owner, *, cluster_scoped: bool
) -> dict[str, Any]:
    """`obj` (a whole object, as in a create or replace body) with our mark added."""
    if is_owner(info, obj, owner) or is_marked(info, obj, owner, cluster_scoped=cluster_scoped):
        return obj
    meta = dict(obj.get("metadata") or {})
    if takes_reference(info, owner, cluster_scoped=cluster_scoped):
        refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
        controller = not any(r.get("controller") for r in refs)
        meta["ownerReferences"] = [*refs, owner.reference(controller)]
    else:
        meta["annotations"] = {
            **(meta.get("annotations") or {}),
            PRIMARY_RESOURCE: owner.key_annotation,
            PRIMARY_RESOURCE_TYPE: owner.type_annotation,
        }
    return {**obj, "metadata": meta}


def fixup_patch(
    info: RequestInfo, obj: Mapping[str, Any], owner: Owner, *, cluster_scoped: bool
) -> list[dict[str, Any]]:
    """A JSON patch that adds our mark to `obj` as written (after a PATCH or apply); [] if none.

    Guarded by a `test` of resourceVersion, so a concurrent writer makes it fail (409/422)
    rather than overwrite. A patch of its own, sent with the operator's field manager: put in a
    server-side apply's body instead, the reference would belong to the role's field manager,
    and its next apply (which operator-sdk leaves unmarked) would take it away again.
    """
    if is_owner(info, obj, owner) or is_marked(info, obj, owner, cluster_scoped=cluster_scoped):
        return []
    meta = obj.get("metadata") or {}
    ops: list[dict[str, Any]] = [
        {"op": "test", "path": "/metadata/resourceVersion", "value": meta.get("resourceVersion")}
    ]
    if takes_reference(info, owner, cluster_scoped=cluster_scoped):
        refs = [r for r in meta.get("ownerReferences") or [] if isinstance(r, Mapping)]
        ref = owner.reference(not any(r.get("controller") for r in refs))
        if refs:
            ops.append({"op": "add", "path": "/metadata/ownerReferences/-", "value": ref})
        else:
            ops.append({"op": "add", "path": "/metadata/ownerReferences", "value": [ref]})
    else:
        if not meta.get("annotations"):
            ops.append({"op": "add", "path": "/metadata/annotations", "value": {}})
        for key, value in (
            (PRIMARY_RESOURCE, owner.key_annotation),
            (PRIMARY_RESOURCE_TYPE, owner.type_annotation),
        ):
            ops.append(
                {"op": "add", "path": f"/metadata/annotations/{_escape(key)}", "value": value}
            )
    return ops


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")


@dataclass(frozen=True)
class Primary:
    """A primary CR that an object points at."""

    group: str
    kind: str
    namespace: str
    name: str
    via_annotation: bool  # operator-sdk's primary-resource annotations, not an ownerReference
    cluster_scoped: bool = False  # the object pointing at it has no namespace


def owners_of(obj: Mapping[str, Any]) -> list[Primary]:
    """The primaries `obj` points at: ownerReferences (same namespace as `obj`), then the
    primary-resource annotations."""
    meta = obj.get("metadata") or {}
    namespace = str(meta.get("namespace") or "")
    found = [
        Primary(
            str(r.get("apiVersion")).rpartition("/")[0],
            str(r.get("kind")),
            namespace,
            str(r.get("name")),
            via_annotation=False,
        )
        for r in meta.get("ownerReferences") or []
        if isinstance(r, Mapping)
    ]
    annotations = meta.get("annotations") or {}
    key, kind_group = annotations.get(PRIMARY_RESOURCE), annotations.get(PRIMARY_RESOURCE_TYPE)
    if key and kind_group:
        ns, _, name = str(key).rpartition("/")
        kind, _, group = str(kind_group).partition(".")
        found.append(Primary(group, kind, ns, name, True, cluster_scoped=not namespace))
    return found
