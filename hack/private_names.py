"""Other packages' internals are touched only inside their fences.

import-linter's graph sees imports, not attribute access: this reads every module of `runner/`
(outside the bundled collection, Ansible's own code) and reports each touch of a third-party
package's internals (any package that is neither the standard library nor ours) outside the
fence listed for that package in `FENCES`:

- an import of a private module or name (`from kopf._core.reactor import observation`,
  `from ansible.x import _y`);
- an attribute starting with `_` (not a dunder) read or written on a name bound by an import of
  the package (`C.config._config_file`), also through `getattr`/`setattr`/`hasattr`/`delattr`
  with a constant name;
- a string naming a private module of the package (`importlib.import_module("ansible._x")`);
- a monkeypatch: an attribute of a name bound by an import of the package assigned or deleted
  (`pexpect.spawn = ...`), also through `setattr`/`delattr`;
- a private attribute of some object that no code of ours defines (`site._server` of an aiohttp
  site): a name the runner defines is one assigned on `self` or `cls`, in a class body or a
  module, or a function, class or parameter name; any other `_name` belongs to another
  package. This one cannot tell which package: any fence may touch such names.

Each fence registers its patches with the versions they are verified on and checks them at
start-up (runner/util/fence.py; ansible-core's: runner/ansible/warm/patches/registry.py).
`make lint` runs this as an import-linter contract (`.importlinter`, type `private_names`);
`python hack/private_names.py [ROOT]` runs it alone.
"""

from __future__ import annotations

import ast
import importlib.util
import re
import sys
from collections.abc import Iterable
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output

#: The fences: where each third-party package's internals may be touched (a folder or module
#: of runner/ -> the packages). Any other third-party package has no fence: nowhere.
FENCES: dict[str, tuple[str, ...]] = {
    # the warm executor: ansible-core's internals, and what its fork server preloads
    "runner/ansible/warm/": ("ansible", "jinja2", "kubernetes"),
    # kopf, imported without kubernetes, and its reactor's patches
    "runner/app/source/kopf_import.py": ("kopf",),
    # ansible-runner's pexpect child, closed without pexpect's sleep (verified versions only)
    "runner/ansible/ptyclose.py": ("pexpect", "ptyprocess"),
}
#: Not the runner's code: Ansible's modules and plugins of the bundled collection.
OUTSIDE = ("runner/ansible/collections/",)
#: Private names of the standard library's objects the runner uses (outside this check's
#: scope, which is third-party packages), and whose they are.
STANDARD_LIBRARY = {"_actions": "argparse.ArgumentParser"}
_PRIVATE_MODULE = re.compile(r"^([A-Za-z_]\w*)(\.\w+)*\._[A-Za-z]\w*")
_OURS = frozenset({"runner", "hack", "tests", "bench", "__future__"})


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def package_of(module: str | None) -> str | None:
    """The third-party package a module belongs to (its top-level name), or None."""
    if not module:
        return None
    top = module.partition(".")[0]
    if top in sys.stdlib_module_names or top in _OURS:
        return None
    return top


def _standard(module: str) -> bool:
    return module.partition(".")[0] in sys.stdlib_module_names


