"""A bad set-up stops hack/build-binaries.sh and hack/venv.sh at once, with one message that
says what is missing and how to fix it, and leaves nothing half-written in the cache.

These run the real scripts; each fails before any build starts, so they take seconds.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "hack" / "build-binaries.sh"
VENV = REPO / "hack" / "venv.sh"
GO = shutil.which("go")


def run(
    cmd: list[str], env: dict[str, str], user: str | None = None
) -> subprocess.CompletedProcess[str]:
    if user is not None:
        cmd = ["runuser", "-u", user, "--", "env", *(f"{k}={v}" for k, v in env.items()), *cmd]
        env = {"PATH": os.environ["PATH"]}
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=120, check=False)


@pytest.fixture
def caches(tmp_path: Path) -> dict[str, str]:
    """Empty caches of our own: nothing of the machine's is touched."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GO", "OPERATOR_RUNNER"))}
    env.update(
        OPERATOR_RUNNER_CACHE=str(tmp_path / "cache"),
        GOCACHE=str(tmp_path / "gocache"),
        GOMODCACHE=str(tmp_path / "gomodcache"),
    )
    return env


def only_lines(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("build-binaries:")]


def test_no_go_toolchain(caches: dict[str, str], tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"  # the tools the script needs, without go
    bin_dir.mkdir()
    for tool in ("bash", "dirname", "mkdir", "id", "stat", "env", "cat", "sha256sum"):
        path = shutil.which(tool)
        if path:
            (bin_dir / tool).symlink_to(path)
    proc = run([str(BUILD)], {**caches, "PATH": str(bin_dir)})
    assert proc.returncode != 0
    assert "no Go toolchain on PATH" in proc.stderr
    assert "Install Go >= 1.26" in proc.stderr
    assert not (tmp_path / "cache" / "bin").exists()


def test_check_mode_names_what_is_missing_and_builds_nothing(
    caches: dict[str, str], tmp_path: Path
) -> None:
    proc = run([str(BUILD), "--check"], caches)
    assert proc.returncode != 0
    assert "not built yet: kwok kwokctl etcd kube-apiserver" in proc.stderr
    assert "make binaries" in proc.stderr
    assert not (tmp_path / "gomodcache").exists()


@pytest.mark.skipif(GO is None, reason="needs a Go toolchain")
def test_unreachable_module_proxy(caches: dict[str, str], tmp_path: Path) -> None:
    # Port 9 (discard) on the loopback: nothing listens, the connection is refused at once.
    env = {**caches, "GOPROXY": "http://127.0.0.1:9", "GONOSUMDB": "*", "GOFLAGS": ""}
    proc = run([str(BUILD)], env)
    assert proc.returncode != 0
    assert "the Go module proxy (http://127.0.0.1:9) could not be reached" in proc.stderr
    # nothing half-written: no binary, no staging folder, no resolved module left behind
    cache = tmp_path / "cache"
    assert not any((cache / "bin").rglob("kwok*"))
    assert not any((cache / "staging").iterdir())
    assert not (cache / "build" / "etcd-v3.6.10").exists()


@pytest.fixture
def full_disk(tmp_path: Path) -> Iterator[Path]:
    if os.geteuid() != 0 or shutil.which("mount") is None:
        pytest.skip("mounting a small tmpfs needs root")
    mnt = tmp_path / "small"
    mnt.mkdir()
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=8m", "tmpfs", str(mnt)],
        capture_output=True,
        check=False,
    )
    if proc.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {proc.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", str(mnt)], check=False)


@pytest.mark.skipif(GO is None, reason="needs a Go toolchain")
def test_full_disk(caches: dict[str, str], full_disk: Path) -> None:
    env = {
        **caches,
        "OPERATOR_RUNNER_CACHE": str(full_disk / "cache"),
        "GOCACHE": str(full_disk / "gocache"),
        "GOMODCACHE": str(full_disk / "gomodcache"),
    }
    proc = run([str(BUILD)], env)
    assert proc.returncode != 0
    (line,) = [line for line in only_lines(proc.stderr) if "MB free" in line]
    assert f"MB free on the disk of {full_disk}" in line
    assert "Free some space" in line
    assert not (full_disk / "cache" / "staging").exists() or not any(
        (full_disk / "cache" / "staging").iterdir()
    )


def _other_user() -> str | None:
    if os.geteuid() != 0 or shutil.which("runuser") is None:
        return None
    for name in ("nobody", "daemon"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    return None


@pytest.mark.skipif(GO is None, reason="needs a Go toolchain")
def test_cache_of_another_user(caches: dict[str, str], tmp_path: Path) -> None:
    """As root: a cache that belongs to someone else is refused, though root could write it."""
    user = _other_user()
    if user is None:
        pytest.skip("needs root and another user")
    cache = tmp_path / "cache"
    cache.mkdir()
    entry = pwd.getpwnam(user)
    os.chown(cache, entry.pw_uid, entry.pw_gid)
    proc = run([str(BUILD)], caches)
    assert proc.returncode != 0
    assert f"the cache folder {cache} belongs to user {user}, not to root" in proc.stderr
    assert "OPERATOR_RUNNER_CACHE" in proc.stderr
    assert list(cache.iterdir()) == []


@pytest.mark.skipif(GO is None, reason="needs a Go toolchain")
def test_cache_not_writable_for_a_user(caches: dict[str, str], tmp_path: Path) -> None:
    """As another user: a cache under a folder of root's cannot be made; the message says so."""
    user = _other_user()
    if user is None:
        pytest.skip("needs root and another user")
    proc = run([str(BUILD)], caches, user=user)
    if "build-binaries:" not in proc.stderr:
        pytest.skip(f"user {user} cannot run the script here: {proc.stderr.strip()}")
    assert proc.returncode != 0
    assert f"the cache folder {tmp_path / 'cache'} cannot be created" in proc.stderr
    assert f"not writable by {user}" in proc.stderr


def _unsupported_python() -> str | None:
    pyenv = Path(os.environ.get("PYENV_ROOT", Path.home() / ".pyenv")) / "versions"
    candidates = [shutil.which(f"python3.{minor}") for minor in (10, 9, 14)]
    candidates += [str(p) for p in sorted(pyenv.glob("3.1[04]*/bin/python3.1[04]"))]
    for candidate in candidates:
        if candidate and subprocess.run([candidate, "-c", ""], check=False).returncode == 0:
            return candidate
    return None


def test_venv_refuses_an_unsupported_python(tmp_path: Path) -> None:
    old = _unsupported_python()
    if old is None:
        pytest.skip("no unsupported Python on this machine")
    proc = run([str(VENV), old, str(tmp_path / "venv")], dict(os.environ))
    assert proc.returncode != 0
    assert "operator-runner needs Python 3.11 to 3.13" in proc.stderr
    assert not (tmp_path / "venv").exists()


def test_venv_names_a_missing_python(tmp_path: Path) -> None:
    proc = run([str(VENV), "python3.99", str(tmp_path / "venv")], dict(os.environ))
    assert proc.returncode != 0
    assert "no Python interpreter 'python3.99' on PATH" in proc.stderr
    assert not (tmp_path / "venv").exists()
