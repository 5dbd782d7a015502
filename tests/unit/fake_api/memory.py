"""An API server in memory: the transport under a real `KubeClient` (`FakeApi.client()`).

It answers the requests our client sends (runner/kube: paths as paths.py builds them), so a test
goes through the client's own handling of the answers (404 -> None in `send_or_none`, 409 ->
`ApiError.conflict`, an unreachable server -> `ApiUnreachable` and `Reachability`):

- objects by path, in any collection: `/api/v1/...` and `/apis/<group>/<version>/...`,
  namespaced (`.../namespaces/<ns>/<plural>/<name>`) or not;
- GET an object (404 when there is none) or a collection (its `items`, with `labelSelector`
  terms `k=v`, `k==v`, `k!=v`, `k`, `!k`, and `limit`);
- POST to a collection: create (409 when the name is taken; `generateName` works), with a new
  resourceVersion, uid and creationTimestamp;
- PUT an object (404 when there is none; 409 when its metadata.resourceVersion is not the
  stored one), PATCH with `application/merge-patch+json` (RFC 7386; a metadata.resourceVersion
  in the patch is a precondition: 409), both also on the `status` subresource: a write to the
  object keeps its status, a write to `/status` changes nothing but the status (as for a custom
  resource with the status subresource); metadata.generation moves on when the spec changes;
- DELETE: gone at once, or, with finalizers, a deletionTimestamp; an object being deleted is
  gone once a write leaves it no finalizers;
- POST to a collection given to `answer` (a TokenReview, a SubjectAccessReview): the object
  comes back as the test's function completes it (its status), and is not kept;
- GET a discovery document (`/apis/<group>/<version>`, an APIResourceList) that the test `put`
  there; 404 when it put none.

Errors are Kubernetes `Status` bodies. Every request is recorded with its answer (`exchanges`),
and `faults` make the matching requests hang, fail with a transport error (as when the server
cannot be reached) or answer an error status. `put` and `get` let a test set up and read the
state directly.
"""

from __future__ import annotations

import asyncio
import copy
import http
import json
import uuid
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any
from urllib.parse import parse_qsl, quote, unquote, urlsplit

from runner.kube import client as kube
from runner.kube.client import KubeClient, Request
from runner.kube.credentials import Credentials
from runner.kube.reachability import Reachability
from runner.kube.resources import ObjectRef

from .clock import FakeClock

HOST = "https://fake-api.invalid"
JSON = dict[str, Any]


@dataclass
class Fault:
    """What happens to the requests that match (`method` and the exact `path`, when given):
    they hang for `hang` s first (when the client's timeout is shorter: `TimeoutError` at the
    timeout, as aiohttp raises it), then raise `error` (a transport error), answer `status`, or
    are served. `times` requests (None: every one until the fault is removed)."""

    method: str | None = None
    path: str | None = None
    hang: float = 0.0
    error: BaseException | None = None
    status: int | None = None
    times: int | None = None
    hits: int = 0

    def matches(self, method: str, path: str) -> bool:
        return (self.method is None or self.method == method) and (
            self.path is None or self.path == path
        )


@dataclass(frozen=True)
class Exchange:
    """One request and what became of it: a status, or None when it got no answer."""

    request: Request
    status: int | None
    at: float  # the fake clock's time when the request arrived (0.0 without a clock)


@dataclass
class _Parsed:
    collection: str  # the collection's path: /api/v1/namespaces/ns/events
    namespace: str | None
    name: str | None
    subresource: str | None

    @property
    def path(self) -> str:
        assert self.name is not None
        return f"{self.collection}/{quote(self.name, safe='')}"


class ApiStatus(Exception):
    """An answer other than 2xx: becomes a Kubernetes Status body."""

    def __init__(self, code: int, reason: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.body = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": message,
            "reason": reason,
            "code": code,
        }


def path_of(where: str | ObjectRef) -> str:
    """An object's path: given as it is, or the path of an ObjectRef."""
    return where if isinstance(where, str) else kube.get_object(where).path


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge key by key, null removes, anything else replaces."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    merged = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            merged.pop(key, None)
        else:
            merged[key] = merge_patch(merged.get(key), value)
    return merged


def _selected(labels: Mapping[str, str], selector: str) -> bool:
    for term in filter(None, (t.strip() for t in selector.split(","))):
        if "!=" in term:
            key, value = term.split("!=", 1)
            if labels.get(key.strip()) == value.strip():
                return False
        elif "=" in term:
            key, value = term.replace("==", "=").split("=", 1)
            if labels.get(key.strip()) != value.strip():
                return False
        elif term.startswith("!"):
            if term[1:].strip() in labels:
                return False
        elif " " in term or "(" in term:
            raise ApiStatus(400, "BadRequest", f"unsupported label selector {term!r}")
        elif term not in labels:
            return False
    return True


