"""Kubernetes Events about CRs (`kubectl describe` shows them).

Like client-go's recorder, a repeat of the same (object, type, reason, message) within ten
minutes bumps `count` and `lastTimestamp` on the existing Event instead of creating another.
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import OrderedDict
from collections.abc import Mapping
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
    def __init__(self, client: KubeClient) -> None:
        self._client = client
        # (uid, type, reason, message) -> (namespace, event name, count, first seen)
        self._recent: OrderedDict[tuple[str, ...], tuple[str, str, int, float]] = OrderedDict()

    async def emit(self, obj: Mapping[str, Any], type_: str, reason: str, message: str) -> None:
        """Record an Event; never raises (an Event is worth less than the reconcile)."""
        uid = str((obj.get("metadata") or {}).get("uid", ""))
        key = (uid, type_, reason, message)
        try:
            seen = self._recent.get(key)
            if seen and time.monotonic() - seen[3] < REPEAT_WINDOW:
                namespace, name, count, first = seen
                patch = {"count": count + 1, "lastTimestamp": _now()}
                await self._client.send(kube.patch_event(namespace, name, patch))
                self._recent[key] = (namespace, name, count + 1, first)
                return
            event = build_event(obj, type_, reason, message)
            namespace = event["metadata"]["namespace"]
            await self._client.send(kube.create_event(namespace, event))
            self._recent[key] = (namespace, event["metadata"]["name"], 1, time.monotonic())
            while len(self._recent) > _CACHE_SIZE:
                self._recent.popitem(last=False)
        except ApiError as err:
            self._recent.pop(key, None)
            log.warning("could not record Event %s %s: %s", type_, reason, err)
        except Exception as err:  # network trouble: log, carry on
            log.warning("could not record Event %s %s: %s", type_, reason, err)
