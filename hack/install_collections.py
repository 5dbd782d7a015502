#!/usr/bin/env python3
"""Install the Ansible collections the roles need into this Python environment.

kubernetes.core is taken from the `ansible` distribution on PyPI (the package registry is the only
source our machines reach; Ansible Galaxy is not). The whole distribution is ~55 MB of wheel and
~500 MB installed with a hundred collections we do not use, so only kubernetes.core is extracted
(~1 MB) into <site-packages>/ansible_collections, where ansible-core finds it with no
configuration. The wheel is verified against a pinned sha256 first.

Which `ansible` release: the one runner/util/lines.txt names for the line of the ansible-core
installed in this Python (ansible 8.x goes with ansible-core 2.15, ... 14.x with 2.21), or for
the line given with `--line 2.18`; with the sha256 of its wheel and the kubernetes.core inside.
`--collection ansible/posix` extracts another collection of that release instead (the tests
make collection sources of it).
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import importlib.util
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path
from types import ModuleType


def _lines() -> ModuleType:
    """runner/util/lines.py, loaded by its path: this script runs before the runner is
    installed (the base image's build copies the two files of the list alone)."""
    path = Path(__file__).resolve().parent.parent / "runner" / "util" / "lines.py"
    spec = importlib.util.spec_from_file_location("operator_runner_lines", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


LINES = _lines()
# ansible-core line: (its `ansible` release, sha256 of its wheel, the kubernetes.core inside)
ANSIBLE: dict[str, tuple[str, str, str]] = {
    line.name: (line.ansible, line.ansible_sha256, line.kubernetes_core)
    for line in LINES.TABLE.lines
}
COLLECTIONS = ("kubernetes/core",)


def installed_line() -> str:
    """The line (``2.18``) of the ansible-core installed in this Python."""
    try:
        version = importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        sys.exit(
            "install_collections: ansible-core is not installed in this Python "
            f"({sys.executable}); install it first, or name the line with --line"
        )
    return ".".join(version.split(".")[:2])


def ansible_for(line: str) -> tuple[str, str, str]:
    """The ``ansible`` release, wheel sha256 and kubernetes.core version for ``line``."""
    if line not in ANSIBLE:
        sys.exit(
            f"install_collections: ansible-core {line} is not a supported line; "
            f"the lines are {', '.join(ANSIBLE)}"
        )
    return ANSIBLE[line]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", nargs="?", type=Path, help="default: this Python's site-packages")
    parser.add_argument("--line", help="ansible-core line, e.g. 2.18; default: the installed one")
    parser.add_argument(
        "--print-version", action="store_true", help="print the ansible release and exit"
    )
    parser.add_argument(
        "--collection",
        action="append",
        help=f"NAMESPACE/NAME to extract (repeatable; default {', '.join(COLLECTIONS)})",
    )
    args = parser.parse_args()
    collections = tuple(args.collection or COLLECTIONS)
    line = args.line or installed_line()
    version, sha256, core = ansible_for(line)
    if args.print_version:
        print(f"{version} (kubernetes.core {core})")
        return 0
    target = args.target or Path(sysconfig.get_paths()["purelib"])
    marker = target / "ansible_collections" / f".from-ansible-{version}"
    if marker.exists() and all((target / "ansible_collections" / c).is_dir() for c in collections):
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [
                sys.executable,
                "-m",
                "pip",
                "download",
                "--quiet",
                "--no-deps",
                "--only-binary=:all:",
                "--dest",
                tmp,
                f"ansible=={version}",
            ],
            check=True,
        )
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != sha256:
            sys.exit(f"install_collections: {wheel.name} has sha256 {digest}, expected {sha256}")
        with zipfile.ZipFile(wheel) as zf:
            for collection in collections:
                prefix = f"ansible_collections/{collection}/"
                shutil.rmtree(target / prefix, ignore_errors=True)
                zf.extractall(target, [n for n in zf.namelist() if n.startswith(prefix)])
    for old in (target / "ansible_collections").glob(".from-ansible-*"):
        old.unlink()
    marker.touch()
    print(f"installed {', '.join(collections)} from ansible {version} into {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
