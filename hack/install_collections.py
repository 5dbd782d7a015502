#!/usr/bin/env python3
"""Install the Ansible collections the roles need into this Python environment.

kubernetes.core is taken from the `ansible` distribution on PyPI (the package registry is the only
source our machines reach; Ansible Galaxy is not). The whole distribution is ~55 MB of wheel and
~500 MB installed with a hundred collections we do not use, so only kubernetes.core is extracted
(~1 MB) into <site-packages>/ansible_collections, where ansible-core finds it with no
configuration. The wheel is verified against a pinned sha256 first.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
import sysconfig
import tempfile
import zipfile
from pathlib import Path

ANSIBLE_VERSION = "12.3.0"
WHEEL_SHA256 = "cd156f82fa87f7a899212b0efa9f7ca3a24d609212de9f78428a572eb01e5414"
COLLECTIONS = ("kubernetes/core",)


def main() -> int:
    target = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(sysconfig.get_paths()["purelib"])
    marker = target / "ansible_collections" / f".from-ansible-{ANSIBLE_VERSION}"
    if marker.exists():
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps",
             "--only-binary=:all:", "--dest", tmp, f"ansible=={ANSIBLE_VERSION}"],
            check=True,
        )
        wheel = next(Path(tmp).glob("ansible-*.whl"))
        digest = hashlib.sha256(wheel.read_bytes()).hexdigest()
        if digest != WHEEL_SHA256:
            sys.exit(f"install_collections: {wheel.name} has sha256 {digest}, expected {WHEEL_SHA256}")
        with zipfile.ZipFile(wheel) as zf:
            for collection in COLLECTIONS:
                prefix = f"ansible_collections/{collection}/"
                shutil.rmtree(target / prefix, ignore_errors=True)
                zf.extractall(target, [n for n in zf.namelist() if n.startswith(prefix)])
    marker.touch()
    print(f"installed {', '.join(COLLECTIONS)} from ansible {ANSIBLE_VERSION} into {target}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
