"""A throwaway PKI for the tests: the unit tests' TLS servers (tests/unit/fake_api/http.py) and
the integration tests' fault proxy (tests/integration/kit/faultproxy.py)."""

from __future__ import annotations

import datetime
from collections.abc import Sequence
from pathlib import Path
from typing import Any


class Pki:
    """A CA and one certificate it signs, as PEM bytes (`ca`, `cert`, `key`): ECDSA P-256, valid
    for a day, with the extensions strict X.509 checks (Python 3.13's default) want. With `names`,
    a server certificate for those DNS names only; without, a client certificate."""

    def __init__(self, subject: str = "me", names: Sequence[str] = ()) -> None:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

        now = datetime.datetime.now(datetime.UTC)
        ca_key, key = (
            ec.generate_private_key(ec.SECP256R1()),
            ec.generate_private_key(ec.SECP256R1()),
        )
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
        ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())

        def usage(ca: bool) -> x509.KeyUsage:
            return x509.KeyUsage(
                digital_signature=not ca,
                key_cert_sign=ca,
                crl_sign=ca,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                encipher_only=False,
                decipher_only=False,
            )

        def builder(subject: x509.Name, public_key: Any, ca: bool) -> x509.CertificateBuilder:
            return (
                x509.CertificateBuilder()
                .subject_name(subject)
                .issuer_name(ca_name)
                .public_key(public_key)
                .serial_number(x509.random_serial_number())
                .not_valid_before(now - datetime.timedelta(minutes=1))
                .not_valid_after(now + datetime.timedelta(days=1))
                .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
                .add_extension(usage(ca), critical=True)
            )

        ca = builder(ca_name, ca_key.public_key(), True).add_extension(ca_ski, critical=False)
        purpose = ExtendedKeyUsageOID.SERVER_AUTH if names else ExtendedKeyUsageOID.CLIENT_AUTH
        leaf = (
            builder(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, subject)]),
                key.public_key(),
                False,
            )
            .add_extension(x509.ExtendedKeyUsage([purpose]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False,
            )
        )
        if names:
            leaf = leaf.add_extension(
                x509.SubjectAlternativeName([x509.DNSName(n) for n in names]), critical=False
            )
        pem = serialization.Encoding.PEM
        self.ca = ca.sign(ca_key, hashes.SHA256()).public_bytes(pem)
        self.cert = leaf.sign(ca_key, hashes.SHA256()).public_bytes(pem)
        self.key = key.private_bytes(
            pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
        )

    def write(self, folder: Path) -> tuple[Path, Path, Path]:
        """ca.crt, tls.crt and tls.key in `folder`."""
        paths = (folder / "ca.crt", folder / "tls.crt", folder / "tls.key")
        for path, data in zip(paths, (self.ca, self.cert, self.key), strict=True):
            path.write_bytes(data)
        return paths
