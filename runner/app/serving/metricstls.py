"""`--metrics-secure`: /metrics over TLS, with the certificate controller-runtime would use.

As controller-runtime's metrics server (pkg/metrics/server): the certificate and key are
`<dir>/tls.crt` and `<dir>/tls.key` (`--metrics-cert-path`, `--metrics-cert-name`,
`--metrics-cert-key`; the folder defaults to controller-runtime's
`$TMPDIR/k8s-metrics-server/serving-certs`) when both files exist, and are read again when
they change (cert-manager's renewals); otherwise a self-signed certificate for `localhost` and
127.0.0.1 is made at start-up, in memory (Prometheus scrapes with `insecure_skip_verify`, as
for kube-controller-manager). HTTP/1.1 only (`--enable-http2` has no effect).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime
import ipaddress
import logging
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

log = logging.getLogger("runner.metrics")

DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-metrics-server" / "serving-certs"
RELOAD_EVERY = 10.0  # seconds between looks at the certificate files


@dataclass(frozen=True)
class CertFiles:
    cert: Path
    key: Path

    def stamp(self) -> tuple[float, float]:
        return (self.cert.stat().st_mtime, self.key.stat().st_mtime)


def cert_files(cert_dir: str | None, cert_name: str, key_name: str) -> CertFiles | None:
    """The certificate and key to serve, or None when they are not both there (self-signed)."""
    folder = Path(cert_dir) if cert_dir else DEFAULT_CERT_DIR
    files = CertFiles(folder / cert_name, folder / key_name)
    if files.cert.is_file() and files.key.is_file():
        return files
    if cert_dir:  # asked for by name: say that it is not used
        log.warning(
            "--metrics-cert-path=%s: %s or %s is missing; serving a self-signed certificate",
            cert_dir,
            cert_name,
            key_name,
        )
    return None


def self_signed(host: str = "localhost") -> tuple[bytes, bytes]:
    """A self-signed certificate (PEM) for `host` and 127.0.0.1, and its key (PEM), valid for a
    year, as controller-runtime makes for its metrics server."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"{host}@operator-runner")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(hours=1))
        .not_valid_after(now + datetime.timedelta(days=365))
        .add_extension(
            x509.SubjectAlternativeName(
                [x509.DNSName(host), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
            ),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    return cert.public_bytes(serialization.Encoding.PEM), key_pem


def _context() -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.set_alpn_protocols(["http/1.1"])
    return context


class MetricsTLS:
    """The server's SSL context, and the watch that reloads a certificate from files."""

    def __init__(self, files: CertFiles | None) -> None:
        self.files = files
        self.context = _context()
        self._stamp: tuple[float, float] | None = None
        self._watch: asyncio.Task[None] | None = None
        if files is None:
            cert, key = self_signed()
            with tempfile.TemporaryDirectory(prefix="operator-runner-metrics-") as tmp:
                cert_path, key_path = Path(tmp) / "tls.crt", Path(tmp) / "tls.key"
                cert_path.write_bytes(cert)
                fd = os.open(key_path, os.O_WRONLY | os.O_CREAT, 0o600)
                with os.fdopen(fd, "wb") as f:
                    f.write(key)
                self.context.load_cert_chain(cert_path, key_path)
            log.info("metrics: TLS with a self-signed certificate made at start-up")
        else:
            self._load()
            log.info("metrics: TLS with %s (read again when it changes)", files.cert)

    @property
    def source(self) -> str:
        return "self-signed" if self.files is None else str(self.files.cert)

    def _load(self) -> None:
        assert self.files is not None
        stamp = self.files.stamp()
        self.context.load_cert_chain(self.files.cert, self.files.key)
        self._stamp = stamp

    def start(self) -> None:
        if self.files is not None and self._watch is None:
            self._watch = asyncio.get_running_loop().create_task(
                self._reload(), name="metrics-certificate-reload"
            )

    async def _reload(self) -> None:
        while True:
            await asyncio.sleep(RELOAD_EVERY)  # a schedule: look at the files again
            assert self.files is not None
            try:
                if self.files.stamp() != self._stamp:
                    self._load()
                    log.info("metrics: certificate %s read again", self.files.cert)
            except (OSError, ssl.SSLError) as err:  # half-written by a renewal: next time
                log.warning("metrics: certificate %s not read again: %s", self.files.cert, err)

    async def stop(self) -> None:
        if self._watch is not None:
            self._watch.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._watch
            self._watch = None
