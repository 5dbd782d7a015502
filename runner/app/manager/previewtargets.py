"""Which CRs a preview covers: every CR of every watch the operator would reconcile, narrowed
by the preview's own flags.

As `operator-runner run` sees them: the watches of watches.yaml, in the namespaces of
WATCH_NAMESPACE (all when it is empty), under each watch's label `selector`. The preview's
`--kind` (as kubectl names a kind: Kind, kind.group, plural, short name), `--namespace` (within
WATCH_NAMESPACE) and `--selector` (a label selector, as kubectl's `-l`) narrow that down. Only
reads: discovery and one paged list per watch and namespace.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from runner.app.manager.oneshot import UsageError, discover_watch, select_watch
from runner.kube import client as kube
from runner.kube.client import KubeClient
from runner.kube.resources import ObjectRef, Resource
from runner.watches import Watch
from runner.watches.labelselectors import matches


@dataclass(frozen=True)
class Target:
    """One CR to preview: its watch, where it is, and the object as it was listed."""

    watch: Watch
    ref: ObjectRef
    obj: dict[str, Any]


def namespaces_of(watched: Sequence[str], asked: Sequence[str]) -> list[str | None]:
    """The namespaces to list: `asked` (--namespace) within `watched` (WATCH_NAMESPACE; empty:
    all); [None] for all namespaces."""
    if not asked:
        return list(watched) or [None]
    outside = [ns for ns in asked if watched and ns not in watched]
    if outside:
        raise UsageError(
            f"--namespace {', '.join(outside)}: not watched (WATCH_NAMESPACE is "
            f"{','.join(watched)}); the operator would not reconcile CRs there"
        )
    return list(dict.fromkeys(asked))


async def watches_of(
    client: KubeClient, watches: Sequence[Watch], kinds: Sequence[str]
) -> list[tuple[Watch, Resource]]:
    """The watches to preview (all, or those of `kinds`) and their resources."""
    if not kinds:
        return [(w, (await discover_watch(client, w))[0]) for w in watches]
    chosen: dict[int, tuple[Watch, Resource]] = {}
    for kind in kinds:
        watch, resource = await select_watch(client, list(watches), kind, None)
        chosen[id(watch)] = (watch, resource)
    return list(chosen.values())


async def list_all(
    client: KubeClient, resource: Resource, namespace: str | None, selector: str
) -> list[dict[str, Any]]:
    """Every object of `resource` in `namespace` (None: all) under `selector`, page by page."""
    items: list[dict[str, Any]] = []
    cont = ""
    while True:
        page = await client.send(kube.list_objects(resource, namespace, selector, cont))
        items.extend(page.get("items") or [])
        cont = (page.get("metadata") or {}).get("continue") or ""
        if not cont:
            return items


async def targets(
    client: KubeClient,
    watches: Sequence[Watch],
    *,
    watched_namespaces: Sequence[str],
    namespaces: Sequence[str],
    kinds: Sequence[str],
    selector: str,
) -> list[Target]:
    """The CRs to preview (module doc), sorted by kind, namespace and name."""
    found: list[Target] = []
    where = namespaces_of(watched_namespaces, namespaces)
    for watch, resource in await watches_of(client, watches, kinds):
        scopes: list[str | None] = list(where) if resource.namespaced else [None]
        for namespace in scopes:
            for obj in await list_all(client, resource, namespace, selector):
                meta = obj.get("metadata") or {}
                if not matches(watch.selector, meta.get("labels")):
                    continue
                # a list's items carry no apiVersion and kind: the watch's
                obj.setdefault("apiVersion", watch.gvk.api_version)
                obj.setdefault("kind", watch.gvk.kind)
                ref = ObjectRef(resource, meta.get("namespace") or None, str(meta.get("name")))
                found.append(Target(watch, ref, obj))
    found.sort(key=lambda t: (t.ref.resource.kind, t.ref.namespace or "", t.ref.name))
    return found
