#!/usr/bin/env python3
"""Install the Ansible collections the roles need into this Python environment.

kubernetes.core is taken from the `ansible` distribution on PyPI (the package registry is the only
source our machines reach; Ansible Galaxy is not). The whole distribution is ~55 MB of wheel and
~500 MB installed with a hundred collections we do not use, so only kubernetes.core is extracted
(~1 MB) into <site-packages>/ansible_collections, where ansible-core finds it with no
configuration. The wheel is verified against a pinned sha256 first.

Which `ansible` release: the newest of the line of the ansible-core installed in this Python
(ansible 8.x goes with ansible-core 2.15, ... 14.x with 2.21), or the line given with
`--line 2.18`. hack/lines.sh lists the lines and their Pythons.
"""

from __future__ import annotations

import argparse
import hashlib
import importlib.metadata
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

# ansible-core line: (the newest `ansible` release of that line, sha256 of its wheel, the
# kubernetes.core version inside, for the messages and docs)
# fmt: off
ANSIBLE: dict[str, tuple[str, str, str]] = {
    "2.15": ("8.7.0", "fa7d3bc2dfdb0ab031df645814ff86b15cb5ec041bfbee4041f795abfa5646ca", "2.4.0"),
    "2.16": ("9.13.0", "b64c6e8cad0171576e0ed4b1fd48a5dc551128580dbb979d0e8b4cd85b969074", "2.4.2"),
    "2.17": ("10.7.0", "0089f08e047ceb70edd011be009f5c6273add613fbe491e9697c0556c989d8ea", "3.2.0"),
    "2.18": ("11.13.0", "7f1c9c6a6026ff214d9240647e4d2b019b2a9d4c7a2bc733932bcf92af80ab04", "5.4.1"),  # noqa: E501
    "2.19": ("12.3.0", "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414", "6.2.0"),
    "2.20": ("13.8.0", "daf9c9a2850bbc6c098ba3368aeba99d4ae37c90bca47f974dc19342c0571361", "6.4.0"),
    "2.21": ("14.5.0", "245623ccc2d31d0f6f4bdb63168d550cad305fb032cc43d96e8f61ce8ab0ba84", "6.6.0"),
}
# fmt: on
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
    args = parser.parse_args()
    line = args.line or installed_line()
    version, sha256, core = ansible_for(line)
    if args.print_version:
        print(f"{version} (kubernetes.core {core})")
        return 0
    target = args.target or Path(sysconfig.get_paths()["purelib"])
    marker = target / "ansible_collections" / f".from-ansible-{version}"
    if marker.exists():
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
            for collection in COLLECTIONS:
                prefix = f"ansible_collections/{collection}/"
                shutil.rmtree(target / prefix, ignore_errors=True)
                zf.extractall(target, [n for n in zf.namelist() if n.startswith(prefix)])
    for old in (target / "ansible_collections").glob(".from-ansible-*"):
        old.unlink()
    marker.touch()
    print(f"installed {', '.join(COLLECTIONS)} {core} from ansible {version} into {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
