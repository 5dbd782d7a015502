#!/usr/bin/env python3
"""Tiny launcher: run a command as a child subreaper and report the CPU of everything under it.

    python bench/launch.py --rusage-out FILE -- COMMAND ARGS...

The launcher marks itself a child subreaper (prctl PR_SET_CHILD_SUBREAPER), so processes that
the operator's children orphan (double forks) are re-parented to it and reaped here instead of by
init: their CPU time lands in this process's RUSAGE_CHILDREN. SIGTERM and SIGINT are forwarded to
the command. When the command exits, the remaining descendants get a few seconds to exit, then
FILE receives {"rc", "utime", "stime", "maxrss_kib"} of all reaped descendants (getrusage
RUSAGE_CHILDREN), and the launcher exits with the command's exit code. Standard library only, so
any Python runs it.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import resource
import signal
import subprocess
import sys
import time

PR_SET_CHILD_SUBREAPER = 36


def _children() -> list[int]:
    me, pids = os.getpid(), []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue
            if int(stat[stat.rindex(b")") + 2 :].split()[1]) == me:
                pids.append(int(entry))
    return pids


def main(argv: list[str]) -> int:
    if argv[:1] in (["-h"], ["--help"]):
        print(__doc__)
        return 0
    out = None
    if argv[:1] == ["--rusage-out"]:
        out, argv = argv[1], argv[2:]
    if argv[:1] == ["--"]:
        argv = argv[1:]
    if not argv:
        print("usage: launch.py [--rusage-out FILE] -- COMMAND ARGS...", file=sys.stderr)
        return 2
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        print(
            f"launch.py: prctl(PR_SET_CHILD_SUBREAPER) failed: errno {ctypes.get_errno()}",
            file=sys.stderr,
        )
    child = subprocess.Popen(argv)

    def forward(signum: int, _frame: object) -> None:
        with contextlib.suppress(ProcessLookupError):
            child.send_signal(signum)

    signal.signal(signal.SIGTERM, forward)
    signal.signal(signal.SIGINT, forward)
    rc = None
    while rc is None:
        try:
            pid, status = os.wait()
        except ChildProcessError:
            break
        except InterruptedError:
            continue
        if pid == child.pid:
            rc = os.waitstatus_to_exitcode(status)
            child.returncode = rc
    # orphans of the command (re-parented here) get a moment, then are reaped or killed
    deadline = time.monotonic() + 5
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            break
        if pid == 0:
            if time.monotonic() > deadline:
                for left in _children():
                    with contextlib.suppress(ProcessLookupError):
                        os.kill(left, signal.SIGKILL)
                deadline = float("inf")
            time.sleep(0.05)
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    if out:
        with open(out, "w", encoding="utf-8") as f:
            json.dump(
                {
                    "rc": rc,
                    "utime": usage.ru_utime,
                    "stime": usage.ru_stime,
                    "maxrss_kib": usage.ru_maxrss,
                },
                f,
            )
    return rc if rc is not None else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
