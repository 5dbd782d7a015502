"""A CRD installed while the operator runs is served, even when discovery lags behind its events.

kopf watches CustomResourceDefinitions and, on each event of one, scans the API server's discovery
for that group; what the scan finds is what it watches. The last event of a new CRD is the one
that sets `Established`, and the API server lists the resource in discovery only once its own
discovery controller has caught up with that same change. The two race: on the local cluster, 7
of 20 Established events arrived before `/apis/GROUP/VERSION` listed the resource. When kopf's
scan loses that race, no later event comes, and CRs of the new kind wait for the next change of
their CRD or a restart (it failed a CI run this way).

So after kopf has processed the event of an established CRD that one of our watches selects, and
its scan did not find the resource, the scan is repeated with a short backoff until discovery
lists it; after `RETRY_DELAYS`, one warning says what is missing. The swap, and what it reads
of kopf's registry and insights, are patches of kopf's internals: they go through kopf's fence
(kopf_import.py), which leaves kopf's own processor on a kopf release it is not verified on.

Listing and watching CRDs is an optional permission: operator-sdk needs none (its RESTMapper
reads discovery), and the RBAC of its scaffold and CSVs grants none. Refused, kopf retried the
list through its whole error backoff, one error line per attempt, then gave up with a warning and
never noticed a CRD installed later. So one SelfSubjectAccessReview per verb asks first; without
the permission kopf scans discovery at start only (its `scanning.disabled`, no CRD list), the
operator says so once at info level, and while a watched kind is not served, discovery is scanned
for its group every `POLL_EVERY` s instead (kopf's own scan of a CRD event, for that group):
the swap of kopf's resource observer is a patch of the fence too.
"""

from __future__ import annotations

import asyncio
import copy
import functools
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine, Iterable, Mapping
from typing import Any

from runner.app.source.kopf_import import (
    Stream,
    discovered_resources,
    not_found_error,
    patch_crd_processor,
    patch_resource_observer,
    patch_watch_stream,
    process_crd_event,
    resources_ready,
    watched_selectors,
)
from runner.kube import objects
from runner.kube.client import ApiError, KubeClient

log = logging.getLogger("runner.manager")

RETRY_DELAYS = (0.25, 0.5, 1.0, 2.0, 4.0, 8.0)
GONE_BACKOFF = 1.0  # between lists of a kind whose CRD is gone, until kopf stops its watch
POLL_EVERY = 5.0
_said = False  # the info line of serve_crds_without_watching_them, once a process

Processor = Callable[..., Awaitable[None]]


def established(crd: Mapping[str, Any]) -> bool:
    """The CRD serves requests: its `Established` condition is True and it is not being deleted."""
    if crd.get("metadata", {}).get("deletionTimestamp"):
        return False
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def selected(crd: Mapping[str, Any], selectors: Iterable[Any]) -> list[Any]:
    """The selectors (kopf's, with group, version and kind) that name a served version of `crd`."""
    spec = crd.get("spec") or {}
    served = {v.get("name") for v in spec.get("versions") or [] if v.get("served")}
    kind = (spec.get("names") or {}).get("kind")
    return [
        s
        for s in selectors
        if s.group == spec.get("group")
        and (s.kind is None or s.kind == kind)
        and (s.version is None or s.version in served)
    ]


def missing(selectors: Iterable[Any], resources: Iterable[Any]) -> list[Any]:
    """The selectors that no discovered resource matches yet."""
    found = list(resources)
    return [s for s in selectors if not any(s.check(r) for r in found)]


def retrying(process: Processor, delays: tuple[float, ...] = RETRY_DELAYS) -> Processor:
    """kopf's CRD event processor, repeated while discovery lags behind an established CRD."""

    @functools.wraps(process)
    async def processor(*, raw_event: Mapping[str, Any], **kwargs: Any) -> None:
        await process(raw_event=raw_event, **kwargs)
        crd = raw_event.get("object") or {}
        if raw_event.get("type") in (None, "DELETED") or not established(crd):
            return
        wanted = selected(crd, watched_selectors(kwargs["registry"]))
        insights = kwargs["insights"]
        for delay in delays:
            if not missing(wanted, discovered_resources(insights)):
                return
            log.debug(
                "CRD %s is established but not yet in discovery; scanning again in %.2f s",
                crd["metadata"]["name"],
                delay,
            )
            await asyncio.sleep(delay)
            await process(raw_event=raw_event, **kwargs)
        if lost := missing(wanted, discovered_resources(insights)):
            log.warning(
                "CRD %s is established, but the API server's discovery still does not list %s "
                "after %.0f s; its CRs are served from the next change of the CRD or a restart",
                crd["metadata"]["name"],
                ", ".join(f"{s.kind}.{s.version}" for s in lost),
                sum(delays),
            )

    return processor


