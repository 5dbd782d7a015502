"""A patch that fails inside a job: recorded for the executor, and the call taken by Ansible's
own code from then on.

Each patch's per-call code runs inside `try`; when its own code raises (a private name renamed
by an ansible-core release, a shape it did not expect), it calls `failed(name, err)` and does
what Ansible would have done without it. `failed` appends one line (JSON: the patch, the error,
the pid) to the file the run's environment names ($OPERATOR_RUNNER_WARM_FAILURES, one per run);
the executor reads it when the run ends, warns once, takes the plain path for good and runs
that CR again on it. A patch that failed in a process is bypassed in it from then on.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from typing import TypeVar

from runner.ansible.warm.jobenv import FAILURES_ENV

T = TypeVar("T")
_BROKEN: set[str] = set()


def failed(patch: str, err: BaseException, handed_back: bool = False) -> None:
    """Record that `patch`'s own code raised `err` in this process (once per patch).
    `handed_back`: the job went to the real program instead, so the run need not be redone."""
    if patch in _BROKEN:
        return
    _BROKEN.add(patch)
    path = os.environ.get(FAILURES_ENV)
    if not path:
        return
    record = {
        "patch": patch,
        "error": f"{type(err).__name__}: {err}"[:500],
        "pid": os.getpid(),
        "redo": not handed_back,
    }
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o600)
        with os.fdopen(fd, "a", encoding="utf-8") as file:
            file.write(json.dumps(record) + "\n")
    except OSError:
        pass  # the warm dir is gone (the operator stopped): nothing to tell


def broken(patch: str) -> bool:
    """Whether `patch` failed in this process already (its calls go to Ansible's own code)."""
    return patch in _BROKEN


def step(patch: str, action: Callable[[], T], fallback: T) -> T:
    """Run a job's step of `patch`; on an error, record it and return `fallback`."""
    if patch in _BROKEN:
        return fallback
    try:
        return action()
    except Exception as err:
        failed(patch, err)
        return fallback


def required(patch: str, action: Callable[[], T]) -> T:
    """Run a step the job cannot go on without; on an error, record it and raise it."""
    try:
        return action()
    except Exception as err:
        failed(patch, err)
        raise