def _parse(path: str) -> _Parsed | None:
    parts = path.strip("/").split("/")
    head = {"api": 2, "apis": 3}.get(parts[0])
    if head is None or len(parts) <= head:
        return None
    prefix, rest = parts[:head], parts[head:]
    namespace = None
    if len(rest) >= 3 and rest[0] == "namespaces":
        namespace = unquote(rest[1])
        prefix, rest = prefix + rest[:2], rest[2:]
    if len(rest) > 3:
        return None
    return _Parsed(
        collection="/" + "/".join([*prefix, rest[0]]),
        namespace=namespace,
        name=unquote(rest[1]) if len(rest) > 1 else None,
        subresource=rest[2] if len(rest) > 2 else None,
    )


@dataclass
class FakeApi:
    """The API server in memory (see the module's docstring). With `clock`, timestamps are its
    wall time and exchanges are stamped with it."""

    clock: FakeClock | None = None
    objects: dict[str, JSON] = field(default_factory=dict)  # by path, in creation order
    exchanges: list[Exchange] = field(default_factory=list)
    faults: list[Fault] = field(default_factory=list)
    answers: dict[str, Callable[[JSON], JSON]] = field(default_factory=dict)  # by collection
    version: int = 0  # the last resourceVersion given out

    def client(self) -> KubeClient:
        """A real client whose transport is this fake (its own `Reachability`)."""
        reachability = Reachability(self.clock) if self.clock is not None else Reachability()
        credentials = Credentials(server=HOST, insecure=True)
        return KubeClient(credentials, reachability, transport=self)

    # -- the test's side ----------------------------------------------------------------------

    def put(self, where: str | ObjectRef, obj: JSON) -> JSON:
        """Store `obj` at `where` as given, with a new resourceVersion; a copy of it."""
        stored = copy.deepcopy(obj)
        stored.setdefault("metadata", {})["resourceVersion"] = self._next_version()
        self.objects[path_of(where)] = stored
        return copy.deepcopy(stored)

    def get(self, where: str | ObjectRef) -> JSON | None:
        """A copy of the object at `where`, or None."""
        stored = self.objects.get(path_of(where))
        return copy.deepcopy(stored) if stored is not None else None

    def listed(self, collection: str) -> list[JSON]:
        """Copies of the objects in `collection` (a path), oldest first."""
        return [
            copy.deepcopy(obj)
            for path, obj in self.objects.items()
            if path.rsplit("/", 1)[0] == collection
        ]

    @property
    def requests(self) -> list[Request]:
        return [e.request for e in self.exchanges]

    def sent(self, method: str | None = None, suffix: str = "") -> list[Request]:
        """The requests received (of `method`, to a path ending with `suffix`)."""
        return [
            r
            for r in self.requests
            if (method is None or r.method == method) and r.path.endswith(suffix)
        ]

    def answer(self, collection: str, complete: Callable[[JSON], JSON]) -> None:
        """POSTs to `collection` (a path) come back as `complete(body)` makes them, unstored:
        what the API server computes (a review's status)."""
        self.answers[collection] = complete

    def fail(self, **fault: Any) -> Fault:
        """Add a `Fault(**fault)`; remove it with `faults.remove`."""
        added = Fault(**fault)
        self.faults.append(added)
        return added

    # -- the transport ------------------------------------------------------------------------

    async def __call__(
        self, method: str, url: str, body: str | None, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str, str]:
        split = urlsplit(url)
        request = Request(
            method,
            split.path,
            dict(parse_qsl(split.query)),
            json.loads(body) if body else None,
            headers.get("Content-Type", "application/json"),
        )
        at = self.clock() if self.clock is not None else 0.0
        await asyncio.sleep(0)  # as over the wire: other tasks run meanwhile
        fault = next((f for f in self.faults if f.matches(method, request.path)), None)
        status: int | None = None
        try:
            if fault is not None:
                fault.hits += 1
                if fault.times is not None and fault.hits >= fault.times:
                    self.faults.remove(fault)
                if fault.hang:
                    await asyncio.sleep(min(fault.hang, timeout))
                    if fault.hang >= timeout:
                        raise TimeoutError
                if fault.error is not None:
                    raise fault.error
                if fault.status is not None:
                    phrase = http.HTTPStatus(fault.status).phrase
                    raise ApiStatus(fault.status, phrase.replace(" ", ""), f"injected {phrase}")
            status, answer = self._answer(request)
        except ApiStatus as err:
            status, answer = err.code, err.body
        finally:
            self.exchanges.append(Exchange(request, status, at))
        return status, http.HTTPStatus(status).phrase, json.dumps(answer)

    # -- the API server -----------------------------------------------------------------------

    def _answer(self, request: Request) -> tuple[int, Any]:
        parsed = _parse(request.path)
        if parsed is None:
            if request.method == "GET" and request.path in self.objects:  # discovery, put there
                return 200, copy.deepcopy(self.objects[request.path])
            raise ApiStatus(404, "NotFound", "the server could not find the requested resource")
        if parsed.name is None:
            if request.method == "GET":
                return 200, self._list(parsed, request.params)
            if request.method == "POST" and parsed.collection in self.answers:
                return 201, self.answers[parsed.collection](copy.deepcopy(request.body))
            if request.method == "POST":
                return 201, self._create(parsed, request.body)
        elif request.method == "GET" and parsed.subresource is None:
            return 200, copy.deepcopy(self._stored(parsed))
        elif request.method == "PUT":
            return 200, self._write(parsed, request.body, replace=True)
        elif request.method == "PATCH":
            if request.content_type != kube.MERGE_PATCH:
                raise ApiStatus(415, "UnsupportedMediaType", f"{request.content_type} (fake)")
            return 200, self._write(parsed, request.body, replace=False)
        elif request.method == "DELETE" and parsed.subresource is None:
            return 200, self._delete(parsed)
        raise ApiStatus(405, "MethodNotAllowed", f"{request.method} {request.path}")

    def _next_version(self) -> str:
        self.version += 1
        return str(self.version)

    def _timestamp(self) -> str:
        moment = self.clock.wall() if self.clock is not None else datetime.now(UTC)
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")

    def _stored(self, parsed: _Parsed) -> JSON:
        stored = self.objects.get(parsed.path)
        if stored is None:
            plural = parsed.collection.rsplit("/", 1)[1]
            raise ApiStatus(404, "NotFound", f'{plural} "{parsed.name}" not found')
        return stored

    def _list(self, parsed: _Parsed, params: Mapping[str, str]) -> JSON:
        items = [
            obj
            for obj in self.listed(parsed.collection)
            if _selected(obj["metadata"].get("labels") or {}, params.get("labelSelector", ""))
        ]
        if "limit" in params:
            items = items[: int(params["limit"])]
        return {
            "kind": "List",
            "apiVersion": "v1",
            "metadata": {"resourceVersion": str(self.version)},
            "items": items,
        }

    def _create(self, parsed: _Parsed, body: JSON) -> JSON:
        obj = copy.deepcopy(body)
        meta = obj.setdefault("metadata", {})
        if not meta.get("name") and meta.get("generateName"):
            meta["name"] = meta["generateName"] + uuid.uuid4().hex[:5]
        if not meta.get("name"):
            raise ApiStatus(400, "BadRequest", "name or generateName is required")
        if parsed.namespace is not None:
            meta["namespace"] = parsed.namespace
        parsed.name = str(meta["name"])
        if parsed.path in self.objects:
            plural = parsed.collection.rsplit("/", 1)[1]
            raise ApiStatus(409, "AlreadyExists", f'{plural} "{parsed.name}" already exists')
        meta.pop("resourceVersion", None)
        meta.update(uid=str(uuid.uuid4()), creationTimestamp=self._timestamp())
        return self.put(parsed.path, obj)

    def _write(self, parsed: _Parsed, body: JSON, *, replace: bool) -> JSON:
        stored = self._stored(parsed)
        expected = (body.get("metadata") or {}).get("resourceVersion")
        if expected is not None and expected != stored["metadata"]["resourceVersion"]:
            plural = parsed.collection.rsplit("/", 1)[1]
            raise ApiStatus(
                409,
                "Conflict",
                f'Operation cannot be fulfilled on {plural} "{parsed.name}": the object has '
                "been modified; please apply your changes to the latest version and try again",
            )
        written = copy.deepcopy(body) if replace else merge_patch(stored, body)
        if parsed.subresource == "status":
            obj = {**copy.deepcopy(stored), "status": written.get("status")}
        elif parsed.subresource is None:
            obj = written
            obj["metadata"] = {  # what a client does not set
                **written.get("metadata", {}),
                **{
                    k: stored["metadata"][k]
                    for k in ("name", "namespace", "uid", "creationTimestamp", "deletionTimestamp")
                    if k in stored["metadata"]
                },
            }
            obj.pop("status", None)
            if "status" in stored:
                obj["status"] = copy.deepcopy(stored["status"])
            generation = stored["metadata"].get("generation")
            if generation is not None:
                changed = obj.get("spec") != stored.get("spec")
                obj["metadata"]["generation"] = generation + 1 if changed else generation
        else:
            raise ApiStatus(404, "NotFound", f"no subresource {parsed.subresource!r}")
        if obj.get("status") is None:
            obj.pop("status", None)
        written_obj = self.put(parsed.path, obj)
        if obj["metadata"].get("deletionTimestamp") and not obj["metadata"].get("finalizers"):
            del self.objects[parsed.path]
        return written_obj

    def _delete(self, parsed: _Parsed) -> JSON:
        stored = self._stored(parsed)
        if stored["metadata"].get("finalizers"):
            if not stored["metadata"].get("deletionTimestamp"):
                stored = {**stored, "metadata": {**stored["metadata"]}}
                stored["metadata"]["deletionTimestamp"] = self._timestamp()
                return self.put(parsed.path, stored)
            return copy.deepcopy(stored)
        del self.objects[parsed.path]
        return copy.deepcopy(stored)
