"""A task's temp directory made and removed in the worker (runner/ansible/localtmp.py) gives what
the shell gives: same exit code, output, directory and mode, for the commands ansible-core's sh
shell plugin really builds."""

from __future__ import annotations

import os
import shlex
import stat
import subprocess
from pathlib import Path

import pytest
from ansible.plugins.loader import shell_loader

from runner.ansible.warm.patches import localtmp


@pytest.fixture(scope="module")
def sh() -> object:
    shell = shell_loader.get("sh")
    shell.set_options(var_options={"remote_tmp": "~/.ansible/tmp"})
    return shell


def wrapped(inner: str) -> str:
    """As _low_level_execute_command hands it to the local connection."""
    return f"/bin/sh -c {shlex.quote(inner + ' && sleep 0')}"


def by_shell(cmd: str) -> tuple[int, bytes, bytes]:
    done = subprocess.run(cmd, shell=True, capture_output=True, check=False)
    return done.returncode, done.stdout, done.stderr


def test_mkdtemp_matches_the_shell(sh: object, tmp_path: Path) -> None:
    results = []
    for who in ("shell", "worker"):
        base = tmp_path / who / ".ansible-tmp"
        here = str(base).encode()
        cmd = wrapped(sh.mkdtemp(basefile="ansible-tmp-1.5-42-7", tmpdir=str(base)))  # type: ignore[attr-defined]
        result = localtmp.handle(cmd) if who == "worker" else by_shell(cmd)
        assert result is not None
        made = base / "ansible-tmp-1.5-42-7"
        mode = stat.S_IMODE(made.stat().st_mode)
        results.append((result[0], result[1].replace(here, b"BASE"), mode))
    assert results[0] == results[1]
    assert results[1][0] == 0 and results[1][2] == 0o700


def test_mkdtemp_of_an_existing_directory_fails_like_mkdir(sh: object, tmp_path: Path) -> None:
    (tmp_path / "ansible-tmp-1-2-3").mkdir()
    cmd = wrapped(sh.mkdtemp(basefile="ansible-tmp-1-2-3", tmpdir=str(tmp_path)))  # type: ignore[attr-defined]
    code, out, err = localtmp.handle(cmd) or (None, None, None)
    assert (code, out) == (1, b"")
    assert b"cannot create directory" in (err or b"")
    assert by_shell(cmd)[0] == 1


def test_remove_matches_the_shell(sh: object, tmp_path: Path) -> None:
    for who in ("shell", "worker"):
        made = tmp_path / who / "ansible-tmp-1-2-3"
        (made / "sub").mkdir(parents=True)
        (made / "sub" / "f").write_text("x")
        cmd = wrapped(sh.remove(f"{made}/", recurse=True) + "")  # type: ignore[attr-defined]
        result = localtmp.handle(cmd) if who == "worker" else by_shell(cmd)
        assert result == (0, b"", b"")
        assert not made.exists()
    again = wrapped(sh.remove(f"{tmp_path}/worker/ansible-tmp-1-2-3/", recurse=True))  # type: ignore[attr-defined]
    assert localtmp.handle(again) == by_shell(again) == (0, b"", b"")


@pytest.mark.parametrize(
    "inner",
    [
        '( umask 77 && mkdir -p "` echo ~/.ansible/tmp `"&& mkdir "` echo ~/.ansible/tmp/'
        'ansible-tmp-1-2-3 `" && echo ansible-tmp-1-2-3="` echo ~/.ansible/tmp/'
        'ansible-tmp-1-2-3 `" )',
        '( umask 77 && mkdir -p "` echo /t/$X `"&& mkdir "` echo /t/$X/ansible-tmp-1 `" && '
        'echo ansible-tmp-1="` echo /t/$X/ansible-tmp-1 `" )',
        '( umask 77 && mkdir -p "` echo /a `"&& mkdir "` echo /b/ansible-tmp-1 `" && '
        'echo ansible-tmp-1="` echo /b/ansible-tmp-1 `" )',
        "rm -f -r /tmp/x/other/ > /dev/null 2>&1",
        "rm -f -r '/tmp/with space/ansible-tmp-1/' > /dev/null 2>&1",
        "rm -f -r /tmp/ansible-tmp-1/; rm -rf / > /dev/null 2>&1",
    ],
)
def test_anything_else_is_left_to_the_shell(inner: str) -> None:
    assert localtmp.handle(wrapped(inner)) is None


def test_a_link_is_left_to_the_shell(tmp_path: Path) -> None:
    target = tmp_path / "target"
    target.mkdir()
    link = tmp_path / "ansible-tmp-1-2-3"
    os.symlink(target, link)
    assert localtmp.handle(wrapped(f"rm -f -r {link}/ > /dev/null 2>&1")) is None
    assert target.exists()
