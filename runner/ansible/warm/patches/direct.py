"""Module tasks handed from a playbook job's task worker straight to the module server.

With pipelining, the local connection runs a module as `/bin/sh -c '<python> && sleep 0'` with
the module on stdin: a shell, an inner shell, `sleep`, and (on the warm path) the module
client, a Python that only passes its stdin, stdout and stderr to the module server. Each of
those processes costs start-up CPU on every module task. In a playbook job forked from the
playbook server, the local connection sends such a command's job to the module server itself,
with pipes for stdin, stdout and stderr, and returns what the job wrote and its exit code,
as `subprocess.Popen(...).communicate()` would. Anything else (another interpreter, become,
a command that is not exactly that form, no module server, a refused job) runs as before.
"""

from __future__ import annotations

import array
import contextlib
import marshal
import os
import shlex
import socket
import sys
import threading
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from runner.ansible.warm.jobenv import CLIENT_NAME, MODULE_SOCKET_ENV
from runner.ansible.warm.patches import guard
from runner.ansible.warm.patches.shellcmd import shell_script

NAME = "direct"
_PLAIN: list[Callable[..., tuple[int, bytes, bytes]]] = []


def module_command(cmd: object, client: str) -> dict[str, str] | None:
    """The environment assignments of `/bin/sh -c '[NAME=VALUE ...] <client> && sleep 0'`,
    None for any other command."""
    wrapped = shell_script(cmd)
    if wrapped is None or not wrapped[0].endswith("sh"):
        return None
    try:
        inner = shlex.split(wrapped[1])
    except ValueError:
        return None
    if inner[-4:] != [client, "&&", "sleep", "0"]:
        return None
    assignments: dict[str, str] = {}
    for word in inner[:-4]:
        name, eq, value = word.partition("=")
        if not eq or not name.isidentifier():
            return None
        assignments[name] = value
    return assignments


def run_job(
    sock_path: str, argv: list[str], cwd: str, env: Mapping[str, str], stdin: bytes
) -> tuple[int, bytes, bytes] | None:
    """Run one job on a fork server with pipes: (exit code, stdout, stderr), or None when no
    server took it."""
    conn = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    pipes = [os.pipe() for _ in range(3)]
    theirs = [pipes[0][0], pipes[1][1], pipes[2][1]]
    ours = [pipes[0][1], pipes[1][0], pipes[2][0]]
    try:
        conn.connect(sock_path)
        body = marshal.dumps({"argv": argv, "cwd": cwd, "env": dict(env)})
        conn.sendmsg(
            [len(body).to_bytes(4, "big") + body],
            [(socket.SOL_SOCKET, socket.SCM_RIGHTS, array.array("i", theirs))],
        )
    except OSError:
        for fd in theirs + ours:
            os.close(fd)
        conn.close()
        return None
    for fd in theirs:
        os.close(fd)
    replies = conn.makefile("rb")
    with conn, replies:
        word, _, _ = replies.readline().decode().partition(" ")
        if word != "pid":
            for fd in ours:
                os.close(fd)
            return None
        out: dict[int, bytes] = {}
        readers = [threading.Thread(target=_drain, args=(fd, out)) for fd in ours[1:]]
        for reader in readers:
            reader.start()
        with contextlib.suppress(BrokenPipeError):
            _write_all(ours[0], stdin)
        os.close(ours[0])
        for reader in readers:
            reader.join()
        word, _, value = replies.readline().decode().partition(" ")
        code = int(value) if word == "exit" else 1
    return code, out[ours[1]], out[ours[2]]


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view) :]


def _drain(fd: int, out: dict[int, bytes]) -> None:
    chunks = []
    with open(fd, "rb", closefd=True) as f:
        while chunk := f.read1(65536):
            chunks.append(chunk)
    out[fd] = b"".join(chunks)


def install() -> None:
    """The local connection's pipelined module commands go to the module server, in a job whose
    $OPERATOR_RUNNER_MODULE_SOCKET names one."""
    from ansible.plugins.connection import local

    original: Callable[..., tuple[int, bytes, bytes]] = local.Connection.exec_command
    _PLAIN[:] = [original]

    def exec_command(
        self: Any, cmd: str, in_data: bytes | None = None, sudoable: bool = True
    ) -> tuple[int, bytes, bytes]:
        sock_path = os.environ.get(MODULE_SOCKET_ENV)
        if in_data is None or not sock_path or guard.broken(NAME):
            return original(self, cmd, in_data=in_data, sudoable=sudoable)
        try:
            client = str(Path(sock_path).parent / CLIENT_NAME)
            assignments = None if sudoable and self.become else module_command(cmd, client)
            if assignments is not None:
                if not self._connected:
                    self._connect()
                local.display.vvv(f"EXEC {cmd}", host=self._play_context.remote_addr)
                env = {**os.environ, **assignments}
                cwd = os.fsdecode(self.cwd) if self.cwd else os.getcwd()
        except Exception as err:  # ours: Ansible's own exec_command from now on
            guard.failed(NAME, err)
            assignments = None
        if assignments is None:
            return original(self, cmd, in_data=in_data, sudoable=sudoable)
        try:
            # argv as the module client would send it: the module comes on stdin
            result = run_job(sock_path, [sys.executable], cwd, env, in_data)
        except Exception as err:  # the job may have started: not run again here
            guard.failed(NAME, err)
            return 1, b"", f"operator-runner: the module job failed: {err}\n".encode()
        if result is None:  # no server took it
            return original(self, cmd, in_data=in_data, sudoable=sudoable)
        return result

    local.Connection.exec_command = exec_command


def check() -> None:
    import inspect

    from ansible.plugins.connection import local

    parameters = list(inspect.signature(_PLAIN[0]).parameters)
    if parameters != ["self", "cmd", "in_data", "sudoable"]:
        raise AssertionError(f"local.Connection.exec_command{inspect.signature(_PLAIN[0])}")
    for attribute in ("_connect", "set_become_plugin"):
        if attribute not in dir(local.Connection):
            raise AssertionError(f"local.Connection has no {attribute}")
    if local.Connection.exec_command is _PLAIN[0]:
        raise AssertionError("exec_command is not wrapped")
    client = "/run/operator-runner-warm-x/python"
    if module_command(f"/bin/sh -c 'LANG=C {client} && sleep 0'", client) != {"LANG": "C"}:
        raise AssertionError("a pipelined module command is not recognised")
