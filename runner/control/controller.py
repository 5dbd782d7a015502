"""One controller per watch: its work queue, its workers, its reconciler.

Workers take keys from the queue (one run per object at a time, events during a run collapse
into one follow-up run), reconcile, then requeue: after `requeue_after`, after a backoff that
grows with each consecutive failure (capped), or after the reconcile period. A failing or slow
CR holds one worker at most; the others keep going.

Fairness: watch events, dependents' changes and `requeue_after` go to the queue's event lane;
periodic resyncs, the initial listing and retries go to its background lane, which is served
after it and may hold at most all workers but one (queue.py). Resyncs are spread: each falls due
after the period less up to `RESYNC_JITTER` of it (controller-runtime's SyncPeriod jitters the
same way), so CRs converged together do not all fall due together again.
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from runner.control.backoff import Backoff
from runner.control.metrics import NULL_METRICS, Metrics, Requeue, Result
from runner.control.queue import Lane, WorkQueue
from runner.control.shards import Shards
from runner.control.triggers import Seen, fingerprint, should_reconcile
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.interface import Outcome, Reconciles
from runner.util.logs import cr_fields
from runner.util.timestamps import parse_time
from runner.watches.labelselectors import matches

log = logging.getLogger("runner.controller")

RESYNC_JITTER = 0.1  # a resync falls due after the period less up to 10 % of it


def creation_seconds(meta: Mapping[str, Any]) -> float | None:
    """A CR's creationTimestamp in whole seconds since the epoch (as Go's Time.Unix)."""
    created = parse_time(meta.get("creationTimestamp"))
    return float(int(created.timestamp())) if created is not None else None


def background_limit(workers: int) -> int:
    """How many workers resyncs and retries may hold at once: all but one, so an event never
    waits for a resync to end (with one worker, that one)."""
    return max(1, workers - 1)


class Controller:
    def __init__(
        self,
        reconciler: Reconciles,
        workers: int,
        backoff: Backoff | None = None,
        metrics: Metrics = NULL_METRICS,
        rng: random.Random | None = None,
        shards: Shards | None = None,
    ):
        self.reconciler = reconciler
        self.metrics = metrics
        self.watch = reconciler.watch
        self.workers = workers
        self.queue: WorkQueue[ObjectRef] = WorkQueue(
            on_wait=self._observe_wait, background_limit=background_limit(workers)
        )
        self.backoff = backoff or Backoff()
        self._random = rng or random.Random()
        self.shards = shards  # with --sharding: run only the CRs this replica holds
        self._seen: dict[ObjectRef, Seen] = {}
        self._unselected: set[ObjectRef] = set()  # out of the selector while a run went on
        self._tasks: list[asyncio.Task[None]] = []
        self.busy = 0
        self._started: dict[ObjectRef, float] = {}  # the runs in progress, since when
        self.resource: Resource | None = None  # learnt from the first watch event
        self._sweeper: asyncio.Task[None] | None = None

    # -- input: watch events ----------------------------------------------------------------

    def on_event(self, ref: ObjectRef, event_type: str | None, body: Mapping[str, Any]) -> None:
        """A watch event of a primary CR: enqueue it when it calls for a reconcile."""
        self.resource = ref.resource
        meta = body.get("metadata") or {}
        gvk = self.watch.gvk
        if not matches(self.watch.selector, meta.get("labels")):
            # not selected, or no longer (the API server, which applies the selector, sends
            # DELETED for a CR that stops matching): not ours; a run of it queued is dropped
            # and one going on is not requeued (_requeue)
            if self._seen.pop(ref, None) is not None:
                self.queue.forget(ref)
                if self.queue.in_progress(ref):
                    self._unselected.add(ref)
                if self.shards is not None:
                    self.shards.observe(self, ref, "DELETED", body)
                self.metrics.observe_resource(gvk.kind, gvk.group, gvk.version, ref, None)
            return
        self._unselected.discard(ref)
        if event_type == "DELETED":
            self.metrics.observe_resource(gvk.kind, gvk.group, gvk.version, ref, None)
        elif (created := creation_seconds(meta)) is not None:
            self.metrics.observe_resource(gvk.kind, gvk.group, gvk.version, ref, created)
        if self.shards is not None:
            held = self.shards.may_run(ref)
            self.shards.observe(self, ref, event_type, body)
            if event_type == "DELETED" and held:  # ours to clean up after
                self.queue.add(ref)
                self._seen.pop(ref, None)
                return
        current = fingerprint(body, self.watch.watch_annotations_changes)
        previous = self._seen.get(ref)
        if event_type == "DELETED":
            self._seen.pop(ref, None)
        else:
            self._seen[ref] = current
        if should_reconcile(event_type, previous, current):
            # kopf's listing (event None) of a CR as it was: housekeeping, not news
            listed = event_type is None and previous in (None, current)
            self.enqueue(ref, lane=Lane.BACKGROUND if listed else Lane.EVENT)

    def enqueue(self, ref: ObjectRef, delay: float = 0.0, lane: Lane = Lane.EVENT) -> None:
        """Reconcile `ref` (a dependent changed, a resync is due, ...): with sharding, only
        while this replica holds it."""
        if self.shards is None or self.shards.may_run(ref):
            self.queue.add(ref, delay, lane)
            self.metrics.observe_add(self.watch.gvk.kind, self.watch.gvk.group)

    def enqueue_all(self) -> int:
        """Reconcile every CR of this watch that is known (its role changed); how many."""
        for ref in list(self._seen):
            self.enqueue(ref)
        return len(self._seen)

    def running(self, ref: ObjectRef) -> bool:
        return self.queue.in_progress(ref)

    def forget(self, ref: ObjectRef) -> None:
        """Drop `ref` from the queue (handed over to another replica)."""
        self.queue.forget(ref)

    def enqueue_named(self, namespace: str, name: str) -> bool:
        """Reconcile the CR `namespace/name` of this watch (one of its dependents changed, or
        an object its run read); False when no such CR is known (never seen, deleted, out of
        the selector) or, with sharding, another replica holds it."""
        if self.resource is None:
            return False  # no CR of this kind seen yet: nothing can depend on one
        ref = ObjectRef(self.resource, namespace if self.resource.namespaced else None, name)
        if ref not in self._seen:
            return False
        self.enqueue(ref)
        return self.shards is None or self.shards.may_run(ref)

    # -- workers ----------------------------------------------------------------------------

    def start(self) -> None:
        for i in range(self.workers):
            name = f"worker-{self.watch.gvk.kind}-{i}"
            self._tasks.append(asyncio.create_task(self._work(), name=name))
        self._sweeper = asyncio.create_task(self._sweep(), name="artifacts-sweep")

    async def _sweep(self, first: float = 60.0, every: float = 600.0) -> None:
        """Have the reconciler forget the CRs that are gone without us seeing them go (deleted
        while the operator was down): the CRs alive are those the watch has listed."""
        await asyncio.sleep(first)  # a schedule, not a condition: the watch has listed by now
        while True:
            namespaced = self.resource.namespaced if self.resource is not None else None
            self.reconciler.forget_gone(set(self._seen), namespaced)
            await asyncio.sleep(every)

    def stop_taking(self) -> None:
        """No worker takes another key (each ends once its run in progress did)."""
        self.queue.close()
        if self._sweeper is not None:
            self._sweeper.cancel()

    async def stop(self, timeout: float) -> bool:
        """Stop taking keys; wait up to `timeout` s for runs in progress. True if all ended."""
        self.stop_taking()
        if not self._tasks:
            return True
        _done, pending = await asyncio.wait(self._tasks, timeout=timeout)
        for task in pending:
            task.cancel()
        await asyncio.gather(*pending, return_exceptions=True)
        return not pending

    async def _work(self) -> None:
        while (ref := await self.queue.get()) is not None:
            if self.shards is not None and not self.shards.may_run(ref):
                self.queue.done(ref)  # moved to another replica since it was queued
                self.shards.settle(ref)
                continue
            self.busy += 1
            started = self._started[ref] = time.monotonic()
            try:
                outcome = await self._reconcile(ref)
            finally:
                self.busy -= 1
                self._started.pop(ref, None)
                self.queue.done(ref)
            self._observe(outcome, time.monotonic() - started)
            self._requeue(ref, outcome)
            if self.shards is not None:
                self.shards.settle(ref)  # hand it over if it moved during the run

    async def _reconcile(self, ref: ObjectRef) -> Outcome:
        try:
            return await self.reconciler.reconcile(ref)
        except asyncio.CancelledError:
            raise
        except Exception as err:  # API trouble, a bug: log, back off, carry on with the rest
            log.error(
                "reconcile error: %s",
                err,
                exc_info=not _is_api_error(err),
                extra=cr_fields(ref.resource.kind, ref.namespace, ref.name),
            )
            panic = not _is_api_error(err)
            return Outcome(failed=True, detail=str(err), errored=True, panic=panic)

    def running_seconds(self) -> tuple[float, ...]:
        """How long each reconcile in progress has run so far."""
        now = time.monotonic()
        return tuple(now - started for started in self._started.values())

    def _observe(self, outcome: Outcome, seconds: float) -> None:
        gvk = self.watch.gvk
        result: Result = "success"
        if outcome.errored:
            result = "error"
        elif outcome.failed:
            result = "failure"
        requeue: Requeue = ""
        if not outcome.failed and outcome.requeue_after is not None:
            requeue = "requeue_after" if outcome.requeue_after > 0 else "requeue"
        self.metrics.observe_reconcile(
            gvk.kind,
            gvk.group,
            gvk.version,
            result,
            seconds,
            outcome.failed_tasks,
            requeue=requeue,
            panic=outcome.panic,
        )
        if outcome.tasks:
            self.metrics.observe_tasks(gvk.kind, gvk.group, outcome.tasks)

    def _observe_wait(self, seconds: float) -> None:
        gvk = self.watch.gvk
        self.metrics.observe_queue_wait(gvk.kind, gvk.group, seconds)

    def _requeue(self, ref: ObjectRef, outcome: Outcome) -> None:
        unselected = ref in self._unselected
        self._unselected.discard(ref)
        if outcome.forget or unselected:  # gone, or out of the selector during the run
            self.backoff.reset(ref)
            self._seen.pop(ref, None)
            return
        if outcome.failed:
            delay = self.backoff.next_delay(ref)
            log.info(
                "retrying in %.1f s (failure %d in a row)",
                delay,
                self.backoff.failures(ref),
                extra=cr_fields(ref.resource.kind, ref.namespace, ref.name),
            )
            self.enqueue(ref, delay, Lane.BACKGROUND)
            self.metrics.observe_retry(self.watch.gvk.kind, self.watch.gvk.group)
            return
        self.backoff.reset(ref)
        if outcome.requeue_after is None:
            return
        if outcome.periodic:
            spread = 1 - RESYNC_JITTER * self._random.random()
            self.enqueue(ref, outcome.requeue_after * spread, Lane.BACKGROUND)
        else:
            self.enqueue(ref, outcome.requeue_after)


def _is_api_error(err: Exception) -> bool:
    from runner.kube.client import ApiError

    return isinstance(err, (ApiError, OSError))


async def drain(
    controllers: Iterable[Controller],
    timeout: float,
    cancel_runs: Callable[[], None],
    logger: logging.Logger = log,
) -> bool:
    """Stop the controllers, waiting up to `timeout` s for their runs in progress; cancel the
    runs still going after that (and say so on `logger`). True when all ended in time."""
    results = await asyncio.gather(*(c.stop(timeout) for c in controllers))
    if all(results):
        return True
    cancel_runs()
    logger.warning("runs still going after %g s were cancelled", timeout)
    return False
