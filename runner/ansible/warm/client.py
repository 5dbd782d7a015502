"""The fork servers' client: a tiny script used as ansible-runner's binary and as
ansible_python_interpreter, which hands its job to a server or execs the real program."""

from __future__ import annotations

import termios
from pathlib import Path

# --- client --------------------------------------------------------------------------------

# The client starts once per module task and once per run, so it imports nothing that Python
# does not load at start-up anyway (socket, json, os, signal would cost ~12 ms each time): the
# C modules underneath them instead (and select, for the signals it relays to the job: their
# pipe wakes its wait for the job's end, as the server's does: server/process.py).
CLIENT = r"""
import _signal, _socket, marshal, posix, select, sys

RELEASED = []  # the controlling terminal we let go of for the job (fd 0), if any

def fallback():
    if RELEASED:  # the real program runs here after all: take the terminal back
        reclaim_terminal()
    posix.execv(FALLBACK[0], FALLBACK + sys.argv[1:])

def drain(fd):
    try:
        while posix.read(fd, 512):
            pass
    except BlockingIOError:
        pass

def decode(b):
    return b.decode("utf-8", "surrogateescape")

WAKEUP = []  # the signal pipe's read end, once the job's signals are relayed

def lines(conn):
    buf = b""
    while True:
        while b"\n" not in buf:
            if WAKEUP:  # a signal that comes just before recv() would not interrupt it
                ready, _, _ = select.select([conn, WAKEUP[0]], [], [])
                if WAKEUP[0] in ready:
                    drain(WAKEUP[0])  # its relay runs next
                    continue
            chunk = conn.recv(4096)
            if not chunk:
                return
            buf += chunk
        line, buf = buf.split(b"\n", 1)
        word, _, value = decode(line).partition(" ")
        yield word, value

def release_terminal():
    # ansible-runner runs us under pexpect: a session leader whose controlling terminal is the
    # pty on fd 0, as ansible-playbook is on the plain path. The job runs in the server's
    # process tree, in a session of its own; it can make that pty its controlling terminal
    # (what Ansible's prompts and `pause` need: tcgetpgrp, raw mode) only once we let go of it.
    # Letting go sends SIGHUP to our own process group: ignored meanwhile.
    import fcntl
    _signal.signal(_signal.SIGHUP, _signal.SIG_IGN)
    try:
        fcntl.ioctl(0, TIOCNOTTY)
    except OSError:  # not our controlling terminal: nothing to hand over
        _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)
        return
    RELEASED.append(True)

def reclaim_terminal():
    import fcntl
    try:
        fcntl.ioctl(0, TIOCSCTTY, 0)
    except OSError:
        pass
    _signal.signal(_signal.SIGHUP, _signal.SIG_DFL)

def main():
    path = posix.environ.get(SOCKET_ENV.encode())
    if not path:
        fallback()
    conn = _socket.socket(_socket.AF_UNIX, _socket.SOCK_STREAM)
    try:
        conn.connect(path)
    except OSError:
        fallback()
    if posix.isatty(0):
        release_terminal()
    env = {decode(k): decode(v) for k, v in posix.environ.items()}
    job = {"argv": [FALLBACK[-1]] + sys.argv[1:], "cwd": posix.getcwd(), "env": env}
    body = marshal.dumps(job)
    fds = b"".join(fd.to_bytes(4, sys.byteorder, signed=True) for fd in (0, 1, 2))
    data = len(body).to_bytes(4, "big") + body
    conn.sendmsg([data], [(_socket.SOL_SOCKET, _socket.SCM_RIGHTS, fds)])
    replies = lines(conn)
    word, value = next(replies, ("", ""))
    if word != "pid":  # refused, or no answer: the real program
        fallback()
    pid = int(value)
    def relay(signum, frame):
        try:
            posix.killpg(pid, signum)
        except OSError:
            pass
    for sig in (_signal.SIGTERM, _signal.SIGINT, _signal.SIGHUP):
        _signal.signal(sig, relay)
    read, write = posix.pipe()
    posix.set_blocking(read, False)
    posix.set_blocking(write, False)
    _signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    WAKEUP.append(read)
    word, value = next(replies, ("", ""))
    posix._exit(int(value) if word == "exit" else 1)

main()
"""


def client_script(python: str, socket_env: str, fallback: list[str]) -> str:
    """A client executable: `fallback` is what to exec when no server takes the job (its last
    item is argv[0] for the job)."""
    return (
        f"#!{python} -IS\nSOCKET_ENV = {socket_env!r}\nFALLBACK = {fallback!r}\n"
        f"TIOCNOTTY = {termios.TIOCNOTTY}\nTIOCSCTTY = {termios.TIOCSCTTY}\n" + CLIENT
    )


def write_client(path: Path, python: str, socket_env: str, fallback: list[str]) -> Path:
    path.write_text(client_script(python, socket_env, fallback), encoding="utf-8")
    path.chmod(0o700)
    return path