def _installed(top: str) -> bool:
    try:
        return importlib.util.find_spec(top) is not None
    except (ImportError, ValueError):
        return False


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (`C` of `C.config._x`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def defined_names(tree: ast.AST) -> set[str]:
    """The private names a module of ours defines (see the module's docstring)."""
    names: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            names.add(node.name)
        elif isinstance(node, ast.arg):
            names.add(node.arg)
        elif isinstance(node, ast.Name) and isinstance(node.ctx, ast.Store):
            names.add(node.id)
        elif (
            isinstance(node, ast.Attribute)
            and isinstance(node.ctx, ast.Store)
            and isinstance(node.value, ast.Name)
            and node.value.id in ("self", "cls")
        ):
            names.add(node.attr)
    return {name for name in names if _private(name)}


class _Module:
    """One module's touches of other packages' internals."""

    def __init__(self, filename: str, fenced: Iterable[str], ours: set[str] | None) -> None:
        self.filename = filename
        self.fenced = frozenset(fenced)  # "*": any (the objects' private names too)
        self.ours = ours
        self.bound: dict[str, str] = {}  # name -> the package whose import binds it
        self.standard: set[str] = set()  # names bound by imports of the standard library
        self.found: list[str] = []

    def report(self, node: ast.AST, package: str | None, what: str) -> None:
        if package is None and self.fenced:
            return  # an object's private name, in a fence
        if package is not None and package in self.fenced:
            return
        self.found.append(f"{self.filename}:{getattr(node, 'lineno', 0)}: {what}")

    def imports(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    package = package_of(alias.name)
                    if package is None:
                        if _standard(alias.name):
                            self.standard.add(alias.asname or alias.name.partition(".")[0])
                        continue
                    self.bound[alias.asname or alias.name.partition(".")[0]] = package
                    if any(_private(part) for part in alias.name.split(".")):
                        self.report(node, package, f"imports the private module {alias.name}")
            elif isinstance(node, ast.ImportFrom) and node.level == 0:
                module = node.module or ""
                package = package_of(module)
                if package is None:
                    if _standard(module):
                        self.standard.update(alias.asname or alias.name for alias in node.names)
                    continue
                if any(_private(part) for part in module.split(".")):
                    self.report(node, package, f"imports from the private module {module}")
                for alias in node.names:
                    self.bound[alias.asname or alias.name] = package
                    if _private(alias.name):
                        self.report(
                            node, package, f"imports the private name {module}.{alias.name}"
                        )

    def touches(self, tree: ast.AST) -> None:
        for node in ast.walk(tree):
            if isinstance(node, ast.Attribute):
                self.attribute(node)
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
                self.call(node, node.func.id)
            elif isinstance(node, ast.Constant) and isinstance(node.value, str):
                match = _PRIVATE_MODULE.match(node.value)
                package = package_of(match.group(1)) if match else None
                if package is not None and _installed(package):
                    self.report(node, package, f"names the private module {node.value}")

    def attribute(self, node: ast.Attribute) -> None:
        package = self.bound.get(_root(node) or "")
        if package is not None:
            if _private(node.attr):
                self.report(node, package, f"touches {package}'s private name .{node.attr}")
            elif isinstance(node.ctx, ast.Store | ast.Del) and isinstance(node.value, ast.Name):
                self.report(node, package, f"patches {node.value.id}.{node.attr} ({package}'s)")
        elif (
            _private(node.attr)
            and self.ours is not None
            and node.attr not in self.ours
            and node.attr not in STANDARD_LIBRARY
            and not self._stdlib_root(node)
        ):
            self.report(node, None, f"touches another package's private name .{node.attr}")

    def _stdlib_root(self, node: ast.Attribute) -> bool:
        """`os._exit`: a name of the standard library's (outside this check's scope)."""
        return _root(node) in self.standard

    def call(self, node: ast.Call, function: str) -> None:
        args = node.args
        if function not in ("getattr", "setattr", "hasattr", "delattr") or len(args) < 2:
            return
        package = self.bound.get(_root(args[0]) or "")
        name = args[1].value if isinstance(args[1], ast.Constant) else None
        if package is None:
            return
        if isinstance(name, str) and _private(name):
            self.report(node, package, f"touches {package}'s private name {name} ({function})")
        elif function in ("setattr", "delattr") and isinstance(args[0], ast.Name):
            self.report(node, package, f"patches {args[0].id} ({package}'s, {function})")


def violations_in(
    source: str, filename: str, fenced: Iterable[str] = (), ours: set[str] | None = None
) -> list[str]:
    """The touches of other packages' internals in one module, but those of `fenced` packages
    (its fence's); `ours`: the private names the runner defines (None: this module's own)."""
    tree = ast.parse(source, filename)
    module = _Module(filename, fenced, defined_names(tree) if ours is None else ours)
    module.imports(tree)
    module.touches(tree)
    return module.found


def fenced_in(relative: str) -> tuple[str, ...]:
    """The packages whose internals the module at `relative` (a fence) may touch."""
    return tuple(
        package
        for place, packages in FENCES.items()
        if relative == place or (place.endswith("/") and relative.startswith(place))
        for package in packages
    )


def violations(root: Path) -> list[str]:
    """Every touch of another package's internals outside its fence, under `root`/runner."""
    paths = [
        path
        for path in sorted((root / "runner").rglob("*.py"))
        if not path.relative_to(root).as_posix().startswith(OUTSIDE)
    ]
    sources = {path: path.read_text(encoding="utf-8") for path in paths}
    ours: set[str] = set()
    for path, source in sources.items():
        ours |= defined_names(ast.parse(source, str(path)))
    found = []
    for path, source in sources.items():
        relative = path.relative_to(root).as_posix()
        found.extend(violations_in(source, relative, fenced_in(relative), ours))
    return found


class PrivateNamesContract(Contract):
    """import-linter contract: no third-party package's internals touched outside its fence."""

    root = fields.StringField(required=False, default=".")

    def check(self, graph: object, verbose: bool) -> ContractCheck:
        found = violations(Path(str(self.root)))
        return ContractCheck(kept=not found, warnings=None, metadata={"violations": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["violations"]:
            output.print_error(line, bold=False)
        output.new_line()
        output.print(
            "Use the package's public API, or move that code into the package's fence "
            "(FENCES in hack/private_names.py) and register the patch there with the versions "
            "it is verified on (runner/util/fence.py; ansible-core: "
            "runner/ansible/warm/patches/registry.py)."
        )


if __name__ == "__main__":
    lines = violations(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
    print("\n".join(lines) or "no other package's internals touched outside its fence")
    sys.exit(1 if lines else 0)
