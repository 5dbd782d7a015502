"""Kubeconfig files: found, read and parsed into the operator's `Credentials`."""

from __future__ import annotations

import atexit
import base64
import os
import shutil
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from runner.kube.credentials import Credentials, CredentialsError
from runner.util import tempdirs

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
