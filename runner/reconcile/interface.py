"""The reconciler as the controllers see it: a key in, an `Outcome` out.

As controller-runtime's `reconcile.Reconciler`: a controller hands its reconciler the key of a
CR and gets back what to do with the key next; it knows nothing of how a reconcile is done
(runner/reconcile/reconciler.py implements it).
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Protocol

from runner.ansible.results import TaskResult
from runner.kube.resources import ObjectRef
from runner.watches import Watch


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
    tasks: Sequence[TaskResult] = ()  # the run's task results (the per-task metrics)


class Reconciles(Protocol):
    """What a controller needs of its reconciler."""

    @property
    def watch(self) -> Watch:
        """The watch whose CRs it reconciles."""

    async def reconcile(self, ref: ObjectRef) -> Outcome:
        """One reconcile of `ref`, from the object as it is now."""

    def forget_gone(self, alive: Collection[ObjectRef], namespaced: bool | None) -> int:
        """Drop what is kept for the CRs of the watch that are not `alive` (deleted while the
        operator was down, say); how many. `namespaced` None: the scope is not known (no CR of
        the kind was seen)."""
