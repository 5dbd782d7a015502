"""The fork server's process, and its jobs as programs: the terminal a job takes, reaping, dying
with the operator, the signals that wake its loop, a trimmed heap, and the end (exit handlers,
flushed streams, `os._exit`)."""

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


_WAKEUP: list[int] = []  # the signal pipe's read and write ends (wake_on_signals)


def wake_on_signals() -> int:
    """The read end of a pipe that each signal this process handles writes a byte to
    (`signal.set_wakeup_fd`): the server waits on it beside its sockets.

    Python runs a signal's handler in the main thread between bytecodes; the C-level handler
    only marks it pending. A signal that arrives after the loop's last check and before
    `select()` blocks (the kernel delivers it the moment the process runs again, so a server
    preempted right there on a busy machine takes it there) interrupts nothing: `select()`
    then sleeps with the handler pending until another signal or a client comes. That was a
    server not stopping within 60 s of SIGTERM (issue 35): SIGTERM consumed, nothing pending,
    the loop asleep in `select`. With the pipe, `select()` returns at once and the handler
    runs."""
    read, write = os.pipe2(os.O_NONBLOCK | os.O_CLOEXEC)
    signal.set_wakeup_fd(write, warn_on_full_buffer=False)
    _WAKEUP[:] = [read, write]
    return read


def drain_wakeup(fd: int) -> None:
    """Empty the signal pipe (the signals' handlers are pending: they run next)."""
    with contextlib.suppress(BlockingIOError):
        while os.read(fd, 512):
            pass


def forget_wakeup() -> None:
    """In a job: the server's signal pipe is not the job's."""
    if _WAKEUP:
        signal.set_wakeup_fd(-1)
        for fd in _WAKEUP:
            with contextlib.suppress(OSError):
                os.close(fd)
        _WAKEUP.clear()


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
