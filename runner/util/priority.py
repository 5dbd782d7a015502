"""Reconcile runs below the request path: their nice value, on Linux.

A reconcile is background work; an admission's run has a user's request waiting on it (and a
deadline). The threads reconcile runs wait in are niced, and a process takes its starting
thread's nice value (per thread on Linux; elsewhere it would be the whole operator's, so nothing
is changed there). Where the kernel groups tasks by session (autogroup: a process in the root
CPU cgroup, as on a bare host or in a container without a CPU controller; not in a Pod), nice
values count only inside a group, and every run has a session of its own (ansible-runner's pty,
the fork server's jobs): the run's session gets the same nice value. Best effort: an error
(no /proc, a kernel without autogroup, its rate limit) leaves the run as it is.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path

RUN_NICENESS = 10
_LINUX = sys.platform == "linux"


def nice_this_thread(increment: int = RUN_NICENESS) -> None:
    """This thread, and the processes it starts from now on, `increment` nicer."""
    if _LINUX:
        with contextlib.suppress(OSError):
            os.setpriority(os.PRIO_PROCESS, 0, os.getpriority(os.PRIO_PROCESS, 0) + increment)


def nice_session(pid: int, nice: int) -> None:
    """The session (autogroup) `pid` leads at `nice`, when that is above 0 and the session is
    not this process's own (the operator's, the fork server's) but `pid`'s."""
    if not _LINUX or nice <= 0:
        return
    with contextlib.suppress(OSError, IndexError):
        group = Path(f"/proc/{pid}/autogroup")
        if pid != os.getpid() and _name(group) == _name(Path("/proc/self/autogroup")):
            return
        group.write_text(str(min(nice, 19)))


def _name(group: Path) -> str:
    return group.read_text().split()[0]  # "/autogroup-42 nice 0"
