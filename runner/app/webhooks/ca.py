"""The webhooks' certificates, made here (pure): a CA, and serving certificates it signs.

ECDSA P-256 keys and SHA-256 signatures, as cert-manager and controller-runtime's tooling make
them by default; every certificate as PEM. A serving certificate names the hosts the API server
calls (IP addresses as IP SANs, anything else as DNS names) and never outlives its CA.
"""

from __future__ import annotations

import datetime
import ipaddress
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

PEM_END = b"-----END CERTIFICATE-----"
BACKDATE = datetime.timedelta(minutes=5)  # clocks of the API server and the operator may differ


@dataclass(frozen=True)
class KeyPair:
    """A certificate and its private key, PEM."""

    cert: bytes
    key: bytes

    @property
    def certificate(self) -> x509.Certificate:
        return x509.load_pem_x509_certificate(self.cert)


def _key_pem(key: ec.EllipticCurvePrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )


def _utc(moment: datetime.datetime) -> datetime.datetime:
    return moment if moment.tzinfo else moment.replace(tzinfo=datetime.UTC)


def new_ca(common_name: str, lifetime: datetime.timedelta, now: datetime.datetime) -> KeyPair:
    """A self-signed CA that may sign serving certificates (and nothing below them)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common_name)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_utc(now) - BACKDATE)
        .not_valid_after(_utc(now) + lifetime)
        .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def _alt_names(names: Iterable[str]) -> list[x509.GeneralName]:
    result: list[x509.GeneralName] = []
    for name in names:
        try:
            result.append(x509.IPAddress(ipaddress.ip_address(name)))
        except ValueError:
            result.append(x509.DNSName(name))
    return result


def sign_serving(
    ca: KeyPair, names: Sequence[str], lifetime: datetime.timedelta, now: datetime.datetime
) -> KeyPair:
    """A serving certificate for `names` signed by `ca`, valid for `lifetime` but never past
    the CA's own end."""
    ca_cert = ca.certificate
    ca_key = serialization.load_pem_private_key(ca.key, password=None)
    assert isinstance(ca_key, ec.EllipticCurvePrivateKey)
    key = ec.generate_private_key(ec.SECP256R1())
    end = min(_utc(now) + lifetime, ca_cert.not_valid_after_utc)
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, names[0])]))
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(_utc(now) - BACKDATE)
        .not_valid_after(end)
        .add_extension(x509.SubjectAlternativeName(_alt_names(names)), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_cert.public_key()),  # type: ignore[arg-type]
            critical=False,
        )
        .sign(ca_key, hashes.SHA256())
    )
    return KeyPair(cert.public_bytes(serialization.Encoding.PEM), _key_pem(key))


def split_bundle(pem: bytes) -> list[bytes]:
    """The certificates of a PEM bundle, each as its own PEM."""
    parts = []
    for chunk in pem.split(PEM_END):
        start = chunk.find(b"-----BEGIN CERTIFICATE-----")
        if start >= 0:
            parts.append(chunk[start:] + PEM_END + b"\n")
    return parts


def not_after(pem: bytes) -> datetime.datetime:
    return x509.load_pem_x509_certificate(pem).not_valid_after_utc


def lifetime_of(pem: bytes) -> datetime.timedelta:
    cert = x509.load_pem_x509_certificate(pem)
    return cert.not_valid_after_utc - cert.not_valid_before_utc - BACKDATE


def names_of(pem: bytes) -> set[str]:
    """The DNS names and IP addresses a certificate names."""
    cert = x509.load_pem_x509_certificate(pem)
    try:
        alt = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    except x509.ExtensionNotFound:
        return set()
    return {*alt.get_values_for_type(x509.DNSName)} | {
        str(ip) for ip in alt.get_values_for_type(x509.IPAddress)
    }


def signed_by(cert_pem: bytes, ca_pem: bytes) -> bool:
    """Whether `ca_pem` signed `cert_pem` (its issuer and signature)."""
    cert = x509.load_pem_x509_certificate(cert_pem)
    ca = x509.load_pem_x509_certificate(ca_pem)
    if cert.issuer != ca.subject:
        return False
    try:
        cert.verify_directly_issued_by(ca)
    except (ValueError, TypeError, InvalidSignature):
        return False
    return True
