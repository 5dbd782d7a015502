"""The reconciler as the controllers see it: a key in, an `Outcome` out."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Outcome:
    """What the worker does next with the key."""

    requeue_after: float | None = None
    periodic: bool = False  # requeue_after is the reconcile period (a resync), not asked for
    failed: bool = False
    forget: bool = False
    detail: str = ""
    # for metrics: failed Ansible tasks; errored = could not complete (no result, bad annotation)
    failed_tasks: int = 0
    errored: bool = False
    panic: bool = False  # the reconcile raised unexpectedly (a bug)
