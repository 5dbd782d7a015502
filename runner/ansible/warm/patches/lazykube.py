"""`kubernetes.client` with its names imported when first used, for the module fork server.

`import kubernetes` imports `kubernetes.client`, whose `__init__.py` (and those of its `api` and
`models` packages) import every generated API class and model: ~1000 modules, ~43 MB in every
process that holds them. kubernetes.core's modules use the dynamic client, the configuration
and a few exceptions, none of the generated classes. The module server therefore loads these
three packages with a loader of its own: the same names, each imported from the same module
as the generated `__init__.py` says, the first time it is asked for (`module.__getattr__`).
Jobs forked from the server inherit the packages; a job that does use a model or an API class
imports that one module (as the generated code would have, earlier).

Only the statements the generated files consist of are understood (`from M import N`,
`__version__ = "..."`, `from __future__ import ...`, comments and the docstring); any other
statement makes `install` leave the package alone, so it is imported the usual way.

`kubernetes.config.kube_config` also imports, at import time, what only a kubeconfig with the
`gcp` auth-provider uses: `google.auth.transport.requests`, which imports `google.oauth2`
(~2.4 MB in the module server). That module and the subpackages `kubernetes/__init__.py`
imports for nothing kubernetes.core's k8s modules do (`DEFERRED`) are made in full, in
`sys.modules` and on their parent package, but run the first time an attribute of theirs is
asked for: by `google.auth.transport.requests.Request()` in a job that refreshes a gcp token,
by `kubernetes.stream.stream` in a k8s_exec job.
"""

from __future__ import annotations

import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import re
import sys
import types
from collections.abc import Sequence
from pathlib import Path

from runner.ansible.warm.patches.deferred import deferring, other_spec

PACKAGES = ("kubernetes.client", "kubernetes.client.api", "kubernetes.client.models")
# Imported with the package all the same: what every user of the client needs, and cheap.
EAGER = {
    "kubernetes.client": (
        "kubernetes.client.configuration",
        "kubernetes.client.exceptions",
        "kubernetes.client.rest",
        "kubernetes.client.api_client",
    ),
}

DEFERRED = frozenset(
    {
        "google.auth.transport.requests",  # by kube_config, for the gcp auth-provider only
        # Imported by `kubernetes/__init__.py` (`from . import stream`, ...); kubernetes.core's
        # modules use them only in k8s_exec and k8s_cp (stream), or not at all (~0.7 MB).
        "kubernetes.stream",
        "kubernetes.watch",
        "kubernetes.utils",
        "kubernetes.leaderelection",
    }
)

_FROM = re.compile(r"from (kubernetes\.client[\w.]*) import (\w+)")
_VERSION = re.compile(r"__version__ = (['\"])([\w.+-]+)\1")
_DOCSTRING = re.compile(r'\A\s*(#[^\n]*\n\s*)*"""(.*?)"""', re.S)


def parse_init(source: str) -> tuple[dict[str, str], str | None] | None:
    """The names a generated `__init__.py` imports (name -> module) and its `__version__`;
    None when it holds any other statement."""
    body = _DOCSTRING.sub("", source, count=1)
    names: dict[str, str] = {}
    version = None
    for raw in body.splitlines():
        line = raw.split("#", 1)[0].strip()
        if not line or line.startswith("from __future__ import"):
            continue
        if match := _FROM.fullmatch(line):
            names[match[2]] = match[1]
        elif match := _VERSION.fullmatch(line):
            version = match[2]
        else:
            return None
    return names, version


class _LazyPackage(importlib.abc.Loader):
    def __init__(self, names: dict[str, str], version: str | None, eager: Sequence[str]) -> None:
        self.names = names
        self.version = version
        self.eager = eager

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> None:
        return None  # the default module object

    def exec_module(self, module: types.ModuleType) -> None:
        names = self.names

        def __getattr__(name: str) -> object:
            where = names.get(name)
            if where is None:
                submodule = f"{module.__name__}.{name}"
                if importlib.util.find_spec(submodule) is None:
                    raise AttributeError(f"module {module.__name__!r} has no attribute {name!r}")
                return importlib.import_module(submodule)
            value = getattr(importlib.import_module(where), name)
            setattr(module, name, value)
            return value

        def __dir__() -> list[str]:
            return sorted(set(vars(module)) | set(names))

        module.__getattr__ = __getattr__  # type: ignore[method-assign]
        module.__dir__ = __dir__  # type: ignore[method-assign]
        module.__dict__["__all__"] = list(names)  # `from package import *`: every name
        if self.version is not None:
            module.__dict__["__version__"] = self.version
        for name in self.eager:
            importlib.import_module(name)


class _Finder(importlib.abc.MetaPathFinder):
    def __init__(self, loaders: dict[str, _LazyPackage]) -> None:
        self.loaders = loaders

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        loader = self.loaders.get(fullname)
        if loader is None:
            return None
        spec = other_spec(self, fullname, path, target)
        if spec is not None:
            spec.loader = loader
        return spec


def install() -> bool:
    """Import `kubernetes` with the lazy packages and the `DEFERRED` modules; False (nothing
    done) when the installed client's files are not what `parse_init` understands or
    `kubernetes` (or a deferred module) is imported already."""
    if any(name in sys.modules for name in ("kubernetes", *PACKAGES, *DEFERRED)):
        return False
    spec = importlib.util.find_spec("kubernetes")
    if spec is None or not spec.submodule_search_locations:
        return False
    root = Path(next(iter(spec.submodule_search_locations)))
    loaders = {}
    for package in PACKAGES:
        init = root.joinpath(*package.split(".")[1:], "__init__.py")
        try:
            parsed = parse_init(init.read_text(encoding="utf-8"))
        except OSError:
            return False
        if parsed is None:
            return False
        loaders[package] = _LazyPackage(*parsed, EAGER.get(package, ()))
    finder = _Finder(loaders)
    sys.meta_path.insert(0, finder)
    try:
        with deferring(DEFERRED):
            importlib.import_module("kubernetes")
    finally:
        sys.meta_path.remove(finder)
    return True


def check() -> None:
    client = importlib.import_module("kubernetes.client")  # not statically: .importlinter
    for package in PACKAGES:
        module = sys.modules.get(package)
        if module is not None and not isinstance(module.__spec__.loader, _LazyPackage):  # type: ignore[union-attr]
            raise AssertionError(f"{package} is not the lazy package")
    if client.Configuration.__name__ != "Configuration":
        raise AssertionError("kubernetes.client.Configuration")
