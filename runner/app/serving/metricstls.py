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

import datetime
import ipaddress
import logging
import tempfile
from pathlib import Path

from runner.app.serving.tlsfiles import CertFiles, ReloadingTLS, load_pem, server_context

log = logging.getLogger("runner.metrics")

DEFAULT_CERT_DIR = Path(tempfile.gettempdir()) / "k8s-metrics-server" / "serving-certs"


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


class MetricsTLS:
    """The server's SSL context: a self-signed certificate, or files read again when they
    change (tlsfiles.py)."""

    def __init__(self, files: CertFiles | None) -> None:
        self.files = files
        self._files_tls: ReloadingTLS | None = None
        if files is None:
            self.context = server_context()
            load_pem(self.context, *self_signed())
            log.info("metrics: TLS with a self-signed certificate made at start-up")
        else:
            self._files_tls = ReloadingTLS(files, "metrics")
            self.context = self._files_tls.context
            log.info("metrics: TLS with %s (read again when it changes)", files.cert)

    @property
    def source(self) -> str:
        return "self-signed" if self.files is None else str(self.files.cert)

    def start(self) -> None:
        if self._files_tls is not None:
            self._files_tls.start()

    async def stop(self) -> None:
        if self._files_tls is not None:
            await self._files_tls.stop()
