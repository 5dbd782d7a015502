"""ansible-core's private names are touched only inside the warm executor's fence.

import-linter's graph sees imports, not attribute access: this reads every module of `runner/`
outside `runner/ansible/warm/` (and outside the bundled collection, Ansible's own code) and
reports each private name of ansible-core it touches:

- an import of a private ansible module (`ansible._internal...`, `from ansible.x import _y`);
- an attribute starting with `_` (not a dunder) read or written on a name bound by an ansible
  import (`C.config._config_file`, `loader._configure_collection_loader = ...`), also through
  `getattr`/`setattr`/`hasattr`/`delattr` with a constant name;
- a string naming a private ansible module (`importlib.import_module("ansible._internal")`).

`make lint` runs it as an import-linter contract (`.importlinter`, type `private_names`);
`python hack/private_names.py [ROOT]` runs it alone.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

from importlinter import Contract, ContractCheck, fields, output

#: What may touch ansible's private names, and what is not the runner's code.
EXEMPT = ("runner/ansible/warm/", "runner/ansible/collections/")
_PRIVATE_MODULE = re.compile(r"^ansible(\.\w+)*\._[a-z]\w*")


def _private(name: str) -> bool:
    return name.startswith("_") and not (name.startswith("__") and name.endswith("__"))


def _ansible(module: str | None) -> bool:
    return module is not None and (module == "ansible" or module.startswith("ansible."))


def _root(node: ast.expr) -> str | None:
    """The name an attribute chain starts from (`C` of `C.config._x`)."""
    while isinstance(node, ast.Attribute):
        node = node.value
    return node.id if isinstance(node, ast.Name) else None


def violations_in(source: str, filename: str) -> list[str]:
    tree = ast.parse(source, filename)
    bound: set[str] = set()  # names bound by an ansible import, anywhere in the module
    found = []

    def report(node: ast.AST, what: str) -> None:
        found.append(f"{filename}:{getattr(node, 'lineno', 0)}: {what}")

    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                if _ansible(alias.name):
                    bound.add(alias.asname or alias.name.partition(".")[0])
                    if any(_private(part) for part in alias.name.split(".")):
                        report(node, f"imports the private module {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and _ansible(node.module):
            module = node.module or ""
            if any(_private(part) for part in module.split(".")):
                report(node, f"imports from the private module {module}")
            for alias in node.names:
                bound.add(alias.asname or alias.name)
                if _private(alias.name):
                    report(node, f"imports the private name {module}.{alias.name}")
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and _private(node.attr) and _root(node) in bound:
            report(node, f"touches ansible's private name .{node.attr}")
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name):
            args = node.args
            if (
                node.func.id in ("getattr", "setattr", "hasattr", "delattr")
                and len(args) >= 2
                and _root(args[0]) in bound
                and isinstance(args[1], ast.Constant)
                and isinstance(args[1].value, str)
                and _private(args[1].value)
            ):
                report(node, f"touches ansible's private name {args[1].value} ({node.func.id})")
        elif (
            isinstance(node, ast.Constant)
            and isinstance(node.value, str)
            and _PRIVATE_MODULE.match(node.value)
        ):
            report(node, f"names the private module {node.value}")
    return found


def violations(root: Path) -> list[str]:
    """Every private ansible name touched by the runner outside the fence, under `root`."""
    found = []
    for path in sorted((root / "runner").rglob("*.py")):
        relative = path.relative_to(root).as_posix()
        if relative.startswith(EXEMPT):
            continue
        found.extend(violations_in(path.read_text(encoding="utf-8"), relative))
    return found


class PrivateNamesContract(Contract):
    """import-linter contract: no private name of ansible-core outside runner/ansible/warm/."""

    root = fields.StringField(required=False, default=".")

    def check(self, graph: object, verbose: bool) -> ContractCheck:
        found = violations(Path(str(self.root)))
        return ContractCheck(kept=not found, warnings=None, metadata={"violations": found})

    def render_broken_contract(self, check: ContractCheck) -> None:
        for line in check.metadata["violations"]:
            output.print_error(line, bold=False)
        output.new_line()
        output.print(
            "Move that code into runner/ansible/warm/ and register the patch "
            "(runner/ansible/warm/patches/registry.py)."
        )


if __name__ == "__main__":
    lines = violations(Path(sys.argv[1] if len(sys.argv) > 1 else "."))
    print("\n".join(lines) or "no private ansible names outside runner/ansible/warm/")
    sys.exit(1 if lines else 0)
