"""The roles' door to the API server: a local proxy that marks what they write.

Each run gets a kubeconfig that points at this proxy (http://127.0.0.1:<port>) with a token
of its own, valid for that run only. The proxy

- refuses clients that are not on the loopback and tokens it did not hand out;
- forwards every request to the API server with the operator's credentials (which therefore
  never reach the role, its kubeconfig or the runner artifacts);
- streams responses (watch, follow=true logs) and relays WebSocket upgrades (exec, attach,
  port-forward) unchanged;
- adds the run's CR as owner (or the primary-resource annotations) to every object the role
  creates (a POST, or a PUT, patch or apply that the API server answers 201 Created), when
  owner injection is on, as operator-sdk does; with `adopt` (`--owner-ref-on-update`) to
  every object written (replace, patch, apply of objects that existed before too); which of
  the two, and whether anything at all, is discovery's to say (`apiresources`): a virtual
  resource (SelfSubjectAccessReview, TokenReview, ...) gets nothing, a cluster-scoped one of a
  namespaced CR the annotations only;
- reports what kinds were written so that the operator watches them (virtual ones never), and
  when the write of an object begins and ends (inflight.py: no run for a role's own write);
- reports the objects a run reads by name, of the kinds its watch follows (`watchReads`), found
  or not, so that their changes reconcile its CR (runner/dependents/references.py);
- collects the values of the Secrets a run reads or writes (`secretdata`), which the
  operator then masks in what it says about the run (runner/util/redact.py).

With `read_only` (the admission webhooks' roles, which must change nothing while the API server
waits for their answer, dry-run requests included) it forwards reads only (GET, HEAD; watches
too) and answers every other request, and every upgrade (exec, attach, port-forward), with 403
and a message that says so, which the role's task reports.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import shutil
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

import aiohttp
from aiohttp import web

from runner.dependents import datastrings, secretdata
from runner.dependents.apiresources import ApiResources, Served
from runner.dependents.inflight import Key, WritesInFlight, written_key
from runner.dependents.ownership import (
    Owner,
    RequestInfo,
    applies,
    fixup_patch,
    mark,
    parse_path,
)
from runner.dependents.relay import (
    forward_headers,
    relay,
    relay_websocket,
    status_response,
    whole_response,
)
from runner.dependents.runaccess import is_loopback, kubeconfig_text, token_of
from runner.kube import reachability
from runner.kube.client import JSON_PATCH, AsyncUpstream
from runner.kube.reachability import is_connection_error, summary
from runner.util import tempdirs
from runner.util.redact import SecretValues, mask_secret_text

log = logging.getLogger("runner.proxy")

#: Each run's kubeconfig is written here (removed on stop, and by the next operator if this
#: one was killed).
KUBECONFIGS_DIR_PREFIX = "operator-runner-kubeconfigs-"

WriteListener = Callable[[RequestInfo, Owner, dict[str, Any]], None]
ReadFollows = Callable[[Owner, str, str, str], bool]  # routing.Routes.follows
ReadListener = Callable[[RequestInfo, Owner, dict[str, Any] | None], None]  # None: not found
_READS = frozenset({"GET", "HEAD"})
READ_ONLY_MESSAGE = (
    "operator-runner: admission roles may only read: {method} {path} was refused (a validate "
    "or mutate role answers the API server and changes nothing; use lookups and k8s_info)"
)
_JSON_TYPES = (
    "application/json",
    "application/merge-patch+json",
    "application/strategic-merge-patch+json",
    "application/json-patch+json",
    "application/apply-patch+yaml",
)


class Proxy:
    def __init__(
        self,
        upstream: AsyncUpstream,
        *,
        inject: bool,
        adopt: bool = False,
        on_write: WriteListener | None = None,
        follows: ReadFollows | None = None,
        on_read: ReadListener | None = None,
        writes: WritesInFlight | None = None,
        host: str = "127.0.0.1",
        read_only: bool = False,
    ) -> None:
        self.upstream = upstream
        self.read_only = read_only  # reads only: the admission roles' proxy
        self.inject = inject and not read_only
        self.adopt = adopt  # owner references on updates of existing objects too
        self.on_write = on_write
        self.follows, self.on_read = follows, on_read
        self.writes = writes or WritesInFlight()  # whose events the watches hold till answered
        self.host = host
        self.url = ""
        self._owners: dict[str, Owner] = {}
        self._secrets: dict[str, SecretValues] = {}
        self._runner: web.AppRunner | None = None
        self._kubeconfigs = tempdirs.private_dir(KUBECONFIGS_DIR_PREFIX)
        self.resources = ApiResources(self._discovery)

    # -- lifecycle --------------------------------------------------------------------------

    async def start(self, port: int = 0) -> None:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.host, port).start()
        bound = self._runner.addresses[0][1]  # (host, port): the port given, or the one chosen
        self.url = f"http://{self.host}:{bound}"
        log.info(
            "API proxy for %s listening on %s",
            "admission roles (read only)" if self.read_only else "roles",
            self.url,
        )

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        shutil.rmtree(self._kubeconfigs, ignore_errors=True)

    def register(self, owner: Owner, values: SecretValues | None = None) -> str:
        token = secrets.token_urlsafe(32)
        self._owners[token] = owner
        if values is not None:
            self._secrets[token] = values
        return token

    def unregister(self, token: str) -> None:
        self._owners.pop(token, None)
        self._secrets.pop(token, None)

    @contextmanager
    def run_env(self, owner: Owner, values: SecretValues | None = None) -> Iterator[dict[str, str]]:
        """The environment of one run: a kubeconfig (0600, outside the artifacts) that reaches
        the API through this proxy with a token valid until the run ends; the values of the
        Secrets the run reads or writes are added to `values`."""
        token = self.register(owner, values)
        path = self._kubeconfigs / f"{secrets.token_hex(8)}.json"
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w", encoding="utf-8") as f:
            f.write(kubeconfig_text(self.url, token, owner.namespace))
        try:
            yield {"KUBECONFIG": str(path), "K8S_AUTH_KUBECONFIG": str(path)}
        finally:
            self.unregister(token)
            path.unlink(missing_ok=True)

    # -- requests ---------------------------------------------------------------------------

    async def handle(self, request: web.Request) -> web.StreamResponse:
        written: list[Key] = []  # the object it writes, while it does (inflight.py)
        try:
            return await self._handle(request, written)
        finally:
            for key in written:
                self.writes.end(key)

    async def _handle(self, request: web.Request, written: list[Key]) -> web.StreamResponse:
        if not is_loopback(request.remote):
            return status_response(
                403, "Forbidden", "the operator's API proxy serves the loopback only"
            )
        owner = self._owner(request)
        if owner is None:
            return status_response(401, "Unauthorized", "unknown or expired run token")
        if self.read_only and (
            request.method not in _READS
            or request.headers.get("Upgrade", "").lower() == "websocket"
        ):
            message = READ_ONLY_MESSAGE.format(method=request.method, path=request.path)
            return status_response(403, "Forbidden", message)
        if request.headers.get("Upgrade", "").lower() == "websocket":
            return await relay_websocket(self.upstream, request)
        info = parse_path(request.path)
        body = await request.read()
        values = self._values(request) if secretdata.is_secrets_path(request.path) else None
        if values is not None:
            secretdata.collect_request(body, request.content_type, values)
        if applies(request.method, info) and _is_json(request):
            body = datastrings.fix_body(info, body)  # ansible-core 2.19's typed templates
        # what discovery says of a written resource: virtual ones are left alone entirely
        served = None
        if info is not None and applies(request.method, info):
            served = await self.resources.lookup(info)
        stored = served is not None and not served.virtual
        writes = self.inject and stored and _is_json(request)
        marks_body = request.method == "POST" or (self.adopt and request.method == "PUT")
        if writes and marks_body and info is not None and served is not None:
            body = _marked_body(body, info, owner, served)
        followed = await self._followed(request, info, owner)  # the kind of a followed read
        if (key := written_key(request.method, info, body)) is not None:
            written.append(self.writes.begin(key))
        headers = forward_headers(request.headers)
        headers.update(await self.upstream.auth_headers())
        headers["Accept-Encoding"] = "identity"
        try:
            upstream = await self.upstream.session.request(
                request.method,
                self.upstream.url(request.path_qs),
                headers=headers,
                data=body or None,
                allow_redirects=False,
                # the role's Content-Type or none, as it sent it: aiohttp's default for bytes
                # (application/octet-stream) is refused by the API server (415)
                skip_auto_headers=("Content-Type",),
            )
        except (aiohttp.ClientError, OSError) as err:
            if not is_connection_error(err):
                raise
            reachability.API.failed(err, f"roles' proxy: {request.method} {request.path}")
            return status_response(
                503, "ServiceUnavailable", f"the API server cannot be reached: {summary(err)}"
            )
        try:
            if followed and info is not None and upstream.status in (200, 404):
                return await self._after_read(upstream, info, owner, followed, values)
            if info is not None and served is not None and stored and 200 <= upstream.status < 300:
                # operator-sdk marks only what a role creates; an update of an object that
                # existed before (the role's or someone else's) is left as it was, unless adopt
                created = request.method == "POST" or upstream.status == 201
                mark_it = writes and (created or self.adopt)
                return await self._after_write(
                    request, upstream, info, owner, served if mark_it else None, values
                )
            return await relay(request, upstream, values)
        finally:
            upstream.release()

    async def _followed(self, request: web.Request, info: RequestInfo | None, owner: Owner) -> str:
        """The kind of the object a GET by name reads, when the owner's watch follows it."""
        follows, query = self.follows, request.query
        if follows is None or request.method != "GET" or info is None or "watch" in query:
            return ""
        if not info.name or info.subresource or not follows(owner, info.group, info.version, ""):
            return ""  # not one object, or no kind of its group version followed (no discovery)
        served = await self.resources.lookup(info)
        found = not served.virtual and follows(owner, info.group, info.version, served.kind)
        return served.kind if found else ""

    async def _after_read(
        self,
        upstream: aiohttp.ClientResponse,
        info: RequestInfo,
        owner: Owner,
        kind: str,
        values: SecretValues | None,
    ) -> web.StreamResponse:
        """A followed read: the object as read (200), or None (404), to the listener."""
        raw = await upstream.read()
        obj: dict[str, Any] | None = None
        if upstream.status == 200:
            try:
                obj = json.loads(raw)
            except ValueError:
                return whole_response(upstream, raw)
            if not isinstance(obj, dict) or obj.get("kind") != kind:
                return whole_response(upstream, raw)  # a Table, metadata only: not the object
            if values is not None:
                secretdata.collect(obj, values)
        try:
            if self.on_read is not None:
                self.on_read(info, owner, obj)
        except Exception:  # a listener's bug must not fail the role's request
            log.exception("read-following listener failed")
        return whole_response(upstream, raw)

    async def _discovery(self, path: str) -> dict[str, Any] | None:
        """A discovery document for `apiresources`: {} when not served, None when not read."""
        headers = {**await self.upstream.auth_headers(), "Accept": "application/json"}
        try:
            async with self.upstream.session.get(
                self.upstream.url(path), headers=headers, timeout=aiohttp.ClientTimeout(total=10)
            ) as response:
                if response.status == 404:
                    return {}
                if response.status != 200:
                    log.debug("discovery %s: %s %s", path, response.status, response.reason)
                    return None
                answer = json.loads(await response.read())
        except (aiohttp.ClientError, OSError, ValueError) as err:
            log.debug("discovery %s: %s", path, err)
            return None
        return answer if isinstance(answer, dict) else None

    def _owner(self, request: web.Request) -> Owner | None:
        return self._owners.get(token_of(request))

    def _values(self, request: web.Request) -> SecretValues | None:
        return self._secrets.get(token_of(request))

    async def _after_write(
        self,
        request: web.Request,
        upstream: aiohttp.ClientResponse,
        info: RequestInfo,
        owner: Owner,
        inject: Served | None,
        values: SecretValues | None,
    ) -> web.StreamResponse:
        """Add the owner where the write did not (patches, apply), then report the kind.
        `inject`: the written resource, when the owner is to be added; None: not."""
        raw = await upstream.read()
        try:
            obj = json.loads(raw)
        except ValueError:
            return whole_response(upstream, raw)
        if values is not None:
            secretdata.collect(obj, values)
        dry_run = "dryRun" in request.query
        if inject is not None and not dry_run and isinstance(obj, dict) and obj.get("metadata"):
            obj, raw = await self._fixup(info, obj, owner, raw, inject, values)
        if self.on_write is not None and isinstance(obj, dict) and not dry_run:
            try:
                self.on_write(info, owner, obj)
            except Exception:  # a listener's bug must not fail the role's request
                log.exception("dependent-watch listener failed")
        return whole_response(upstream, raw)

    async def _fixup(
        self,
        info: RequestInfo,
        obj: dict[str, Any],
        owner: Owner,
        raw: bytes,
        served: Served,
        values: SecretValues | None = None,
    ) -> tuple[dict[str, Any], bytes]:
        name = (obj.get("metadata") or {}).get("name") or info.name
        namespace = info.namespace
        ops = fixup_patch(info, obj, owner, cluster_scoped=served.cluster_scoped)
        if not ops or not name:
            return obj, raw
        path = info.path(name)
        headers = {
            **(await self.upstream.auth_headers()),
            "Content-Type": JSON_PATCH,
            "Accept": "application/json",
        }
        async with self.upstream.session.patch(
            self.upstream.url(path), data=json.dumps(ops), headers=headers
        ) as response:
            body = await response.read()
            if 200 <= response.status < 300:
                return json.loads(body), body
            said = body[:300].decode(errors="replace")  # the API server's Status, masked
            said = values.redact(said) if values is not None else mask_secret_text(said)
            log.warning(
                "could not mark %s %s/%s as owned by %s: %s %s",
                info.plural,
                namespace,
                name,
                owner.key_annotation,
                response.status,
                said,
            )
            return obj, raw


def _is_json(request: web.Request) -> bool:
    """A JSON body: its Content-Type says so, or a create or replace says none, which the API
    server reads as JSON (the kubernetes client 37 sends no Content-Type on create)."""
    if "Content-Type" not in request.headers:
        return request.method in ("POST", "PUT")
    return request.content_type in _JSON_TYPES


def _marked_body(body: bytes, info: RequestInfo, owner: Owner, served: Served) -> bytes:
    try:
        obj = json.loads(body)
    except ValueError:
        return body
    if not isinstance(obj, dict):
        return body
    return json.dumps(mark(info, obj, owner, cluster_scoped=served.cluster_scoped)).encode()