def serve_crds_despite_discovery_lag() -> None:
    """Before kopf starts: its CRD event processor retries while discovery lags (idempotent)."""
    patch_crd_processor(retrying)


async def may_watch_crds(client: KubeClient) -> bool:
    """May the operator list and watch CRDs (two SelfSubjectAccessReviews)? True when the API
    server cannot tell (kopf's own way then)."""
    for verb in ("list", "watch"):
        review = objects.self_subject_access_review(objects.CUSTOM_RESOURCE_DEFINITIONS, verb)
        try:
            answer = await client.send(review, timeout=10.0)
        except (ApiError, OSError):
            return True
        if not ((answer or {}).get("status") or {}).get("allowed"):
            return False
    return True


async def poll_discovery(
    *, settings: Any, registry: Any, insights: Any, every: float = POLL_EVERY
) -> None:
    """Forever: every `every` s, the groups of the watched kinds discovery did not list are
    scanned again (kopf's processor of a CRD event, for that group)."""
    while True:
        await asyncio.sleep(every)
        lost = missing(watched_selectors(registry), discovered_resources(insights))
        for group in sorted({s.group for s in lost if s.group}):
            event: Any = {"type": "MODIFIED", "object": {"spec": {"group": group}}}
            try:
                await process_crd_event(
                    raw_event=event, settings=settings, registry=registry, insights=insights
                )
            except Exception as err:  # an API error after kopf's retries: the next poll
                log.info(
                    "discovery of group %s failed (scanned again in %g s): %s", group, every, err
                )
                continue
            for selector in lost:
                if selector.group == group and not missing(
                    [selector], discovered_resources(insights)
                ):
                    log.info("%s %s is served now (found through discovery)", selector.kind, group)


Observer = Callable[..., Coroutine[Any, Any, None]]


def _without_crd_watch(observer: Observer) -> Observer:
    """kopf's resource observer with its initial scan only, then `poll_discovery`."""

    @functools.wraps(observer)
    async def observe(*, settings: Any, registry: Any, insights: Any) -> None:
        quiet = copy.copy(settings)
        quiet.scanning = copy.copy(settings.scanning)
        quiet.scanning.disabled = True  # no list or watch of CRDs
        initial = asyncio.create_task(
            observer(settings=quiet, registry=registry, insights=insights), name="kopf resources"
        )
        ready = asyncio.create_task(resources_ready(insights))
        try:
            await asyncio.wait({initial, ready}, return_when=asyncio.FIRST_COMPLETED)
            if initial.done():
                initial.result()  # kopf's own failure, as it would have been
                return
            await poll_discovery(
                settings=settings, registry=registry, insights=insights, every=POLL_EVERY
            )
        finally:
            for task in (initial, ready):
                task.cancel()
            await asyncio.gather(initial, ready, return_exceptions=True)

    return observe


async def serve_crds_without_watching_them(client: KubeClient) -> None:
    """Before kopf starts: without the permission to list and watch CRDs, discovery instead,
    and one info line (module doc)."""
    if await may_watch_crds(client):
        return
    global _said
    if not patch_resource_observer(_without_crd_watch) or _said:
        return  # kopf's own observer goes on (the fence's warning says so), or said already
    _said = True
    log.info(
        "CustomResourceDefinitions: this operator may not list and watch them (RBAC), an "
        "optional permission: the kinds served at start are watched, and a watched kind whose "
        "CRD is installed later is found through the API's discovery, checked every %g s",
        POLL_EVERY,
    )


def _surviving_its_crd(stream: Stream) -> Stream:
    """kopf's list-then-watch of a resource, whose 404 (its CRD deleted) waits `GONE_BACKOFF`
    and ends the round (kopf lists again, or its observer, seeing the CRD's deletion, stops the
    watch), where kopf's own would fail the operator and every other watch with it."""
    not_found = not_found_error()
    gone: set[str] = set()

    @functools.wraps(stream)
    async def continuous_watch(**kwargs: Any) -> AsyncIterator[Any]:
        resource = str(kwargs.get("resource"))
        try:
            async for event in stream(**kwargs):
                gone.discard(resource)
                yield event
        except not_found:
            level = logging.DEBUG if resource in gone else logging.INFO
            gone.add(resource)
            log.log(
                level, "%s is not served (its CRD was deleted?): watched again if it is", resource
            )
            await asyncio.sleep(GONE_BACKOFF)

    return continuous_watch


def survive_deleted_crds() -> None:
    """Before kopf starts: a watched kind's CRD deleted leaves the other watches running."""
    patch_watch_stream(_surviving_its_crd)
