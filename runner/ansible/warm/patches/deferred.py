"""Modules made at import and run when first used, for the fork server.

`Deferred` is a loader that makes a module in full (in `sys.modules`, on its parent package)
but runs its code only when an attribute it lacks is first asked for. `deferring` uses it for
the modules it names while a block of imports runs: for what the server's imports bring in
with a plain `import X` and its jobs hardly ever use (lazykube.py does the same for
`kubernetes`). A `from X import name` runs X at once, as it needs the name.
"""

from __future__ import annotations

import contextlib
import importlib.abc
import importlib.machinery
import sys
import threading
import types
from collections.abc import Iterable, Iterator, Sequence


class Deferred(importlib.abc.Loader):
    """Runs a module (with its own loader) when one of its attributes is first asked for.

    Unlike `importlib.util.LazyLoader`, whose module runs on any attribute read, `__spec__`
    included (the import system reads that on every `import` of a module already imported),
    this one answers the module's own attributes (`__spec__`, `__name__`, ...) without running
    it: a module-level `__getattr__` (PEP 562) is called only for a name the module lacks."""

    def __init__(self, loader: importlib.abc.Loader) -> None:
        self.loader = loader

    def create_module(self, spec: importlib.machinery.ModuleSpec) -> types.ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: types.ModuleType) -> None:
        loader = self.loader
        lock = threading.RLock()

        def __getattr__(name: str) -> object:
            with lock:
                if module.__dict__.get("__getattr__") is __getattr__:
                    del module.__dict__["__getattr__"]
                    module.__loader__ = loader
                    if module.__spec__ is not None:
                        module.__spec__.loader = loader
                    loader.exec_module(module)  # an error here is the import's, as it would be
            try:
                return module.__dict__[name]
            except KeyError:
                raise AttributeError(
                    f"module {module.__name__!r} has no attribute {name!r}"
                ) from None

        module.__getattr__ = __getattr__  # type: ignore[method-assign]


def other_spec(
    finder: importlib.abc.MetaPathFinder,
    fullname: str,
    path: Sequence[str] | None,
    target: types.ModuleType | None = None,
) -> importlib.machinery.ModuleSpec | None:
    """The spec the finders on `sys.meta_path` other than `finder` give for `fullname`."""
    for other in sys.meta_path:
        if other is finder:
            continue
        find = getattr(other, "find_spec", None)
        spec: importlib.machinery.ModuleSpec | None = (
            find(fullname, path, target) if find is not None else None
        )
        if spec is not None:
            return spec
    return None


class _DeferringFinder(importlib.abc.MetaPathFinder):
    def __init__(self, names: frozenset[str]) -> None:
        self.names = names

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: types.ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.names:
            return None
        spec = other_spec(self, fullname, path, target)
        if spec is not None and spec.loader is not None:
            spec.loader = Deferred(spec.loader)
        return spec


@contextlib.contextmanager
def deferring(names: Iterable[str]) -> Iterator[None]:
    """While the block runs, a first import of one of `names` makes it `Deferred`."""
    finder = _DeferringFinder(frozenset(names))
    sys.meta_path.insert(0, finder)
    try:
        yield
    finally:
        sys.meta_path.remove(finder)
