"""Collection module_utils imported once by the module server, used by a job whose payload
carries the very same files.

A module job imports its collection's module_utils from its AnsiballZ payload, and executing
those files is a large part of a short module's work: a `kubernetes.core.k8s` job imports ~20
of them, in every job, because each job is a fresh fork. The module server imports the
module_utils that the modules named in `COLLECTIONS` import, once, as plain Python modules (not
through the controller's collection loader, as a module's own Python would), then takes them
out of `sys.modules` so that nothing a job imports is hidden by them, and keeps them here.

In a job, `install` puts a finder first on `sys.meta_path`. The first time the job imports one
of these modules, the finder compares, for each module kept for that collection, the bytes of
the file the payload carries with the bytes the server imported (SHA-256). Only when every
file the payload carries is the same does the job use the kept modules for that collection
(all of them, so that they never mix with files of another version); otherwise every import
of the collection comes from the payload, as before. A kept file the payload does not carry is
left out of the comparison (the module does not import it). Packages (`__init__`) always come
from the payload, so the module itself and every other file are still found there.

What a module_utils file reads from the environment while it is imported (kubernetes.core's
`ENABLE_TURBO_MODE`) is recorded in the server; a job whose environment differs there imports
from its payload too. Module-level state is the server's at the fork, untouched by other jobs.
The kept modules' `__file__` names the file the server imported (same bytes as the payload's).
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.abc
import importlib.machinery
import os
import sys
import zipimport
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any

from runner.ansible.warm.patches import guard
from runner.ansible.warm.patches.codecache import collection_roots

NAME = "kept-module-utils"
#: Per collection, the modules whose module_utils the server imports (what operators' roles
#: run in nearly every task). Not every module_utils file: kubernetes.core's `copy` alone
#: imports the whole generated `kubernetes.client.api` (+9 MB).
COLLECTIONS = {"kubernetes.core": ("k8s", "k8s_info")}


@dataclass(frozen=True)
class Kept:
    module: ModuleType
    collection: str
    relpath: str  # inside a collections root: ansible_collections/ns/name/plugins/...
    digest: bytes


_KEPT: dict[str, Kept] = {}
#: Per collection: the environment variables read while its files were imported, and values.
_ENV_READ: dict[str, dict[str, str | None]] = {}
_SET_ASIDE: list[ModuleType] = []  # packages imported with them: kept alive, never used


def preload(roots: list[Path]) -> int:
    """In the module server, before the controller is imported: import the module_utils that
    the `COLLECTIONS` modules import, from the first root that has each collection; returns
    how many modules are kept."""
    for collection, modules in COLLECTIONS.items():
        namespace, name = collection.split(".")
        for root in roots:
            base = root / "ansible_collections" / namespace / name / "plugins"
            if (base / "module_utils").is_dir():
                _preload_collection(collection, modules, root, base)
                break
    for module_name in [n for n in sys.modules if n.partition(".")[0] == "ansible_collections"]:
        _SET_ASIDE.append(sys.modules.pop(module_name))
    importlib.invalidate_caches()
    return len(_KEPT)


def _preload_collection(collection: str, modules: tuple[str, ...], root: Path, base: Path) -> None:
    reads: dict[str, str | None] = {}
    package = "ansible_collections." + collection
    with _recording_env(reads, base), _on_path(str(root)):
        for entry in modules:
            try:
                importlib.import_module(f"{package}.plugins.modules.{entry}")
            except Exception:  # an optional dependency missing: the payload's files run
                continue
    utils = base / "module_utils"
    for module_name, imported in list(sys.modules.items()):
        if not module_name.startswith(f"{package}.plugins.module_utils."):
            continue
        path = Path(getattr(imported, "__file__", None) or "/")
        if path.name == "__init__.py" or not path.is_relative_to(utils):
            continue  # a package, or found elsewhere on sys.path: not this collection's file
        try:
            digest = hashlib.sha256(path.read_bytes()).digest()
        except OSError:
            continue
        relpath = path.relative_to(root).as_posix()
        _KEPT[module_name] = Kept(imported, collection, relpath, digest)
    _ENV_READ[collection] = reads


@contextmanager
def _on_path(root: str) -> Iterator[None]:
    added = root not in sys.path
    if added:
        sys.path.append(root)
    try:
        yield
    finally:
        if added:
            sys.path.remove(root)


@contextmanager
def _recording_env(reads: dict[str, str | None], code_dir: Path) -> Iterator[None]:
    """Note each environment variable that code under `code_dir` reads (os.environ[...],
    .get, os.getenv, `in`) while the collection is imported."""
    environ_type = type(os.environ)
    plain_getitem = environ_type.__getitem__
    plain_contains = environ_type.__contains__
    prefix = str(code_dir) + os.sep

    def by_collection() -> bool:
        frame = sys._getframe(2)
        while frame is not None and frame.f_code.co_filename.startswith(_ENV_PLUMBING):
            frame = frame.f_back  # type: ignore[assignment]
        return frame is not None and frame.f_code.co_filename.startswith(prefix)

    def getitem(self: Any, key: str) -> str:
        try:
            value: str = plain_getitem(self, key)
        except KeyError:
            if by_collection():
                reads.setdefault(key, None)
            raise
        if by_collection():
            reads.setdefault(key, value)
        return value

    def contains(self: Any, key: object) -> bool:
        found = plain_contains(self, key)
        if isinstance(key, str) and by_collection():
            reads.setdefault(key, plain_getitem(self, key) if found else None)
        return found

    environ_type.__getitem__ = getitem  # type: ignore[method-assign]
    environ_type.__contains__ = contains  # type: ignore[method-assign]
    try:
        yield
    finally:
        environ_type.__getitem__ = plain_getitem  # type: ignore[method-assign]
        environ_type.__contains__ = plain_contains  # type: ignore[method-assign]


# os.getenv and Mapping.get, between the reading code and os.environ's __getitem__.
_ENV_PLUMBING = (
    "<frozen os>",
    "<frozen _collections_abc>",
    os.__file__,
    Mapping.get.__code__.co_filename,
)


# --- in a module job ----------------------------------------------------------------------


class _KeptLoader(importlib.abc.Loader):
    def __init__(self, module: ModuleType) -> None:
        self.module = module

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        return self.module

    def exec_module(self, module: ModuleType) -> None:
        pass  # executed in the server


class _KeptFinder(importlib.abc.MetaPathFinder):
    def __init__(self, environ: Mapping[str, str]) -> None:
        self.environ = environ
        self.verdicts: dict[str, bool] = {}

    def find_spec(
        self, fullname: str, path: Any = None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        kept = _KEPT.get(fullname)
        if kept is None or not path or guard.broken(NAME):
            return None
        try:
            verdict = self.verdicts.get(kept.collection)
            if verdict is None:
                payload_root = _payload_root(str(next(iter(path))), kept)
                verdict = payload_root is not None and self._same(kept.collection, payload_root)
                self.verdicts[kept.collection] = verdict
        except Exception as err:  # ours: the payload's files from now on
            guard.failed(NAME, err)
            return None
        if not verdict:
            return None
        return importlib.machinery.ModuleSpec(
            fullname, _KeptLoader(kept.module), origin=getattr(kept.module, "__file__", None)
        )

    def _same(self, collection: str, payload_root: str) -> bool:
        for key, value in _ENV_READ.get(collection, {}).items():
            if self.environ.get(key) != value:
                return False
        for kept in _KEPT.values():
            if kept.collection != collection:
                continue
            carried = _read(payload_root, kept.relpath)
            if carried is not None and hashlib.sha256(carried).digest() != kept.digest:
                return False
        return True


def _payload_root(package_dir: str, kept: Kept) -> str | None:
    """The payload's collections root, from the directory of the package being imported from."""
    package_rel = kept.relpath.rpartition("/")[0]
    if not package_dir.replace(os.sep, "/").endswith("/" + package_rel):
        return None
    return package_dir[: -len(package_rel) - 1]


