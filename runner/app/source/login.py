"""Logging in: the first request, which says what to fix when the server's certificate does not
verify; and the operator's credentials, as kopf's ConnectionInfo."""

from __future__ import annotations

import ssl
from collections.abc import Callable
from dataclasses import dataclass, field

from runner.app.source.kopf_import import kopf
from runner.kube import client as kube
from runner.kube import credentials as creds


@dataclass(frozen=True, kw_only=True)
class OurConnectionInfo(kopf.ConnectionInfo):
    """kopf's ConnectionInfo whose sessions use the SSL context of our credentials.

    kopf builds its own context from the CA, client certificate and `insecure`, and knows no
    `tls-server-name`; ours does (`Credentials.ssl_context`). So kopf's watches and our clients
    make their TLS connections one way."""

    ssl_context: Callable[[], ssl.SSLContext] = field(compare=False, repr=False)

    def as_ssl_context(self) -> ssl.SSLContext:
        return self.ssl_context()


def connection_info(credentials: creds.Credentials, trust_env: bool = False) -> kopf.ConnectionInfo:
    """kopf's login: our credentials, with the token as it is now."""
    header = credentials.authorization()
    scheme, _, token = header.partition(" ") if header else ("", "", "")
    basic = scheme == "Basic"  # kopf builds that header itself from username and password
    return OurConnectionInfo(
        server=credentials.server,
        ca_path=credentials.ca_file,
        insecure=credentials.insecure,
        username=credentials.username if basic else None,
        password=credentials.password if basic else None,
        scheme=None if basic else scheme or None,
        token=None if basic else token or None,
        certificate_path=credentials.cert_file,
        private_key_path=credentials.key_file,
        default_namespace=credentials.namespace,
        trust_env=trust_env,
        ssl_context=credentials.ssl_context,
    )


async def certificate_refused(client: kube.KubeClient) -> str | None:
    """One GET /version before anything else is started: what to fix when the server's
    certificate does not verify (no retry helps that); else None, an outage included (it is
    waited out, as it is later on)."""
    try:
        await client.send(kube.Request("GET", "/version"), timeout=10)
    except kube.CertificateRejected as err:
        return str(err)
    except (kube.ApiError, OSError):
        pass
    return None
