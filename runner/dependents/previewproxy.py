"""The roles' proxy of `operator-runner preview`: reads reach the API server, writes never do.

A preview runs every CR's role in check mode against the live cluster. kubernetes.core writes
in check mode with `?dryRun=All`; the API server would store nothing, but every such request
still reaches it (and its admission webhooks) as a create, patch or delete. This proxy answers
them itself (dryrun.py: the object as it would be, from a read of it now and the write's body),
so that a preview's requests to the API server are reads only (GET, and watches), which its
audit log can show. Besides:

- a write without `dryRun` (a task with `check_mode: false`) is refused with 403 and a message
  that says why, which the task reports;
- an exec into a Pod (`kubernetes.core.k8s_exec`, which runs its command even in check mode)
  is not run: the role gets an exec session that ends at once with success and no output;
  attach and port-forward are refused;
- every write is recorded per CR (`writes_of`): the report lists what the run would write.

Owner references are added to created objects as the operator's proxy adds them, so that the
objects a preview shows are those the operator would write.
"""

from __future__ import annotations

import base64
import json
import logging
from dataclasses import dataclass

import aiohttp
from aiohttp import web

from runner.dependents import datastrings, secretdata
from runner.dependents.dryrun import Answer, DryRun, parse_body
from runner.dependents.ownership import Owner, RequestInfo, applies, mark, parse_path
from runner.dependents.patchschema import PatchSchemas
from runner.dependents.proxy import Proxy
from runner.dependents.relay import status_response
from runner.kube.client import AsyncUpstream

log = logging.getLogger("runner.proxy")

_READS = frozenset({"GET", "HEAD"})
REFUSED = (
    "operator-runner preview: {method} {path} was refused: a preview writes nothing, and this "
    "write is no dry run (a task that runs outside check mode, `check_mode: false`?)"
)
UPGRADE_REFUSED = (
    "operator-runner preview: {what} was refused: a preview runs nothing in the cluster"
)
READ_TIMEOUT = aiohttp.ClientTimeout(total=30)
_EXEC_SUCCESS = json.dumps({"metadata": {}, "status": "Success"}).encode()


@dataclass(frozen=True)
class Write:
    """A write a preview's run asked for, and how it was answered."""

    verb: str  # create, replace, patch, delete, exec, or a subresource's name; refused: +method
    resource: str  # the plural, with the subresource: pods/exec
    namespace: str
    name: str
    status: int  # the answer's HTTP status (101: an exec session)
    detail: str = ""  # the command of an exec

    def __str__(self) -> str:
        where = "/".join(p for p in (self.namespace, self.name) if p)
        text = f"{self.verb} {self.resource} {where}".rstrip()
        if self.detail:
            text += f": {self.detail}"
        if not 200 <= self.status < 300 and self.status != 101:
            text += f" (answered {self.status})"
        return text


def _cr_key(owner: Owner) -> tuple[str, str, str]:
    return (owner.kind, owner.namespace, owner.name)