def _read(root: str, relpath: str) -> bytes | None:
    """The bytes of `relpath` under `root` (a directory, or a path inside a zip), or None."""
    archive, sep, inner = root.partition(".zip")
    try:
        if sep and (not inner or inner.startswith("/")):
            member = f"{inner.lstrip('/')}/{relpath}".lstrip("/")
            return zipimport.zipimporter(archive + sep).get_data(member)
        return Path(root, relpath).read_bytes()
    except (OSError, zipimport.ZipImportError):
        return None


def activate() -> None:
    """In a module job: let its imports use the kept modules (see the module doc)."""
    if _KEPT:
        sys.meta_path.insert(0, _KeptFinder(os.environ))


def check() -> None:
    for name, kept in _KEPT.items():
        if kept.module.__name__ != name or len(kept.digest) != 32:
            raise AssertionError(f"{name} is not kept as imported")
        if name in sys.modules:
            raise AssertionError(f"{name} was left in sys.modules")
    for collection in {kept.collection for kept in _KEPT.values()}:
        if collection not in _ENV_READ:
            raise AssertionError(f"{collection}: what its files read on import is not known")


def keep_module_utils() -> bool:
    """The `kept-module-utils` patch: kubernetes.core's module_utils imported once (False when
    no collection of `COLLECTIONS` is installed)."""
    return preload(collection_roots(os.environ, sys.path)) > 0
