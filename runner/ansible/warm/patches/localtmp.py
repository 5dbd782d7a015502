"""A playbook job's task temp directories made and removed in the task worker itself.

An action plugin that may transfer files (`TRANSFERS_FILES`, e.g. kubernetes.core's `k8s` and
`k8s_info`) makes a remote temp directory before it runs, even when pipelining means nothing is
transferred, and removes it afterwards. On the local connection each of those is
`/bin/sh -c '( umask 77 && mkdir -p "` echo BASE `"&& mkdir "` echo BASE/NAME `" && echo
NAME="` echo BASE/NAME `" ) && sleep 0'` and `/bin/sh -c 'rm -f -r BASE/NAME/ > /dev/null 2>&1
&& sleep 0'`: two shells, `mkdir` twice, `rm` and `sleep` twice, nine processes per task for
two directory operations. `handle` does exactly those operations with the same umask, exit
code and output, and only for these two command forms with plain paths (letters, digits,
`_./+-`, for which `echo` prints the path unchanged); anything else is None and runs in a
shell as before.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from collections.abc import Callable
from typing import Any

from runner.ansible.warm.jobenv import JOB_ENV
from runner.ansible.warm.patches import guard
from runner.ansible.warm.patches.shellcmd import shell_script

NAME = "localtmp"

_PATH = r"/[A-Za-z0-9_./+-]+"
_NAME = r"ansible-tmp-[A-Za-z0-9_.+-]+"
_MKDTEMP = re.compile(
    rf'\( umask (?P<umask>[0-7]{{1,4}}) && mkdir -p "` echo (?P<base>{_PATH}) `"&& '
    rf'mkdir "` echo (?P<dir>{_PATH}) `" && echo (?P<name>{_NAME})="` echo (?P=dir) `" \) '
    r"&& sleep 0"
)
_REMOVE = re.compile(rf"rm -f -r (?P<dir>{_PATH}/{_NAME})/? > /dev/null 2>&1 && sleep 0")


def handle(cmd: object) -> tuple[int, bytes, bytes] | None:
    """(exit code, stdout, stderr) of a temp directory command done here, or None."""
    wrapped = shell_script(cmd)
    if wrapped is None or wrapped[0] != "/bin/sh":
        return None
    script = wrapped[1]
    made = _MKDTEMP.fullmatch(script)
    if made is not None:
        if made["dir"] != f"{made['base']}/{made['name']}":
            return None
        return _mkdtemp(int(made["umask"], 8), made["base"], made["dir"], made["name"])
    removed = _REMOVE.fullmatch(script)
    if removed is not None:
        return _remove(removed["dir"])
    return None


def _mkdtemp(umask: int, base: str, path: str, name: str) -> tuple[int, bytes, bytes]:
    old = os.umask(umask)
    try:
        os.makedirs(base, exist_ok=True)
        os.mkdir(path)
    except OSError as err:
        failed = err.filename or path
        return 1, b"", f"mkdir: cannot create directory '{failed}': {err.strerror}\n".encode()
    finally:
        os.umask(old)
    return 0, f"{name}={path}\n".encode(), b""


def _remove(path: str) -> tuple[int, bytes, bytes] | None:
    if os.path.islink(path):
        return None  # rm's own rules for a link: the shell's job
    shutil.rmtree(path, ignore_errors=True)
    if os.path.lexists(path):
        return 1, b"", b""  # what rm -f -r with its output sent to /dev/null would answer
    return 0, b"", b""


def install() -> None:
    """In a warm playbook job (and its task workers): the local connection's task temp
    directory commands done here."""
    from ansible.plugins.connection import local

    original: Callable[..., tuple[int, bytes, bytes]] = local.Connection.exec_command

    def exec_command(
        self: Any, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        if in_data is not None or os.environ.get(JOB_ENV) != "playbook" or guard.broken(NAME):
            return original(self, cmd, in_data=in_data, sudoable=sudoable)
        try:
            done = None if sudoable and self.become else handle(cmd)
            if done is not None:
                local.display.vvv(f"EXEC {cmd} (done in the worker)")
        except Exception as err:  # ours: the shell from now on
            guard.failed(NAME, err)
            done = None
        if done is None:
            return original(self, cmd, in_data=in_data, sudoable=sudoable)
        return done

    local.Connection.exec_command = exec_command


def check() -> None:
    """The commands this line's sh shell plugin builds are the ones `handle` knows."""
    from ansible.plugins.loader import shell_loader

    sh = shell_loader.get("sh")
    sh.set_options(var_options={"remote_tmp": "~/.ansible/tmp"})
    with tempfile.TemporaryDirectory(prefix="localtmp-check-") as base:
        made = f"{base}/ansible-tmp-1.5-42-7"
        create = f"/bin/sh -c {_quote(sh.mkdtemp(basefile='ansible-tmp-1.5-42-7', tmpdir=base))}"
        remove = f"/bin/sh -c {_quote(sh.remove(made + '/', recurse=True))}"
        if handle(create) != (0, f"ansible-tmp-1.5-42-7={made}\n".encode(), b""):
            raise AssertionError(f"mkdtemp not handled: {create}")
        if not os.path.isdir(made) or handle(remove) != (0, b"", b"") or os.path.exists(made):
            raise AssertionError(f"remove not handled: {remove}")


def _quote(inner: str) -> str:
    """As _low_level_execute_command hands a command to the local connection."""
    import shlex

    return shlex.quote(inner + " && sleep 0")