class PreviewProxy(Proxy):
    """The preview's roles' proxy (module doc)."""

    def __init__(self, upstream: AsyncUpstream, *, inject: bool) -> None:
        super().__init__(upstream, inject=inject)
        self.dry_run = DryRun(self._read, PatchSchemas(self._discovery))
        self._writes: dict[tuple[str, str, str], list[Write]] = {}
        self.reads = 0  # requests forwarded (reads): the report's count

    def writes_of(self, kind: str, namespace: str, name: str) -> list[Write]:
        """The writes of the runs of that CR so far (forgotten once asked)."""
        return self._writes.pop((kind, namespace, name), [])

    async def handle(self, request: web.Request) -> web.StreamResponse:
        owner = self._owner(request)
        upgrade = request.headers.get("Upgrade", "").lower() == "websocket"
        if owner is None or (request.method in _READS and not upgrade):
            if owner is not None:
                self.reads += 1
            return await super().handle(request)  # refused there when it is not a run's
        info = parse_path(request.path)
        if upgrade:
            return await self._upgrade(request, owner, info)
        return await self._write(request, owner, info)

    # -- writes -----------------------------------------------------------------------------

    async def _write(
        self, request: web.Request, owner: Owner, info: RequestInfo | None
    ) -> web.StreamResponse:
        raw = await request.read()
        content_type = request.content_type
        values = self._values(request) if secretdata.is_secrets_path(request.path) else None
        if values is not None:
            secretdata.collect_request(raw, content_type, values)
        if info is None or "dryRun" not in request.query:
            self._record(owner, info, f"refused {request.method}", 403)
            message = REFUSED.format(method=request.method, path=request.path)
            return status_response(403, "Forbidden", message)
        if applies(request.method, info):
            raw = datastrings.fix_body(info, raw)  # as the operator's proxy writes it
        body = parse_body(raw, content_type)
        served = await self.resources.lookup(info)
        if (
            request.method == "POST"
            and self.inject
            and not served.virtual
            and applies("POST", info)
            and isinstance(body, dict)
        ):
            body = mark(info, body, owner, cluster_scoped=served.cluster_scoped)
        answer = await self.dry_run.answer(
            request.method, info, body, content_type, request.query, virtual=served.virtual
        )
        if values is not None and answer.ok:
            secretdata.collect(answer.body, values)
        self._record(owner, info, answer.verb, answer.status, name=_name(answer, body, info))
        return web.json_response(answer.body, status=answer.status)

    async def _read(self, path: str) -> tuple[int, dict[str, object] | None]:
        """GET `path` with the preview's credentials: (status, the object when 200); 503 when
        the API server cannot be reached."""
        headers = {**await self.upstream.auth_headers(), "Accept": "application/json"}
        try:
            async with self.upstream.session.get(
                self.upstream.url(path), headers=headers, timeout=READ_TIMEOUT
            ) as answer:
                if answer.status != 200:
                    return answer.status, None
                obj = json.loads(await answer.read())
        except (aiohttp.ClientError, OSError, TimeoutError) as err:
            log.debug("preview: GET %s: %s", path, err)
            return 503, None
        except ValueError:
            return 500, None
        return 200, obj if isinstance(obj, dict) else None

    # -- exec, attach, port-forward -----------------------------------------------------------

    async def _upgrade(
        self, request: web.Request, owner: Owner, info: RequestInfo | None
    ) -> web.StreamResponse:
        if info is None or info.plural != "pods" or info.subresource != "exec":
            what = (
                f"{info.subresource or 'the upgrade'} of {request.path}" if info else request.path
            )
            self._record(owner, info, "refused", 403)
            return status_response(403, "Forbidden", UPGRADE_REFUSED.format(what=what))
        command = " ".join(request.query.getall("command", []))
        status, _ = await self._read(info.path(info.name))
        if status != 200:
            self._record(owner, info, "exec", status, detail=command)
            return status_response(status, "NotFound", f'pods "{info.name}" not found')
        self._record(owner, info, "exec", 101, detail=command)
        offered = [p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",")]
        chosen = next((p for p in offered if p.endswith("channel.k8s.io")), "")
        session = web.WebSocketResponse(protocols=[chosen] if chosen else [])
        await session.prepare(request)
        if "base64" in chosen:
            await session.send_str("3" + base64.b64encode(_EXEC_SUCCESS).decode())
        else:
            await session.send_bytes(b"\x03" + _EXEC_SUCCESS)
        await session.close()
        return session

    def _record(
        self,
        owner: Owner,
        info: RequestInfo | None,
        verb: str,
        status: int,
        *,
        name: str = "",
        detail: str = "",
    ) -> None:
        resource = "?" if info is None else info.plural
        if info is not None and info.subresource:
            resource += f"/{info.subresource}"
        write = Write(
            verb,
            resource,
            info.namespace if info else "",
            name or (info.name if info else ""),
            status,
            detail,
        )
        log.debug("preview: %s (for %s %s)", write, owner.kind, owner.key_annotation)
        self._writes.setdefault(_cr_key(owner), []).append(write)


def _name(answer: Answer, body: object, info: RequestInfo) -> str:
    """The name of the object written: the answer's (a generated one), else the request's."""
    for obj in (answer.body if answer.ok else None, body):
        meta = obj.get("metadata") if isinstance(obj, dict) else None
        if isinstance(meta, dict) and meta.get("name") and meta.get("kind") != "Status":
            return str(meta["name"])
    return info.name
