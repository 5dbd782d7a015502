"""A server's TLS from certificate files that are read again when they change.

The way controller-runtime's certwatcher serves a mounted certificate (cert-manager's Secret in a
volume, renewed in place): `<dir>/tls.crt` and `<dir>/tls.key`, looked at every few seconds and
loaded into the same SSL context, so that the next connection gets the new certificate. Used by
/metrics (`--metrics-secure`, metricstls.py) and the webhook server (`--webhook-cert-dir`,
webhooks/certificates.py).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("runner.tls")

RELOAD_EVERY = 10.0  # seconds between looks at the certificate files


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path

    def stamp(self) -> tuple[float, float]:
        return (self.cert.stat().st_mtime, self.key.stat().st_mtime)

    def present(self) -> bool:
        return self.cert.is_file() and self.key.is_file()


def load_pem(context: ssl.SSLContext, cert: bytes, key: bytes) -> None:
    """Load a certificate and key made in memory (PEM) into `context`, through a private
    temporary folder (ssl reads files only)."""
    with tempfile.TemporaryDirectory(prefix="operator-runner-tls-") as tmp:
        cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
        cert_path.write_bytes(cert)
        fd = os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600)
        with os.fdopen(fd, "wb") as f:
            f.write(key)
        context.load_cert_chain(cert_path, key_path)


def server_context() -> ssl.SSLContext:
    """A server's SSL context: TLS 1.2 or newer, HTTP/1.1."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class ReloadingTLS:
    """`context` serves `files`; `start` looks at them every RELOAD_EVERY s and loads them again
    when they changed (a half-written pair is tried again the next time)."""

    def __init__(self, files: CertFiles, what: str, context: ssl.SSLContext | None = None) -> None:
        self.files = files
        self.what = what  # "metrics", "webhooks": named in the log lines
        self.context = context if context is not None else server_context()
        self._stamp: tuple[float, float] | None = None
        self._watch: asyncio.Task[None] | None = None
        self.load()

    def load(self) -> None:
        stamp = self.files.stamp()
        self.context.load_cert_chain(self.files.cert, self.files.key)
        self._stamp = stamp

    def start(self) -> None:
        if self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(
                self._reload(), name=f"{self.what}-certificate-reload"
            )

    async def _reload(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_EVERY)  # a schedule: look at the files again
            try:
                if self.files.stamp() != self._stamp:
                    self.load()
                    log.info("%s: certificate %s read again", self.what, self.files.cert)
            except (OSError, ssl.SSLError) as err:  # half-written by a renewal: next time
                log.warning(
                    "%s: certificate %s not read again: %s", self.what, self.files.cert, err
                )

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
