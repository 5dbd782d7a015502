"""kopf's login: the operator's credentials, as kopf's ConnectionInfo."""

from __future__ import annotations

from runner.app.kopf_import import kopf
from runner.kube import credentials as creds


def connection_info(credentials: creds.Credentials, trust_env: bool = False) -> kopf.ConnectionInfo:
    """kopf's login: our credentials, with the token as it is now."""
    header = credentials.authorization()
    scheme, _, token = header.partition(" ") if header else ("", "", "")
    basic = scheme == "Basic"  # kopf builds that header itself from username and password
    return kopf.ConnectionInfo(
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
    )
