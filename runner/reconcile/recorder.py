"""Kubernetes Events about CRs (`kubectl describe` shows them).

Like client-go's recorder, a repeat of the same (object, type, reason, message) within ten
minutes bumps `count` and `lastTimestamp` on the existing Event instead of creating another.

Events are optional: operator-sdk writes none, and the RBAC of its scaffold (and of the CSVs
made from it) allows them in the operator's own namespace at most. Where the API server refuses
them (403), the operator says so once, at info level, and writes none there for the next
`REPEAT_WINDOW` (then tries again, quietly: RBAC may have changed); what an Event would say is
in the CR's status conditions and the log all the same.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from runner.kube import client as kube
from runner.kube.client import ApiError, KubeClient

log = logging.getLogger("runner.events")

COMPONENT = "operator-runner"
MAX_MESSAGE = 1024
REPEAT_WINDOW = 600.0
_CACHE_SIZE = 4096


def _now() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def build_event(obj: Mapping[str, Any], type_: str, reason: str, message: str) -> dict[str, Any]:
    """A core/v1 Event about `obj` (pure)."""
    meta = obj.get("metadata") or {}
    name = str(meta.get("name", ""))
    namespace = str(meta.get("namespace") or "default")
    now = _now()
    if len(message) > MAX_MESSAGE:
        message = message[: MAX_MESSAGE - 1] + "…"
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": f"{name}.{uuid.uuid4().hex[:16]}", "namespace": namespace},
        "involvedObject": {
            "apiVersion": obj.get("apiVersion"),
            "kind": obj.get("kind"),
            "name": name,
            "namespace": meta.get("namespace"),
            "uid": meta.get("uid"),
            "resourceVersion": meta.get("resourceVersion"),
        },
        "type": type_,
        "reason": reason,
        "message": message,
        "source": {"component": COMPONENT},
        "reportingComponent": COMPONENT,
        "firstTimestamp": now,
        "lastTimestamp": now,
        "count": 1,
    }


class EventRecorder:
    def __init__(self, client: KubeClient, clock: Callable[[], float] = time.monotonic) -> None:
        self._client = client
        self._clock = clock
        # (uid, type, reason, message) -> (namespace, event name, count, first seen)
        self._recent: OrderedDict[tuple[str, ...], tuple[str, str, int, float]] = OrderedDict()
        self._refused: dict[str, float] = {}  # namespace -> when Events were refused there
        self._said_refused = False

    async def emit(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an Event; never raises (an Event is worth less than the reconcile)."""
        meta = obj.get("metadata") or {}
        uid = str(meta.get("uid", ""))
        key = (uid, type_, reason, message)
        where = str(meta.get("namespace") or "default")
        refused_at = self._refused.get(where)
        if refused_at is not None and self._clock() - refused_at < REPEAT_WINDOW:
            return
        try:
            seen = self._recent.get(key)
            if seen and self._clock() - seen[3] < REPEAT_WINDOW:
                namespace, name, count, first = seen
                patch = {"count": count + 1, "lastTimestamp": _now()}
                await self._client.send(kube.patch_event(namespace, name, patch))
                self._recent[key] = (namespace, name, count + 1, first)
                return
            event = build_event(obj, type_, reason, message)
            namespace = event["metadata"]["namespace"]
            await self._client.send(kube.create_event(namespace, event))
            self._recent[key] = (namespace, event["metadata"]["name"], 1, self._clock())
            while len(self._recent) > _CACHE_SIZE:
                self._recent.popitem(last=False)
        except ApiError as err:
            self._recent.pop(key, None)
            if err.status == 403:
                self._not_allowed(where, err)
                return
            log.warning("could not record Event %s %s: %s", type_, reason, err)
        except Exception as err:  # network trouble: log, carry on
            log.warning("could not record Event %s %s: %s", type_, reason, err)

    def _not_allowed(self, namespace: str, err: ApiError) -> None:
        self._refused[namespace] = self._clock()
        if self._said_refused:
            log.debug("Events refused in namespace %s: %s", namespace, err)
            return
        self._said_refused = True
        log.info(
            "Events: this operator may not write Events in namespace %s (RBAC: create and patch "
            "on events), an optional permission: it goes on without them there (and wherever "
            "else they are refused, said only at debug level); what they would say is in the "
            "CRs' status conditions and this log",
            namespace,
        )
