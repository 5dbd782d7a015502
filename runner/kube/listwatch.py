"""List a collection, then watch it, as client-go's reflector does.

`ListWatch.changes()` is an async iterator, until cancelled, of what happens in one collection:

- `Listed(items)`: the collection as a list returned it, one page (`limit`, `continue`) at a
  time so that no more than a page is ever held: first, and again whenever the watch cannot go
  on from where it was (`relist`: compare with what you knew). `first` marks a listing's first
  page (what an unfinished listing gave before is void), `last` its last one;
- `Event(type, object)`: ADDED, MODIFIED or DELETED, from a watch that starts at the listing's
  resourceVersion (`allowWatchBookmarks`, `timeoutSeconds`).

`params` (a `labelSelector`, a `fieldSelector`) go with the list and the watch alike: the API
server sends only the objects they select (and DELETED for an object that stops matching).

The resourceVersion of every event and bookmark is remembered: when the server ends the stream
(its timeout), the watch goes on from there, with no new list. 410 Gone (that resourceVersion is
too old: compacted while the stream was down; or a listing's continue token expired) lists again
at once, from its first page. Any other failure (the server
unreachable, an error status, a stream cut off or silent for longer than its timeout) is tried
again after a backoff, 1 s doubling to 30 s, reset once a request succeeds: the watch from the
last resourceVersion, or the list when there is none yet. One line is logged per failure, with
the error as its argument (the outage filter turns connection errors into one line per outage).
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections.abc import AsyncIterator, Mapping
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlencode

import aiohttp

from runner.kube.client import ApiError, AsyncUpstream

log = logging.getLogger("runner.listwatch")

JSON = dict[str, Any]
#: The longest watch event read (a line of JSON): Kubernetes objects stay below ~1.5 MiB.
MAX_EVENT_BYTES = 16 * 1024 * 1024
#: Objects per page of a listing (client-go's reflector asks for 500 too).
PAGE_SIZE = 500


@dataclass(frozen=True)
class Listed:
    """One page of the collection's objects, as a list returned them."""

    items: list[JSON]
    relist: bool  # False for the first listing
    first: bool = True  # the listing's first page: what an unfinished one gave is void
    last: bool = True  # the listing's last page: the collection is whole


@dataclass(frozen=True)
class Event:
    """One watch event: ADDED, MODIFIED or DELETED, and the object."""

    type: str
    object: JSON


class Gone(ApiError):
    """410 Gone: the resourceVersion to watch from is too old; list again."""


def _resource_version(obj: JSON) -> str:
    return str((obj.get("metadata") or {}).get("resourceVersion") or "")


class ListWatch:
    """The list and watch of one collection (`path`, as paths.py builds it), with `params`."""

    def __init__(
        self,
        upstream: AsyncUpstream,
        path: str,
        *,
        name: str = "",
        params: Mapping[str, str] | None = None,
        page_size: int = PAGE_SIZE,
        timeout_seconds: int = 300,
        backoff: tuple[float, float] = (1.0, 30.0),
    ) -> None:
        self.upstream = upstream
        self.path = path
        self.name = name or f"watch {path}"  # in log lines
        self.params = dict(params or {})
        self.page_size = page_size
        self.timeout_seconds = timeout_seconds
        self.backoff = backoff
        self.resource_version = ""  # where the next watch starts; "" lists first

    async def changes(self) -> AsyncIterator[Listed | Event]:
        delay = self.backoff[0]
        listed = False
        while True:
            try:
                if not self.resource_version:
                    async for page in self._list(relist=listed):
                        delay = self.backoff[0]
                        yield page
                    listed = True
                async for event in self._watch():
                    delay = self.backoff[0]
                    yield event
                # the server ended the stream (its timeout): go on from the last resourceVersion
                delay = self.backoff[0]
            except Gone as err:
                log.info("%s lists again: %s", self.name, err)
                self.resource_version = ""
            except Exception as err:  # unreachable, an error status, a stream cut off, bad JSON
                log.info("%s restarts: %s", self.name, err)
                await asyncio.sleep(delay)
                delay = min(delay * 2, self.backoff[1])

    def _url(self, params: Mapping[str, str]) -> str:
        query = {**self.params, **params}
        return self.upstream.url(f"{self.path}?{urlencode(query)}" if query else self.path)

    async def _list(self, relist: bool) -> AsyncIterator[Listed]:
        """The listing's pages; the watch's resourceVersion is set once the last one is read
        (a listing cut short starts again from its first page)."""
        upstream = self.upstream
        token, first = "", True
        while True:
            params = {"limit": str(self.page_size)} if self.page_size else {}
            if token:
                params["continue"] = token
            async with upstream.session.get(
                self._url(params), headers=await upstream.auth_headers()
            ) as response:
                body = await response.read()
                if response.status != 200:
                    error = Gone if response.status == 410 else ApiError
                    raise error(response.status, response.reason or "", body.decode())
                listing = json.loads(body)
            del body
            metadata = listing.get("metadata") or {}
            token = str(metadata.get("continue") or "")
            if not token:
                self.resource_version = _resource_version(listing)
            yield Listed(list(listing.get("items") or []), relist, first=first, last=not token)
            if not token:
                return
            first = False

    async def _watch(self) -> AsyncIterator[Event]:
        upstream = self.upstream
        params = {
            "watch": "1",
            "allowWatchBookmarks": "true",
            "resourceVersion": self.resource_version,
            "timeoutSeconds": str(self.timeout_seconds),
        }
        url = self._url(params)
        # nothing for longer than the server's own timeout: the connection is gone
        timeout = aiohttp.ClientTimeout(
            total=None, sock_connect=10, sock_read=self.timeout_seconds + 30
        )
        async with upstream.session.get(
            url, headers=await upstream.auth_headers(), timeout=timeout
        ) as response:
            if response.status != 200:
                error = Gone if response.status == 410 else ApiError
                raise error(
                    response.status, response.reason or "", (await response.read()).decode()
                )
            while line := await response.content.readline(max_line_length=MAX_EVENT_BYTES):
                if not line.strip():
                    continue
                event = json.loads(line)
                kind, obj = event.get("type"), event.get("object") or {}
                if kind == "ERROR":  # a Status: 410 Expired, ...
                    code = int(obj.get("code") or 500)
                    error = Gone if code == 410 else ApiError
                    raise error(code, str(obj.get("reason") or ""), json.dumps(obj))
                self.resource_version = _resource_version(obj) or self.resource_version
                if kind in ("ADDED", "MODIFIED", "DELETED"):
                    yield Event(kind, obj)  # BOOKMARK: only its resourceVersion counts
