"""Names of things in the API: a resource (group/version/plural) and one object of it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from runner.kube.paths import api_version


@dataclass(frozen=True, order=True)
class Resource:
    """An API resource, as discovery describes it."""

    group: str
    version: str
    plural: str
    kind: str
    namespaced: bool = True

    @property
    def api_version(self) -> str:
        return api_version(self.group, self.version)


@dataclass(frozen=True, order=True)
class ObjectRef:
    """One object: the key of the work queue (one run per object at a time)."""

    resource: Resource
    namespace: str | None
    name: str

    def __str__(self) -> str:
        where = f"{self.namespace}/{self.name}" if self.namespace else self.name
        return f"{self.resource.kind} {where}"


def find_resource(
    api_resources: Mapping[str, Any], group: str, version: str, kind: str
) -> tuple[Resource, tuple[str, ...]] | None:
    """`kind` in a group version's APIResourceList (discovery), with the names `kubectl`
    accepts for it (plural, singular, short names); None when it is not served."""
    for entry in api_resources.get("resources") or []:
        if entry.get("kind") != kind or "/" in str(entry.get("name", "")):
            continue  # subresources (echoes/status) share the kind
        resource = Resource(
            group, version, str(entry["name"]), kind, bool(entry.get("namespaced", True))
        )
        names: tuple[str, ...] = (str(entry["name"]), str(entry.get("singularName") or ""))
        names += tuple(str(n) for n in entry.get("shortNames") or ())
        return resource, tuple(n for n in names if n)
    return None
