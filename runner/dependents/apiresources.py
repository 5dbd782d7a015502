"""What the API server's discovery says of a resource a role writes (or reads, when its watch
follows reads: its kind): its scope, and whether it is stored at all.

operator-sdk's proxy asks its RESTMapper and discovery client the same two questions before it
touches a create (ansible-operator-plugins, internal/ansible/proxy: `IsVirtualResource`,
`k8sutil.SupportsOwnerReference`):

- a *virtual* resource, one that discovery lists without all of get, list and watch
  (SelfSubjectAccessReview, SubjectAccessReview, LocalSubjectAccessReview, TokenReview,
  SelfSubjectRulesReview, ...), is an API call dressed as a create: nothing is injected (its
  `metadata` must stay empty, or the API server answers 422) and it is never watched;
- whether an object is cluster-scoped is the resource's scope in discovery, never the body's
  `metadata.namespace` (a ClusterRole whose template keeps one is still cluster-scoped).

Each group version's APIResourceList is read once and kept (discovery is allowed to every
authenticated user); a resource it does not list makes it read again, at most every
`REFRESH_AFTER` s (a CRD installed since). When discovery cannot answer, the path decides, as
it does for every well-formed write: a namespaced resource is written under
`/namespaces/<ns>/`, a cluster-scoped one is not; and the resource is taken as stored.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from typing import Any

from runner.dependents.ownership import RequestInfo
from runner.kube.paths import group_version_path

log = logging.getLogger("runner.proxy")

#: GET a discovery path: its JSON, {} when the API server does not serve it (404), None when
#: it could not be asked.
Fetch = Callable[[str], Awaitable[Mapping[str, Any] | None]]

REFRESH_AFTER = 2.0
_STORED_VERBS = frozenset({"get", "list", "watch"})


@dataclass(frozen=True)
class Served:
    """A resource as discovery lists it (or as its path implies, when it cannot tell)."""

    namespaced: bool
    verbs: frozenset[str] = _STORED_VERBS
    kind: str = ""  # "" when discovery could not tell

    @property
    def cluster_scoped(self) -> bool:
        return not self.namespaced

    @property
    def virtual(self) -> bool:
        """No get, list and watch: nothing is stored, so nothing is injected or watched."""
        return not self.verbs >= _STORED_VERBS


def from_path(info: RequestInfo) -> Served:
    """What the path of a write implies: namespaced when it names a namespace."""
    return Served(namespaced=bool(info.namespace))


def served_in(api_resources: Mapping[str, Any]) -> dict[str, Served]:
    """The resources (not their subresources) of an APIResourceList, by plural."""
    found: dict[str, Served] = {}
    for entry in api_resources.get("resources") or []:
        name = str(entry.get("name") or "")
        if not name or "/" in name:
            continue
        found[name] = Served(
            namespaced=bool(entry.get("namespaced", True)),
            verbs=frozenset(str(v) for v in entry.get("verbs") or ()),
            kind=str(entry.get("kind") or ""),
        )
    return found


class ApiResources:
    """Discovery of the group versions roles write, kept (module doc)."""

    def __init__(self, fetch: Fetch, clock: Callable[[], float] = time.monotonic) -> None:
        self._fetch = fetch
        self._clock = clock
        self._known: dict[tuple[str, str], dict[str, Served]] = {}
        self._read_at: dict[tuple[str, str], float] = {}
        self._locks: dict[tuple[str, str], asyncio.Lock] = {}

    async def lookup(self, info: RequestInfo) -> Served:
        """The resource `info` names, as discovery lists it; else as its path implies."""
        key = (info.group, info.version)
        served = self._known.get(key, {}).get(info.plural)
        if served is not None:
            return served
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:  # one discovery request per group version at a time
            served = self._known.get(key, {}).get(info.plural)
            if served is None and self._stale(key):
                await self._read(key)
                served = self._known.get(key, {}).get(info.plural)
        if served is None:
            log.debug(
                "discovery does not list %s in %s: its path decides its scope",
                info.plural,
                group_version_path(*key),
            )
            return from_path(info)
        return served

    def _stale(self, key: tuple[str, str]) -> bool:
        read_at = self._read_at.get(key)
        return read_at is None or self._clock() - read_at >= REFRESH_AFTER

    async def _read(self, key: tuple[str, str]) -> None:
        answer = await self._fetch(group_version_path(*key))
        if answer is None:
            return  # not asked: asked again at the next write of that group version
        self._read_at[key] = self._clock()
        self._known[key] = served_in(answer)
