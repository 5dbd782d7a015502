"""ansible-runner's pexpect child closed as soon as it has exited: the one place the runner
changes pexpect's behaviour, fenced as the warm executor's patches are.

When a run's output reaches EOF, ansible-runner closes its pexpect child, and ptyprocess then
sleeps `delayafterclose` (0.1 s, "to give the kernel time") before it checks whether the child
is still alive (and signals it if so): 0.1 s of every run's latency. `PromptCloseSpawn` waits
for the child to exit instead (it has closed the pty, so it is exiting), at most 2 s, and skips
the sleep once it has; otherwise pexpect's own behaviour follows unchanged. It uses pexpect's
public API only (a `spawn` subclass; `ptyproc`, `isalive`, `delayafterclose`, `closed`); its
session (a pty's) takes the nice value of the run's thread (util/priority.py).

ansible-runner offers no way to give it another class: it calls `pexpect.spawn(...)` by that
name (`ansible_runner.runner.Runner.run`). So `install` replaces that name, process-wide (only
ansible-runner uses pexpect in the operator), and only where it is verified: pexpect,
ptyprocess and ansible-runner of the lines in `VERIFIED`, and an ansible-runner whose run
still calls `pexpect.spawn(`. Anything else leaves pexpect as it is (runs pay the 0.1 s: the
safe fallback), with one info line that names the version.
"""

from __future__ import annotations

import inspect
import logging
import os
import time
from importlib import metadata
from typing import Any

import pexpect

from runner.util import priority

log = logging.getLogger("runner.executor")

#: The releases (major.minor) the replacement is verified on, per distribution.
VERIFIED = {"pexpect": ("4.8", "4.9"), "ptyprocess": ("0.7",), "ansible-runner": ("2.4",)}
CLOSE_WAIT = 2.0  # seconds close() waits for the child to exit before pexpect's own close


class PromptCloseSpawn(pexpect.spawn):  # type: ignore[misc]
    """pexpect's spawn, minus the fixed sleep at close (module doc)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)  # returns once the child has exec'd, in its session
        priority.nice_session(self.pid, os.getpriority(os.PRIO_PROCESS, 0))

    def close(self, force: bool = True) -> None:
        ptyproc = getattr(self, "ptyproc", None)
        if ptyproc is not None and not self.closed:
            deadline = time.monotonic() + CLOSE_WAIT
            while ptyproc.isalive() and time.monotonic() < deadline:
                time.sleep(0.002)
            if not ptyproc.isalive():
                ptyproc.delayafterclose = 0
        super().close(force)


def _release(distribution: str) -> str:
    try:
        return metadata.version(distribution)
    except metadata.PackageNotFoundError:
        return "(not installed)"


def not_verified() -> str | None:
    """Why the replacement is not installed here (a version, or ansible-runner's call), or
    None when it is verified."""
    for distribution, lines in VERIFIED.items():
        version = _release(distribution)
        if ".".join(version.split(".")[:2]) not in lines:
            return f"{distribution} {version} (verified on {', '.join(lines)})"
    from ansible_runner import runner

    try:
        calls = "pexpect.spawn(" in inspect.getsource(runner.Runner.run)
    except (OSError, TypeError):
        calls = False
    if not calls:
        return f"ansible-runner {_release('ansible-runner')} does not call pexpect.spawn"
    return None


def install() -> str | None:
    """Replace `pexpect.spawn` with `PromptCloseSpawn` where verified (idempotent); otherwise
    leave pexpect alone and say why (returned too)."""
    if pexpect.spawn is PromptCloseSpawn:
        return None
    why = not_verified()
    if why is not None:
        log.info("runs close their pty as pexpect does (0.1 s each): not verified on %s", why)
        return why
    pexpect.spawn = PromptCloseSpawn
    return None
