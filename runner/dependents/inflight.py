"""The writes roles' runs have in flight through the proxy, so that a watch judges the event of a
role's own write only once the proxy has read the write's answer (pure).

The proxy learns what a write made (its resourceVersion, its content) from the API server's
answer, and the API server sends the same object to every watch at about the same time: a watch
that judged the event before the proxy had read the answer took the role's own write for
someone else's change, and reconciled its CR once more for nothing. So the proxy says when the
write of an object begins and when it has ended (its answer read and reported, or it failed);
an event of an object being written is held (`hold`) until then, and judged after, the role's
own writes known by that time. Events of one object keep their order.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Callable

from runner.dependents.ownership import RequestInfo, applies

log = logging.getLogger("runner.dependents")

#: An object: group, plural, namespace ("" when cluster-scoped), name.
Key = tuple[str, str, str, str]


def written_key(method: str, info: RequestInfo | None, body: bytes) -> Key | None:
    """The object a request writes whole (a create, replace, patch or apply), if it names one:
    in its path, or for a create in its body's `metadata.name`."""
    if info is None or not applies(method, info):
        return None
    name = info.name
    if not name and method == "POST" and body:
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        meta = doc.get("metadata") if isinstance(doc, dict) else None
        name = str(meta.get("name") or "") if isinstance(meta, dict) else ""
    return (info.group, info.plural, info.namespace, name) if name else None


class WritesInFlight:
    def __init__(self) -> None:
        self._writing: dict[Key, int] = {}
        self._held: dict[Key, list[Callable[[], None]]] = {}

    def begin(self, key: Key) -> Key:
        """The write of the object begins (the key, to `end` it with)."""
        self._writing[key] = self._writing.get(key, 0) + 1
        return key

    def end(self, key: Key) -> None:
        """The write has ended: the events held for the object are judged now, in order."""
        left = self._writing.get(key, 0) - 1
        if left > 0:
            self._writing[key] = left
            return
        self._writing.pop(key, None)
        for handle in self._held.pop(key, []):
            try:
                handle()
            except Exception:  # a watcher's bug: say so, and judge the others
                log.exception("a held watch event could not be handled")

    def hold(self, key: Key, handle: Callable[[], None]) -> bool:
        """Hold `handle` (the judging of an event of the object) while the object is being
        written; False: nothing is being written, judge it now."""
        if key not in self._writing:
            return False
        self._held.setdefault(key, []).append(handle)
        return True
