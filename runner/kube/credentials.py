"""The operator's credentials: how it reaches the API server and authenticates to it (a token,
re-read when its file changes; a client certificate; basic auth; or the kubernetes package's
configuration for exec plugins and auth-providers), and the SSL context for its connections.

Where they come from is clientconfig.py's: in-cluster, or a kubeconfig (kubeconfig.py)."""

from __future__ import annotations

import base64
import os
import ssl
import threading
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

    def authorization(self) -> str | None:
        """The Authorization header's value, current (token files are re-read when changed)."""
        if self.fallback is not None:
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
