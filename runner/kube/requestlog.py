"""Who wants to hear of every request the runner sends to the API server (for client-go's
`rest_client_requests_total{code,method,host}`, runner/app/serving/crmetrics.py).

The runner's aiohttp sessions to the API server (the client's and the upstream of the roles'
proxy and dependent watches) carry `trace_configs()`; each answered request calls the observers
with its method, host (`host:port` as in the URL) and status code, a request that got no answer
with the code `<error>`, as client-go does.
"""

from __future__ import annotations

from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import aiohttp
from yarl import URL

Observer = Callable[[str, str, str], None]  # method, host, code

_observers: list[Observer] = []


def add_observer(observer: Observer) -> None:
    _observers.append(observer)


def remove_observer(observer: Observer) -> None:
    if observer in _observers:
        _observers.remove(observer)


def host_of(url: URL) -> str:
    host = url.raw_host or ""
    return f"{host}:{url.port}" if url.explicit_port else host


def _tell(method: str, url: URL, code: str) -> None:
    for observer in list(_observers):
        observer(method.upper(), host_of(url), code)


async def _on_end(_: aiohttp.ClientSession, __: SimpleNamespace, params: Any) -> None:
    _tell(params.method, params.url, str(params.response.status))


async def _on_exception(_: aiohttp.ClientSession, __: SimpleNamespace, params: Any) -> None:
    _tell(params.method, params.url, "<error>")


def trace_configs() -> list[aiohttp.TraceConfig]:
    config = aiohttp.TraceConfig()
    config.on_request_end.append(_on_end)
    config.on_request_exception.append(_on_exception)
    return [config]
