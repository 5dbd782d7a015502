"""The images the integration tests run, built with no Docker engine and no registry.

`hack/image.sh` builds them with buildah (cached by content hash: a build whose inputs are
built already costs nothing): the base image, the seeds' image FROM it, and the images of the
tests' two operator-sdk projects FROM it, whose Dockerfiles were written for operator-sdk's UBI
image: `sdk-operator/` (operator-sdk's scaffold, plus `dnf update --security --bugfix` and `dnf
install` as root, an inventory naming /usr/bin/python3) and `ubi-operator/` (yum, microdnf,
`python3 -m pip install`, collections from git repositories, a profiler ansible.cfg, two watches
files, its own ENTRYPOINT). `make test` builds them all before pytest starts (`python -m
tests.integration.kit.images`); the fixtures ask again and get the cached names.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[3]
IMAGE_SH = REPO / "hack" / "image.sh"
SDK_OPERATOR = REPO / "tests" / "integration" / "sdk-operator"
UBI_OPERATOR = REPO / "tests" / "integration" / "ubi-operator"
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


# in_image's last steps, as root in a mount namespace of its own: the image's root filesystem
# under a throwaway overlay (what the command writes never reaches the image), /proc, /dev, a
# tmpfs on /tmp, the host's resolv.conf when the command needs the network; then chroot, the
# user, the image's working directory and environment.
_IN_IMAGE = r"""
set -eu
state=$1 lower=$2 user=$3 workdir=$4 network=$5
shift 5
root=$state/merged
mount -t overlay overlay -o "lowerdir=$lower,upperdir=$state/upper,workdir=$state/work" "$root"
mount -t proc proc "$root/proc"
mount --rbind /dev "$root/dev"
mount -t tmpfs -o mode=1777 tmpfs "$root/tmp"
if [ "$network" = 1 ]; then mount --bind /etc/resolv.conf "$root/etc/resolv.conf"; fi
exec chroot --userspec="$user" "$root" /usr/bin/env -C "$workdir" -i "$@"
"""


def in_image(
    image: str, *argv: str, user: str = "1001:0", network: bool = False, timeout: float = 600
) -> subprocess.CompletedProcess[str]:
    """Run `argv` inside `image` (root only): its root filesystem under a throwaway overlay, as
    `user`, in its working directory with its environment (Env); the host's network when
    `network`. Output captured; the exit status is the caller's to judge."""
    rootfs = image_sh("rootfs", env={"IMAGE": image})
    config = json.loads(image_sh("inspect", env={"IMAGE": image}))["OCIv1"]["config"]
    with tempfile.TemporaryDirectory(prefix="ort-in-image-") as state:
        for folder in ("upper", "work", "merged"):
            (Path(state) / folder).mkdir()
        return subprocess.run(
            ["unshare", "--mount", "--fork", "sh", "-c", _IN_IMAGE, "sh", state, rootfs, user,
             config.get("WorkingDir") or "/", "1" if network else "0", *config["Env"], *argv],
            capture_output=True, text=True, timeout=timeout, check=False,
        )  # fmt: skip


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


# ubi-operator's requirements.yml installs these from git repositories, as projects that pin
# collections to their GitHub sources do (Galaxy and GitHub are out of reach here): the
# collection's files from the `ansible` release of the default line (ansible.posix 1.6.2, a
# version such projects pin), committed with a galaxy.yml made from its MANIFEST.json and tagged
# with its version.
GIT_COLLECTIONS = ("ansible/posix",)
GIT_COLLECTIONS_LINE = "2.18"
# The uid of the user the build's ansible-galaxy runs as (the base image's USER): git refuses to
# clone a local repository another user owns ("detected dubious ownership").
BUILD_UID = 1001


def _git(*args: str, cwd: Path) -> None:
    fixed = "2000-01-01T00:00:00Z"  # the same commit, hence the same image hash, on every machine
    env = {
        **os.environ,
        "GIT_AUTHOR_NAME": "operator-runner tests",
        "GIT_AUTHOR_EMAIL": "tests@operator-runner.invalid",
        "GIT_AUTHOR_DATE": fixed,
        "GIT_COMMITTER_NAME": "operator-runner tests",
        "GIT_COMMITTER_EMAIL": "tests@operator-runner.invalid",
        "GIT_COMMITTER_DATE": fixed,
    }
    subprocess.run(
        ["git", "-c", "init.defaultBranch=main", *args],
        cwd=cwd,
        env=env,
        check=True,
        capture_output=True,
        timeout=120,
    )


def collection_git_repos() -> Path:
    """A folder of bare git repositories, <namespace>.<name>.git, one for each of
    GIT_COLLECTIONS, tagged with the collection's version and owned by BUILD_UID; made once."""
    installer = IMAGE_SH.parent / "install_collections.py"  # which `ansible` release
    recipe = json.dumps([GIT_COLLECTIONS, GIT_COLLECTIONS_LINE, installer.read_text()])
    out = CACHE / "image" / "git" / hashlib.sha256(recipe.encode()).hexdigest()[:16]
    if out.is_dir() and all((out / f"{c.replace('/', '.')}.git").is_dir() for c in GIT_COLLECTIONS):
        return out
    staging = out.with_name(out.name + ".tmp")
    shutil.rmtree(staging, ignore_errors=True)
    extracted = staging / "extracted"
    command = [sys.executable, str(installer)]
    command += ["--line", GIT_COLLECTIONS_LINE, str(extracted)]
    for collection in GIT_COLLECTIONS:
        command += ["--collection", collection]
    subprocess.run(command, check=True, capture_output=True, timeout=600)
    for collection in GIT_COLLECTIONS:
        source = extracted / "ansible_collections" / collection
        info = json.loads((source / "MANIFEST.json").read_text())["collection_info"]
        galaxy = {k: v for k, v in info.items() if v not in (None, [], {}, "") and k != "license"}
        (source / "galaxy.yml").write_text(json.dumps(galaxy, indent=2) + "\n")  # JSON is YAML
        for built in ("MANIFEST.json", "FILES.json"):
            (source / built).unlink()
        _git("init", "-q", cwd=source)
        _git("add", "-A", cwd=source)
        _git("commit", "-q", "-m", f"{collection.replace('/', '.')} {info['version']}", cwd=source)
        _git("tag", info["version"], cwd=source)
        _git(
            "clone", "-q", "--bare", str(source), f"{collection.replace('/', '.')}.git", cwd=staging
        )
    shutil.rmtree(extracted)
    if os.geteuid() == 0:
        for path in [staging, *staging.rglob("*")]:
            os.lchown(path, BUILD_UID, 0)
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


def ubi_operator_image() -> str:
    """tests/integration/ubi-operator: a Dockerfile written for operator-sdk's UBI image (yum,
    microdnf, pip, git-sourced collections, a profiler ansible.cfg), FROM the base image; the
    collections' git repositories mounted for the build."""
    return image_sh(
        "build-project", str(UBI_OPERATOR), "-v", f"{collection_git_repos()}:{COLLECTIONS_MOUNT}"
    )


if __name__ == "__main__":  # make test: every image before pytest starts
    PROGRESS = True
    for build in (seeds_image, sdk_operator_image, ubi_operator_image):
        print(build(), flush=True)
