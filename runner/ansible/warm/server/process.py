"""The fork server's process, and its jobs as programs: the terminal a job takes, reaping, dying
with the operator, a trimmed heap, and the end (exit handlers, flushed streams, `os._exit`)."""

from __future__ import annotations

import atexit
import contextlib
import os
import signal
import sys


def take_terminal() -> None:
    """Make the client's terminal (a run's pty: the client let go of it) the job's controlling
    terminal, with the job in the foreground, as the plain path's ansible-playbook has it:
    Ansible's prompts and `ansible.builtin.pause` need that (tcgetpgrp, raw mode)."""
    if not os.isatty(0):
        return
    import fcntl
    import termios

    with contextlib.suppress(OSError):
        fcntl.ioctl(0, termios.TIOCSCTTY, 0)


def reap(signum: int, frame: object) -> None:
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def die_with_parent() -> None:
    """Linux: SIGTERM this server when the operator that started it dies, even by SIGKILL."""
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(1, signal.SIGTERM)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):  # not Linux: the operator's stop() is the only way
        return
    if os.getppid() == 1:  # the parent died before prctl took effect
        os._exit(0)


def trim_heap() -> None:
    """glibc: give the free pages of the heap (what preloading parsed and dropped) back to the
    system; otherwise every idle server would keep them resident (~0.8 MB)."""
    try:
        import ctypes

        ctypes.CDLL(None).malloc_trim(0)
    except (OSError, AttributeError):  # not glibc
        pass


def exit_on_term(signum: int, frame: object) -> None:
    """Run the exit handlers (Ansible's local temp folder of this process), then end without
    the interpreter's finalization, as a job does: the server's objects are immortal, so
    finalization would only walk ~1000 modules it never frees."""
    try:
        end_as_a_program()
    finally:
        os._exit(0)


def end_as_a_program() -> None:
    """What a program's end does before `os._exit` skips the rest: the exit handlers, then
    the standard streams flushed."""
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        with contextlib.suppress(Exception):
            stream.flush()
