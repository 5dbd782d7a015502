"""The images the integration tests run, built with no Docker engine and no registry.

`hack/image.sh` builds them with buildah (cached by content hash: a build whose inputs are
built already costs nothing): the base image, the seeds' image FROM it, and the image of the
tests' operator-sdk-style project `sdk-operator/` FROM it. `make test` builds them all before
pytest starts (`python -m tests.integration.kit.images`); the fixtures ask again and get the
cached names.
"""

from __future__ import annotations

import hashlib
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IMAGE_SH = REPO / "hack" / "image.sh"
SDK_OPERATOR = REPO / "tests" / "integration" / "sdk-operator"
# operator-sdk's ENTRYPOINT (its images/ansible-operator/Dockerfile), which the base image keeps.
ENTRYPOINT = [
    "/tini",
    "--",
    "/usr/local/bin/ansible-operator",
    "run",
    "--watches-file=./watches.yaml",
]
# Where sdk-operator's requirements.yml finds the collection tarball during the build (a folder
# every Debian image has, empty: the mount leaves nothing behind in the image).
COLLECTIONS_MOUNT = "/mnt"
CACHE = Path(
    os.environ.get("OPERATOR_RUNNER_CACHE")
    or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "operator-runner"
)


# True when run as a script: hack/image.sh's progress goes to the terminal, not into an error.
PROGRESS = False


def image_sh(*args: str, env: dict[str, str] | None = None, timeout: float = 1500) -> str:
    """Run hack/image.sh; its output (a name, a path, JSON: progress goes to stderr)."""
    proc = subprocess.run(
        [str(IMAGE_SH), *args],
        stdout=subprocess.PIPE,
        stderr=None if PROGRESS else subprocess.PIPE,
        text=True,
        timeout=timeout,
        env={**os.environ, **(env or {})},
        check=False,
    )
    if proc.returncode != 0:
        raise AssertionError(
            f"hack/image.sh {' '.join(args)} failed: {(proc.stderr or '')[-4000:]}"
        )
    return proc.stdout.strip()


def _sources_hash(root: Path) -> str:
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        digest.update(str(path.relative_to(root)).encode() + b"\0" + path.read_bytes())
    return digest.hexdigest()[:16]


def collection_tarballs(source: Path) -> Path:
    """`ansible-galaxy collection build` of every collection under `source`
    (<namespace>/<name>/galaxy.yml) into a folder named by the sources' hash. Built once per
    change of the sources: a tarball carries its build time, and the image's content hash counts
    the tarball's bytes."""
    out = CACHE / "image" / "collections" / _sources_hash(source)
    if out.is_dir() and any(out.glob("*.tar.gz")):
        return out
    staging = out.with_name(out.name + ".tmp")
    subprocess.run(["rm", "-rf", str(staging)], check=True)
    staging.mkdir(parents=True)
    galaxy = Path(sys.executable).parent / "ansible-galaxy"
    for manifest in sorted(source.glob("*/*/galaxy.yml")):
        subprocess.run(
            [
                str(galaxy),
                "collection",
                "build",
                str(manifest.parent),
                "--output-path",
                str(staging),
            ],
            check=True,
            capture_output=True,
            timeout=300,
        )
    staging.rename(out)
    return out


def seeds_image() -> str:
    """The seeds' operators (./Dockerfile FROM the base image)."""
    return image_sh("build")


def base_image() -> str:
    """The base image (images/operator-runner/Dockerfile): no operator of its own."""
    return image_sh("build-base")


def sdk_operator_image() -> str:
    """tests/integration/sdk-operator: operator-sdk's scaffolded Dockerfile, FROM the base image,
    with a collection that ansible-galaxy installs from requirements.yml (a tarball of the tests'
    own making, mounted for the build: Galaxy is unreachable here)."""
    tarballs = collection_tarballs(SDK_OPERATOR / "collection")
    return image_sh("build-project", str(SDK_OPERATOR), "-v", f"{tarballs}:{COLLECTIONS_MOUNT}")


if __name__ == "__main__":  # make test: every image before pytest starts
    PROGRESS = True
    for build in (seeds_image, sdk_operator_image):
        print(build(), flush=True)
