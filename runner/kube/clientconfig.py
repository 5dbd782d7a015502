"""The operator's credentials: in-cluster service account or kubeconfig, without `kubernetes`.

The `kubernetes` package costs the operator process ~60 MB (its generated models), so the usual
credentials are read here instead:

- in-cluster (no kubeconfig given and `KUBERNETES_SERVICE_HOST` set): the server from
  `KUBERNETES_SERVICE_HOST`/`KUBERNETES_SERVICE_PORT`, the service account's token (re-read when
  the kubelet rotates it), CA and namespace, as client-go does;
- a kubeconfig: the one given, else `$KUBECONFIG` (a list of files merged as kubectl merges
  them: the first file to name a cluster, user or context wins, and the first current-context),
  else `~/.kube/config`. Natively: `server`, `certificate-authority(-data)`,
  `insecure-skip-tls-verify`, `tls-server-name`, `token`, `tokenFile`,
  `client-certificate(-data)`, `client-key(-data)`, `username`/`password` and the context's
  `namespace`. Relative paths are resolved against the directory of the file that names them,
  `*-data` fields are written to private files (ssl needs files).

Users with an `exec` plugin or an `auth-provider` fall back to the `kubernetes` package's loader,
imported only then (with its token refresh), exactly as before.

Parsing (kubeconfig.py's `parse_kubeconfig`, `in_cluster`) is kept apart from reading files
(`load`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import replace
from pathlib import Path

from runner.kube.credentials import Credentials, CredentialsError
from runner.kube.kubeconfig import kubeconfig_paths, parse_kubeconfig, read_kubeconfig

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


# --- in-cluster ---------------------------------------------------------------------------


def in_cluster(
    environ: Mapping[str, str], service_account_dir: Path = SERVICE_ACCOUNT_DIR
) -> Credentials:
    """client-go's rest.InClusterConfig: the service's host and port, the account's files."""
    host = environ.get("KUBERNETES_SERVICE_HOST", "")
    port = environ.get("KUBERNETES_SERVICE_PORT", "")
    if not host or not port:
        raise CredentialsError(
            "in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set"
        )
    if ":" in host and not host.startswith("["):
        host = f"[{host}]"  # an IPv6 address
    token_file = service_account_dir / "token"
    if not token_file.is_file():
        raise CredentialsError(f"in-cluster: no service-account token at {token_file}")
    ca_file = service_account_dir / "ca.crt"
    namespace_file = service_account_dir / "namespace"
    namespace = namespace_file.read_text().strip() if namespace_file.is_file() else ""
    return Credentials(
        server=f"https://{host}:{port}",
        ca_file=str(ca_file) if ca_file.is_file() else None,
        token_file=str(token_file),
        namespace=namespace or None,
        source=f"in-cluster service account ({service_account_dir})",
    )


def load(
    kubeconfig: str | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    service_account_dir: Path = SERVICE_ACCOUNT_DIR,
    context: str | None = None,
) -> Credentials:
    """The operator's credentials: in-cluster service account, else the kubeconfig."""
    environ = os.environ if environ is None else environ
    if kubeconfig is None and environ.get("KUBERNETES_SERVICE_HOST"):
        return in_cluster(environ, service_account_dir)
    paths = kubeconfig_paths(kubeconfig, environ)
    files = [(path.absolute(), read_kubeconfig(path)) for path in paths]
    credentials = parse_kubeconfig(files, context)
    if credentials.plugin is None:
        return credentials
    return _with_fallback(credentials, [str(path) for path, _ in files])


def _with_fallback(credentials: Credentials, paths: list[str]) -> Credentials:
    """exec plugins and auth-providers: the kubernetes package's loader (and its refresh)."""
    from kubernetes import client as k8s_client  # ~60 MB: only for these users
    from kubernetes import config as k8s_config

    configuration = k8s_client.Configuration()
    try:
        k8s_config.load_kube_config(
            config_file=os.pathsep.join(paths),
            context=credentials.context,
            client_configuration=configuration,
        )
    except Exception as err:
        raise CredentialsError(
            f"{credentials.source}: the kubernetes package could not load this "
            f"{credentials.plugin} user: {err}"
        ) from err
    return replace(
        credentials,
        server=str(configuration.host).rstrip("/"),
        ca_file=configuration.ssl_ca_cert or None,
        insecure=not configuration.verify_ssl,
        cert_file=configuration.cert_file or None,
        key_file=configuration.key_file or None,
        token=None,
        token_file=None,
        username=None,
        password=None,
        fallback=configuration,
    )
