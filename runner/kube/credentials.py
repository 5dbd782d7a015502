"""The operator's credentials: how it reaches the API server and authenticates to it (a token,
re-read when its file changes; a client certificate; basic auth; or the kubernetes package's
configuration for exec plugins and auth-providers), and the SSL context for its connections.

Where they come from is clientconfig.py's: in-cluster, or a kubeconfig (kubeconfig.py)."""

from __future__ import annotations

import asyncio
import base64
import os
import ssl
import threading
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.kube.tlsname import ServerNamedContext


class CredentialsError(ValueError):
    """The credentials cannot be loaded: says which file, context, cluster or user, and why."""


class _TokenFile:
    """A token file, re-read when it changes (the kubelet rotates service-account tokens)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[int, int, int] | None = None
        self._token: str | None = None

    def read(self, path: str) -> str:
        with self._lock:
            try:
                st = os.stat(path)
                key = (st.st_ino, st.st_mtime_ns, st.st_size)
                if key != self._key or self._token is None:
                    token = Path(path).read_text().strip()
                    if token or self._token is None:
                        self._token, self._key = token, key
            except OSError as err:
                if self._token is None:
                    raise CredentialsError(f"cannot read the token file {path}: {err}") from err
            return self._token or ""


class _OffTheLoop:
    """The kubernetes package's credential hook, run in a thread, one call at a time.

    Its hook runs the exec plugin (or the auth-provider's refresh) when the token is about to
    expire: a command that may take seconds. Run on the event loop, it would stall every watch,
    the roles' proxy and the endpoints meanwhile. The requests that need the header while a call
    is under way share that call (one plugin run, one thread of the loop's default executor,
    which aiohttp also needs for its name lookups), and the lock keeps kopf's login (in a thread
    of its own) from running the plugin beside it."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self._pending: tuple[asyncio.AbstractEventLoop, asyncio.Future[str | None]] | None = None

    async def call(self, header: Callable[[], str | None]) -> str | None:
        loop = asyncio.get_running_loop()
        pending = self._pending
        if pending is None or pending[0] is not loop or pending[1].done():
            pending = (loop, loop.run_in_executor(None, header))
            self._pending = pending
        return await asyncio.shield(pending[1])


@dataclass(frozen=True)
class Credentials:
    """How to reach and authenticate to the API server."""

    server: str
    ca_file: str | None = None
    insecure: bool = False
    tls_server_name: str | None = None
    token: str | None = field(default=None, repr=False)
    token_file: str | None = None
    cert_file: str | None = None
    key_file: str | None = None
    username: str | None = None
    password: str | None = field(default=None, repr=False)
    namespace: str | None = None  # the context's (or the service account's) namespace
    context: str | None = None  # the kubeconfig context they come from
    source: str = ""  # where they come from, for messages
    plugin: str | None = None  # "exec" or "auth-provider": needs the kubernetes package
    fallback: Any = field(default=None, repr=False, compare=False)  # kubernetes Configuration
    _token_file: _TokenFile = field(
        default_factory=_TokenFile, init=False, repr=False, compare=False
    )
    _off_the_loop: _OffTheLoop = field(
        default_factory=_OffTheLoop, init=False, repr=False, compare=False
    )

    async def authorization_header(self) -> str | None:
        """The Authorization header's value for a request sent from the event loop: the one
        path of every client of ours (`KubeClient`, the roles' proxy and the dependent watches'
        `AsyncUpstream`). A token or token file is read on the loop (a stat, and a small file
        when the kubelet rotated it); the kubernetes package's hook, which may run an exec
        plugin, in a thread (`_OffTheLoop`)."""
        if self.fallback is None:
            return self.authorization()
        return await self._off_the_loop.call(self.authorization)

    def authorization(self) -> str | None:
        """The Authorization header's value, current (token files are re-read when changed).
        Blocking for exec plugins: on the event loop, use `authorization_header`."""
        if self.fallback is not None:
            with self._off_the_loop.lock:
                header = self.fallback.get_api_key_with_prefix(
                    "BearerToken"
                ) or self.fallback.get_api_key_with_prefix("authorization")
            return str(header) if header else None
        if self.token:
            return f"Bearer {self.token}"
        if self.token_file:
            token = self._token_file.read(self.token_file)
            return f"Bearer {token}" if token else None
        if self.username is not None or self.password is not None:
            pair = f"{self.username or ''}:{self.password or ''}".encode()
            return f"Basic {base64.b64encode(pair).decode('ascii')}"
        return None

    def ssl_context(self) -> ssl.SSLContext:
        """For an https server. With `tls-server-name`, every connection made with it checks the
        certificate against that name, whatever host it dials (client-go's ServerName)."""
        if self.tls_server_name:
            context: ssl.SSLContext = ServerNamedContext(self.tls_server_name, self.ca_file)
        else:
            context = ssl.create_default_context(cafile=self.ca_file)
        if self.cert_file:
            context.load_cert_chain(self.cert_file, self.key_file)
        if self.insecure:
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        return context
