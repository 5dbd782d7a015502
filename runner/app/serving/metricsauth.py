"""`--metrics-require-rbac`: who may read /metrics, as controller-runtime's filter decides.

controller-runtime's `filters.WithAuthenticationAndAuthorization` (pkg/metrics/filters), which
operator-sdk's `--metrics-require-rbac` turns on:

1. authentication: the request's `Authorization: Bearer <token>` is sent to the API server in a
   TokenReview; no token, or one the API server does not accept: 401 Unauthorized. Answers are
   kept for a minute (per token, by its SHA-256).
2. authorization: a SubjectAccessReview asks whether that user (with its groups, uid and extra)
   may `<method, lower case>` the non-resource URL `<path>`: `get` on `/metrics` for a scrape,
   which the `metrics-reader` ClusterRole grants. No: 403 Forbidden. Allowed answers are kept
   for 5 minutes, denials for 30 s.
3. when the API server cannot answer: 500, as there (and one log line).

The operator's ServiceAccount needs `create` on tokenreviews and subjectaccessreviews (the
`metrics-auth-role` ClusterRole of deploy/ and of `init`'s scaffold).
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Any, Protocol

from aiohttp import web

from runner.kube import client as kube

log = logging.getLogger("runner.metrics")

AUTHN_TTL = 60.0
ALLOW_TTL = 300.0
DENY_TTL = 30.0
_MAX_ENTRIES = 4096

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


class Sender(Protocol):
    async def send(self, request: kube.Request, timeout: float = 30.0) -> Any: ...


@dataclass(frozen=True)
class User:
    name: str
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: tuple[tuple[str, tuple[str, ...]], ...] = ()

    def review_spec(self, verb: str, path: str) -> dict[str, Any]:
        spec: dict[str, Any] = {
            "user": self.name,
            "groups": list(self.groups),
            "nonResourceAttributes": {"path": path, "verb": verb},
        }
        if self.uid:
            spec["uid"] = self.uid
        if self.extra:
            spec["extra"] = {k: list(v) for k, v in self.extra}
        return spec


def bearer_token(header: str | None) -> str | None:
    """The token of `Authorization: Bearer <token>` (scheme in any case), else None."""
    parts = (header or "").split()
    if len(parts) == 2 and parts[0].lower() == "bearer" and parts[1]:
        return parts[1]
    return None


class _Cache:
    def __init__(self, clock: Callable[[], float]) -> None:
        self._clock = clock
        self._entries: dict[Any, tuple[float, Any]] = {}

    def get(self, key: Any) -> Any:
        entry = self._entries.get(key)
        if entry is None:
            return None
        if entry[0] <= self._clock():
            del self._entries[key]
            return None
        return entry[1]

    def put(self, key: Any, value: Any, ttl: float) -> None:
        if len(self._entries) >= _MAX_ENTRIES:
            self._entries.clear()  # a flood of distinct tokens: start over, never grow
        self._entries[key] = (self._clock() + ttl, value)


class ReviewFailed(Exception):
    """The API server did not answer a review (unreachable, or the operator may not ask)."""


def _hint(err: Exception) -> str:
    if isinstance(err, kube.ApiError) and err.status == 403:
        return (
            "; the operator's ServiceAccount needs create on tokenreviews.authentication.k8s.io "
            "and subjectaccessreviews.authorization.k8s.io (the metrics-auth-role ClusterRole)"
        )
    return ""


class MetricsAuth:
    """The two reviews and their caches; `middleware` wraps the metrics application."""

    def __init__(self, client: Sender, clock: Callable[[], float] = time.monotonic) -> None:
        self.client = client
        self._users = _Cache(clock)  # sha256(token) -> User | False
        self._decisions = _Cache(clock)  # (user, verb, path) -> (allowed, reason)

    async def authenticate(self, token: str) -> User | None:
        key = hashlib.sha256(token.encode()).hexdigest()
        cached = self._users.get(key)
        if cached is not None:
            return cached or None
        try:
            review = await self.client.send(kube.create_token_review(token), timeout=10.0)
        except (kube.ApiError, OSError) as err:
            raise ReviewFailed(f"TokenReview: {err}{_hint(err)}") from None
        status = (review or {}).get("status") or {}
        user: User | None = None
        if status.get("authenticated"):
            info = status.get("user") or {}
            extra = info.get("extra") or {}
            user = User(
                name=str(info.get("username") or ""),
                uid=str(info.get("uid") or ""),
                groups=tuple(str(g) for g in info.get("groups") or ()),
                extra=tuple(sorted((str(k), tuple(map(str, v))) for k, v in extra.items())),
            )
        self._users.put(key, user or False, AUTHN_TTL)
        return user

    async def authorize(self, user: User, verb: str, path: str) -> tuple[bool, str]:
        key = (user, verb, path)
        cached = self._decisions.get(key)
        if cached is not None:
            return bool(cached[0]), str(cached[1])
        request = kube.create_subject_access_review(user.review_spec(verb, path))
        try:
            review = await self.client.send(request, timeout=10.0)
        except (kube.ApiError, OSError) as err:
            raise ReviewFailed(f"SubjectAccessReview: {err}{_hint(err)}") from None
        status = (review or {}).get("status") or {}
        allowed = bool(status.get("allowed")) and not status.get("denied")
        reason = str(status.get("reason") or "")
        self._decisions.put(key, (allowed, reason), ALLOW_TTL if allowed else DENY_TTL)
        return allowed, reason

    @web.middleware
    async def middleware(self, request: web.Request, handler: Handler) -> web.StreamResponse:
        token = bearer_token(request.headers.get("Authorization"))
        try:
            user = await self.authenticate(token) if token else None
            if user is None:
                log.debug("metrics: %s %s: not authenticated", request.method, request.path)
                return web.Response(status=401, text="Unauthorized\n")
            allowed, reason = await self.authorize(user, request.method.lower(), request.path)
        except ReviewFailed as err:
            log.error("metrics: cannot check the caller of %s: %s", request.path, err)
            return web.Response(status=500, text="Authentication or authorization failed\n")
        if not allowed:
            log.debug(
                "metrics: %s may not %s %s: %s", user.name, request.method, request.path, reason
            )
            return web.Response(status=403, text=f"Authorization denied for user {user.name}\n")
        return await handler(request)
