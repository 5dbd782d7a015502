"""The module payloads a fork server's playbook jobs share (runner/ansible/warm/patches/core.py,
`ansiballz-cache`): each job starts with links to the shared payloads, builds in its own folder
(two jobs building one payload at once no longer race on ansible-core's `<name>-part` file),
and hands over what it built, whole, when it ends."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from runner.ansible.warm.jobenv import ANSIBALLZ_CACHE_ENV
from runner.ansible.warm.patches import core


def job(tmp: Path, name: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Path, Callable[[], Any]]:
    """A job's own payload folder, once the patch has run in it, and its exit handler."""
    import ansible.constants as C

    local = tmp / name
    local.mkdir()
    monkeypatch.setattr(C, "DEFAULT_LOCAL_TMP", str(local), raising=False)
    handlers: list[Callable[[], Any]] = []
    monkeypatch.setattr(core.atexit, "register", lambda f, *a: handlers.append(lambda: f(*a)) or f)
    core.share_ansiballz_cache()
    (handler,) = handlers
    return local / "ansiballz_cache", handler


def test_jobs_build_in_their_own_folder_and_hand_over_whole_payloads(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "k8s-ZIP_DEFLATED").write_bytes(b"built earlier")
    (shared / "k8s_info-ZIP_DEFLATED-part").write_bytes(b"half")  # a job killed while writing
    monkeypatch.setenv(ANSIBALLZ_CACHE_ENV, str(shared))
    first, first_ends = job(tmp_path, "first", monkeypatch)
    second, second_ends = job(tmp_path, "second", monkeypatch)
    for own in (first, second):
        assert sorted(p.name for p in own.iterdir()) == ["k8s-ZIP_DEFLATED"]
        assert (own / "k8s-ZIP_DEFLATED").read_bytes() == b"built earlier"
    # both build the same payload at once, as ansible-core does: -part, then rename
    for own, content in ((first, b"one"), (second, b"two")):
        (own / "copy-ZIP_DEFLATED-part").write_bytes(content)
    for own in (first, second):
        (own / "copy-ZIP_DEFLATED-part").rename(own / "copy-ZIP_DEFLATED")
    first_ends()
    second_ends()
    assert (shared / "copy-ZIP_DEFLATED").read_bytes() in (b"one", b"two")
    assert sorted(p.name for p in shared.iterdir()) == [
        "copy-ZIP_DEFLATED",
        "k8s-ZIP_DEFLATED",
        "k8s_info-ZIP_DEFLATED-part",
    ]
    third, _ = job(tmp_path, "third", monkeypatch)
    assert sorted(p.name for p in third.iterdir()) == ["copy-ZIP_DEFLATED", "k8s-ZIP_DEFLATED"]
