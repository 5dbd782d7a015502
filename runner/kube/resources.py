"""Names of things in the API: a resource (group/version/plural) and one object of it."""

from __future__ import annotations

from dataclasses import dataclass

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
