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

Parsing (`parse_kubeconfig`, `in_cluster`) is kept apart from reading files (`load`).
"""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import ssl
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml

from runner.util import tempdirs

SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


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


class ServerNamedContext(ssl.SSLContext):
    """`ssl.create_default_context()`'s client context that sends and checks one server name.

    The name goes in where asyncio (aiohttp) and `ssl.wrap_socket` pass the host they dial, so
    every client made with this context honours it: the operator's, the roles' proxy's and the
    dependent watches' sessions alike, none with a per-request argument of its own."""

    server_name: str

    def __new__(cls, server_name: str, cafile: str | None = None) -> ServerNamedContext:
        return super().__new__(cls, ssl.PROTOCOL_TLS_CLIENT)  # CERT_REQUIRED, check_hostname

    def __init__(self, server_name: str, cafile: str | None = None) -> None:
        self.server_name = server_name
        self.verify_flags |= _DEFAULT_VERIFY_FLAGS
        if cafile:
            self.load_verify_locations(cafile)
        else:
            self.load_default_certs(ssl.Purpose.SERVER_AUTH)

    def wrap_bio(
        self,
        incoming: ssl.MemoryBIO,
        outgoing: ssl.MemoryBIO,
        server_side: bool = False,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLObject:
        return super().wrap_bio(incoming, outgoing, server_side, self.server_name, session)

    def wrap_socket(
        self,
        sock: Any,
        server_side: bool = False,
        do_handshake_on_connect: bool = True,
        suppress_ragged_eofs: bool = True,
        server_hostname: str | bytes | None = None,
        session: ssl.SSLSession | None = None,
    ) -> ssl.SSLSocket:
        return super().wrap_socket(
            sock,
            server_side,
            do_handshake_on_connect,
            suppress_ragged_eofs,
            self.server_name,
            session,
        )


# what create_default_context adds to a client context's flags (3.13: strict X.509 checks)
_DEFAULT_VERIFY_FLAGS = (
    ssl.VERIFY_X509_PARTIAL_CHAIN | ssl.VERIFY_X509_STRICT
    if sys.version_info >= (3, 13)
    else ssl.VerifyFlags(0)
)


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


# --- kubeconfig ---------------------------------------------------------------------------

DataWriter = Callable[[str, bytes], str]  # (name, content) -> path of a private file


@dataclass(frozen=True)
class _Entry:
    name: str
    value: Mapping[str, Any]
    file: Path  # the file that named it: relative paths are resolved against its directory


def _merged(
    files: Sequence[tuple[Path, Mapping[str, Any]]], section: str, key: str
) -> dict[str, _Entry]:
    """kubectl's merge: the first file to name an entry wins (entries are not merged)."""
    entries: dict[str, _Entry] = {}
    for path, document in files:
        for item in document.get(section) or []:
            if not isinstance(item, Mapping) or not item.get("name"):
                raise CredentialsError(f"{path}: an entry of {section} without a name")
            name = str(item["name"])
            value = item.get(key) or {}
            if not isinstance(value, Mapping):
                raise CredentialsError(f"{path}: {section} {name!r}: {key} is not a mapping")
            entries.setdefault(name, _Entry(name, value, path))
    return entries


def _path(entry: _Entry, key: str) -> str | None:
    value = entry.value.get(key)
    if not value:
        return None
    path = Path(str(value))
    return str(path if path.is_absolute() else entry.file.parent / path)


def _data(entry: _Entry, key: str, what: str, write: DataWriter) -> str | None:
    """`<key>-data` (base64) written to a private file, else `<key>` as a path."""
    data = entry.value.get(f"{key}-data")
    if data:
        try:
            content = base64.b64decode(str(data), validate=True)
        except ValueError as err:
            raise CredentialsError(
                f"{entry.file}: {what} {entry.name!r}: {key}-data is not base64: {err}"
            ) from err
        return write(f"{entry.name}-{key}", content)
    return _path(entry, key)


def _describe(files: Sequence[tuple[Path, Mapping[str, Any]]]) -> str:
    return os.pathsep.join(str(path) for path, _ in files) or "(no kubeconfig)"


def parse_kubeconfig(
    files: Sequence[tuple[Path, Mapping[str, Any]]],
    context: str | None = None,
    write_data: DataWriter | None = None,
) -> Credentials:
    """The credentials of `context` (else the current context) of these kubeconfig documents.

    `files` are (path, parsed document), in $KUBECONFIG order. `write_data` turns `*-data`
    fields into files (default: private files in a temporary directory removed at exit).
    """
    write = write_data or _write_private
    where = _describe(files)
    if context is None:
        context = next(
            (str(doc["current-context"]) for _, doc in files if doc.get("current-context")), None
        )
        if context is None:
            raise CredentialsError(f"{where}: no current-context is set")
    contexts = _merged(files, "contexts", "context")
    if context not in contexts:
        known = ", ".join(sorted(contexts)) or "none"
        raise CredentialsError(f"{where}: context {context!r} not found (contexts: {known})")
    ctx = contexts[context]
    cluster_name = str(ctx.value.get("cluster") or "")
    if not cluster_name:
        raise CredentialsError(f"{ctx.file}: context {context!r} names no cluster")
    clusters = _merged(files, "clusters", "cluster")
    if cluster_name not in clusters:
        raise CredentialsError(
            f"{where}: cluster {cluster_name!r} of context {context!r} not found"
        )
    cluster = clusters[cluster_name]
    server = str(cluster.value.get("server") or "").rstrip("/")
    if not server:
        raise CredentialsError(
            f"{cluster.file}: cluster {cluster_name!r} of context {context!r} has no server"
        )
    user_name = str(ctx.value.get("user") or "")
    users = _merged(files, "users", "user")
    if user_name and user_name not in users:
        raise CredentialsError(f"{where}: user {user_name!r} of context {context!r} not found")
    user = users.get(user_name, _Entry(user_name, {}, ctx.file))
    plugin = next((k for k in ("exec", "auth-provider") if user.value.get(k)), None)
    https = server.startswith("https")
    tls_server_name = cluster.value.get("tls-server-name")
    username = user.value.get("username")
    password = user.value.get("password")
    namespace = ctx.value.get("namespace")
    return Credentials(
        server=server,
        ca_file=_data(cluster, "certificate-authority", "cluster", write) if https else None,
        insecure=bool(cluster.value.get("insecure-skip-tls-verify")),
        tls_server_name=str(tls_server_name) if tls_server_name else None,
        token=str(user.value["token"]) if user.value.get("token") else None,
        token_file=_path(user, "tokenFile"),
        cert_file=_data(user, "client-certificate", "user", write) if https else None,
        key_file=_data(user, "client-key", "user", write) if https else None,
        username=None if username is None else str(username),
        password=None if password is None else str(password),
        namespace=str(namespace) if namespace else None,
        context=context,
        source=f"{where} (context {context})",
        plugin=plugin,
    )


#: Client certificates and keys given inline are written here (removed at exit, and by the
#: next operator if this one was killed).
CREDENTIALS_DIR_PREFIX = "operator-runner-credentials-"
_private_dir: Path | None = None
_private_lock = threading.Lock()


def _write_private(name: str, content: bytes) -> str:
    """A file only this user may read, in one temporary directory removed at exit."""
    global _private_dir
    with _private_lock:
        if _private_dir is None:
            _private_dir = tempdirs.private_dir(CREDENTIALS_DIR_PREFIX)
            atexit.register(shutil.rmtree, _private_dir, True)
        safe = "".join(c if c.isalnum() or c in "-_." else "_" for c in name)
        fd, path = tempfile.mkstemp(prefix=f"{safe}-", dir=_private_dir)  # mode 0600
        with os.fdopen(fd, "wb") as f:
            f.write(content)
        return path


def kubeconfig_paths(
    kubeconfig: str | None, environ: Mapping[str, str] | None = None
) -> list[Path]:
    """The files to read: the given one, else $KUBECONFIG's (those that exist), else
    ~/.kube/config."""
    environ = os.environ if environ is None else environ
    if kubeconfig:
        path = Path(kubeconfig).expanduser()
        if not path.is_file():
            raise CredentialsError(f"kubeconfig {kubeconfig}: no such file")
        return [path]
    listed = environ.get("KUBECONFIG", "")
    if listed:
        paths: list[Path] = []
        for part in listed.split(os.pathsep):
            path = Path(part).expanduser()
            if part and path not in paths and path.is_file():
                paths.append(path)
        if not paths:
            raise CredentialsError(f"KUBECONFIG={listed}: none of these files exists")
        return paths
    home = environ.get("HOME")
    path = (Path(home) if home else Path.home()) / ".kube" / "config"
    if not path.is_file():
        raise CredentialsError(
            f"no credentials: not in a cluster, no --kubeconfig, no KUBECONFIG, no {path}"
        )
    return [path]


def read_kubeconfig(path: Path) -> Mapping[str, Any]:
    try:
        document = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as err:
        raise CredentialsError(f"{path}: cannot read the kubeconfig: {err}") from err
    if document is None:
        return {}
    if not isinstance(document, Mapping):
        raise CredentialsError(f"{path}: not a kubeconfig (not a mapping)")
    return document


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
