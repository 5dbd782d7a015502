"""The EchoFlask CRs the scenarios create, and the Tracker that sees when each got status and
turned Successful."""

from __future__ import annotations

import threading
import time
from dataclasses import dataclass
from typing import Any

from kubernetes import client, watch

GROUP, VERSION, PLURAL, KIND = "swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask"
PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"


def successful(obj: dict[str, Any]) -> bool:
    gen = (obj.get("metadata") or {}).get("generation")
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Successful" and c.get("status") == "True":
            og = c.get("observedGeneration")
            return og is None or og == gen
    return False


@dataclass
class CrState:
    created: float | None = None
    status_written: float | None = None
    successful: float | None = None


class Tracker(threading.Thread):
    """Watches the EchoFlasks of one namespace: when each first got status, became Successful."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        super().__init__(name=f"tracker-{namespace}", daemon=True)
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.crs: dict[str, CrState] = {}
        self.lock = threading.Condition()
        self._stop = threading.Event()
        self.ready = threading.Event()

    def state(self, name: str) -> CrState:
        with self.lock:
            return self.crs.setdefault(name, CrState())

    def _see(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self.lock:
            st = self.crs.setdefault(name, CrState())
            status = obj.get("status") or {}
            if st.status_written is None and "nodes" in status:
                st.status_written = now
            if st.successful is None and successful(obj):
                st.successful = now
            self.lock.notify_all()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                lst = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL
                )
                for obj in lst.get("items") or []:
                    self._see(obj)
                self.ready.set()
                rv = lst["metadata"]["resourceVersion"]
                w = watch.Watch()
                for ev in w.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=rv,
                    timeout_seconds=120,
                ):
                    if self._stop.is_set():
                        w.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._see(ev["object"])
            except Exception:
                time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()

    def wait(self, names: list[str], deadline: float, what: str = "successful") -> bool:
        with self.lock:
            while True:
                if all(getattr(self.crs.get(n, CrState()), what) is not None for n in names):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.5))

    def count(self, names: list[str], what: str = "successful") -> int:
        with self.lock:
            return sum(getattr(self.crs.get(n, CrState()), what) is not None for n in names)
