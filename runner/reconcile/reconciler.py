"""One reconcile of one CR: read it as it is now, run its role, report the outcome.

Level-triggered, as in controller-runtime: whatever event queued the key, a reconcile starts
from the object as the API server has it now. The flow, for a CR of a watch:

1. GET the object; gone -> forget it (artifacts removed), done.
2. Deleted (deletionTimestamp): run the finalizer if ours is on it, remove it on success.
3. Otherwise make sure our finalizer is on it (when the watch has one), mark `Running`,
   run the role, read the object again, and write `Successful` or `Failure` on it.
4. Tell the worker when to come back: requeue_after from the role, backoff after a failure,
   the reconcile period otherwise (none when it is 0).

With `Options.check` (`operator-runner reconcile --check`) the same flow runs the role in
Ansible's check mode and changes nothing itself: no finalizer, no status, no Event; the object
may be given (a CR from a file that is not in the cluster).
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Callable, Collection, Mapping
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from runner.ansible.artifacts import Artifacts
from runner.ansible.interface import LogEvents, RunRequest, RunResult, Runs, role_playbook_text
from runner.ansible.results import RunSummary, hide_no_log_errors
from runner.dependents.ownership import owner_of
from runner.kube import client as kube
from runner.kube.client import KubeClient
from runner.kube.resources import ObjectRef
from runner.reconcile import annotations as cr_annotations
from runner.reconcile import conditionlist, conditions, extravars
from runner.reconcile.ansible_result import AnsibleResult
from runner.reconcile.apiaccess import ReadFollowing, RunAccess
from runner.reconcile.crnames import cr_env, cr_log_fields
from runner.reconcile.interface import Outcome
from runner.reconcile.recorder import EventRecorder
from runner.util.redact import SecretValues
from runner.watches import Watch
from runner.watches.labelselectors import matches

log = logging.getLogger("runner.reconcile")


@dataclass(frozen=True)
class Options:
    """Settings of the reconciles of one watch, from flags, environment and watches.yaml."""

    reconcile_period: float | None  # seconds; None or 0 = no periodic resync
    verbosity: int = 0
    ansible_args: tuple[str, ...] = ()
    log_events: LogEvents = LogEvents.TASKS
    check: bool = False  # Ansible check mode; the reconciler writes nothing either
    echo: bool = False  # Ansible's own output to stdout (`operator-runner reconcile`)
    skip_facts: bool = False  # role runs gather no facts (ANSIBLE_GATHERING=explicit)
    debug_logs: bool = False  # each run's whole output to the log (ANSIBLE_DEBUG_LOGS)
    field_manager: str | None = None  # of the status writes (fieldmanager.py)


@dataclass
class _Run:
    obj: dict[str, Any]
    finalizing: bool
    given: bool = False  # the object came with the call (a file), in check mode
    result: RunResult | None = None
    # what the run must not show: masked in its log lines, its condition and its Events
    secrets: SecretValues = field(default_factory=SecretValues)


class Reconciler:
    """Reconciles the CRs of one watch."""

    def __init__(
        self,
        watch: Watch,
        options: Options,
        client: KubeClient,
        executor: Runs,
        artifacts: Artifacts,
        recorder: EventRecorder,
        proxy: RunAccess | None = None,
        reads: ReadFollowing | None = None,
    ) -> None:
        self.proxy = proxy
        self.reads = reads  # with watchReads: what each run read, followed
        self.watch = watch
        self.options = options
        self.client = client
        self.executor = executor
        self.artifacts = artifacts
        self.recorder = recorder
        self._playbooks: dict[bool, Path] = {}

    def forget_gone(self, alive: Collection[ObjectRef], namespaced: bool | None) -> int:
        """Remove the artifact folders of the watch's CRs that are not `alive`; how many."""
        gvk = self.watch.gvk
        removed = self.artifacts.sweep(gvk.group, gvk.version, gvk.kind, alive, namespaced)
        if removed:
            log.info("removed the artifacts of %d %s gone while unwatched", removed, gvk.kind)
        return removed

    # -- the flow ---------------------------------------------------------------------------

    async def reconcile(self, ref: ObjectRef, given: dict[str, Any] | None = None) -> Outcome:
        """One reconcile of `ref`, from the object as it is now (or as `given`)."""
        obj = given if given is not None else await self._get(ref)
        if obj is None:
            self._gone(ref)
            return Outcome(forget=True, detail="gone")
        meta = obj.get("metadata") or {}
        if given is None and not matches(self.watch.selector, meta.get("labels")):
            # let go: the API server's DELETED for a CR leaving the selector carries it as it was
            self._gone(ref)
            return Outcome(forget=True, detail="out of the watch's selector")
        annotations: dict[str, str] = meta.get("annotations") or {}
        finalizer = self.watch.finalizer.name if self.watch.finalizer else None
        finalizers: list[str] = list(meta.get("finalizers") or [])
        deleting = bool(meta.get("deletionTimestamp"))

        if deleting and (finalizer is None or finalizer not in finalizers):
            return Outcome(detail="being deleted, nothing of ours to finalize")
        try:
            period = cr_annotations.reconcile_period(annotations, self.options.reconcile_period)
            verbosity = cr_annotations.verbosity(annotations)
            keep = cr_annotations.max_artifacts(annotations, self.watch.max_runner_artifacts)
        except ValueError as err:
            await self._report_error(ref, obj, f"{err}; fix or remove the annotation")
            return Outcome(failed=True, detail=str(err), errored=True)

        if finalizer and not deleting and finalizer not in finalizers:
            obj = await self._add_finalizer(ref, obj, finalizer)
        if not deleting:
            obj = await self._write_status(ref, obj, conditions.running)

        run = _Run(obj=obj, finalizing=deleting, given=given is not None and self.options.check)
        run.result = await self._execute(ref, run, verbosity, keep)
        outcome = await self._finish(ref, run, period, finalizer, given)
        outcome.tasks = run.result.summary.task_results
        return outcome

    async def _finish(
        self,
        ref: ObjectRef,
        run: _Run,
        period: float | None,
        finalizer: str | None,
        given: dict[str, Any] | None = None,
    ) -> Outcome:
        assert run.result is not None
        result = run.result
        summary = result.summary
        now_obj = run.obj if given is not None and self.options.check else await self._get(ref)
        if now_obj is None:
            self._gone(ref)
            return Outcome(forget=True, detail="gone after the run")
        redact = run.secrets.redact
        # What the run reconciled: a spec changed while it ran is the next run's to report.
        ran = _generation(run.obj)
        if not summary.finished:
            message = redact(
                f"the Ansible run ended without a result (ansible-runner status {result.status}, "
                f"rc {result.rc}); last output: {result.stdout_tail or '(none)'}"
            )
            await self._report_error(ref, now_obj, message, ran)
            return Outcome(failed=True, detail=message, errored=True)
        if summary.failures or result.status != "successful":
            messages = [redact(m) for m in summary.failures]
            await self._report_failure(ref, now_obj, result, messages, run.finalizing, ran)
            return Outcome(
                failed=True,
                detail="; ".join(messages),
                failed_tasks=len(summary.failures),
            )

        meta = now_obj.get("metadata") or {}
        if run.finalizing and finalizer:
            await self._remove_finalizer(ref, now_obj, finalizer)
            await self._emit(now_obj, "Normal", "Finalized", f"finalizer {finalizer} ran")
            return Outcome(detail="finalized")
        was_failing = _is_failing(now_obj)
        await self._write_status(
            ref, now_obj, conditions.succeeded, ran, result=_ansible_result(summary)
        )
        if was_failing:
            await self._emit(now_obj, "Normal", "Reconciled", "reconciliation succeeded again")
        if self.options.check:
            return Outcome(detail="successful (check mode: nothing written)")
        if meta.get("deletionTimestamp") and finalizer in (meta.get("finalizers") or []):
            return Outcome(requeue_after=0.0, detail="deleted during the run: finalize now")
        if summary.requeue_after is not None:
            return Outcome(requeue_after=summary.requeue_after, detail="requeue_after")
        return Outcome(requeue_after=period or None, periodic=bool(period), detail="successful")

    # -- the run ----------------------------------------------------------------------------

    async def _execute(
        self, ref: ObjectRef, run: _Run, verbosity: int | None, keep: int
    ) -> RunResult:
        private = self.artifacts.private_dir(ref)
        playbook = self._playbook(private, run.finalizing)
        text = extravars.render_extra_vars(
            extravars.build_extra_vars(run.obj, self.watch, finalizing=run.finalizing),
            mark_unsafe=self.watch.mark_unsafe,
        )
        started = time.monotonic()
        ident = f"{time.time_ns()}"
        cmdline = self.options.ansible_args
        if self.options.check and "--check" not in cmdline and "-C" not in cmdline:
            cmdline = (*cmdline, "--check")
        with self._credentials(run.obj, run.secrets) as credentials:
            request = RunRequest(
                private_dir=private,
                ident=ident,
                playbook=playbook,
                extravars_text=text,
                verbosity=verbosity if verbosity is not None else self.options.verbosity,
                cmdline=cmdline,
                rotate=keep,
                envvars={**cr_env(ref, unsaved=run.given), **credentials},
                log_events=self.options.log_events,
                log_extra=cr_log_fields(ref),
                echo=self.options.echo,
                secrets=run.secrets,
            )
            result = await self.executor.run(request)
        if self.reads is not None:  # what it read is followed now (and what it did not, not)
            self.reads.settle(ref, succeeded=result.ok)
        # A run that changed nothing and succeeded (an idle resync) is logged at debug.
        quiet = result.ok and not _changed(result.summary)
        log.log(
            logging.DEBUG if quiet else logging.INFO,
            "ran %s in %.2f s: %s (artifacts: %s)",
            "finalizer" if run.finalizing else "reconcile",
            time.monotonic() - started,
            result.status,
            private / "artifacts" / ident,
            extra={**cr_log_fields(ref), "artifacts": str(private / "artifacts" / ident)},
        )
        if self.options.debug_logs:
            # read and masked off the event loop: a long output with many values takes a while
            stdout = private / "artifacts" / ident / "stdout"
            await asyncio.to_thread(self._log_output, ref, stdout, run.secrets)
        return result

    def _gone(self, ref: ObjectRef) -> None:
        self.artifacts.remove(ref)
        if self.reads is not None:
            self.reads.forget(ref)

    def _log_output(self, ref: ObjectRef, stdout: Path, secrets: SecretValues) -> None:
        """ANSIBLE_DEBUG_LOGS: the run's whole output to the log, as operator-sdk prints it,
        with the run's secrets masked and no_log tasks' error messages hidden."""
        try:
            text = stdout.read_text(encoding="utf-8", errors="replace").strip()
            text = secrets.redact(hide_no_log_errors(text))
        except OSError:
            return
        if text:
            r = ref.resource
            title = f"Ansible Debug Result ({r.group}/{r.version}, Kind={r.kind}, {ref.name}/"
            title += f"{ref.namespace or ''})"
            log.info("\n----- %s -----\n\n%s\n\n----------", title, text, extra=cr_log_fields(ref))

    def _credentials(
        self, obj: Mapping[str, Any], secrets: SecretValues
    ) -> AbstractContextManager[dict[str, str]]:
        """How the run reaches the API: through the proxy (owner injection, dependent
        watches, the Secrets it reads or writes collected into `secrets`), or, without one,
        with the operator's own environment."""
        if self.proxy is None:
            return nullcontext({})
        return self.proxy.run_env(owner_of(obj), secrets)

    def _playbook(self, private: Path, finalizing: bool) -> Path:
        """The playbook of a run: the watch's (or finalizer's), or one that runs its role."""
        fin = self.watch.finalizer
        role, playbook = self.watch.role, self.watch.playbook
        if finalizing and fin and (fin.role or fin.playbook):
            role, playbook = fin.role, fin.playbook
        if playbook is not None:
            return Path(playbook)
        assert role is not None
        path = private / "project" / ("finalizer.yml" if finalizing else "main.yml")
        text = role_playbook_text(role, skip_facts=self.options.skip_facts)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.parent.mkdir(exist_ok=True, mode=0o700)
            path.write_text(text, encoding="utf-8")
        return path

    # -- reporting --------------------------------------------------------------------------

    async def _report_failure(
        self,
        ref: ObjectRef,
        obj: dict[str, Any],
        result: RunResult,
        messages: list[str],
        finalizing: bool,
        generation: int,
    ) -> None:
        """The failed tasks' `messages` (masked already) in the log, the condition, an Event."""
        summary = result.summary
        messages = messages or [f"ansible-runner status {result.status}"]
        what = "finalizer" if finalizing else "reconciliation"
        log.warning("%s failed: %s", what, "; ".join(messages), extra=cr_log_fields(ref))
        await self._write_status(
            ref,
            obj,
            conditions.failed,
            generation,
            messages=messages,
            result=_ansible_result(summary),
        )
        reason = "FinalizerFailed" if finalizing else "ReconcileFailed"
        await self._emit(obj, "Warning", reason, "\n".join(messages))

    async def _report_error(
        self, ref: ObjectRef, obj: dict[str, Any], message: str, generation: int | None = None
    ) -> None:
        log.warning("reconciliation failed: %s", message, extra=cr_log_fields(ref))
        await self._write_status(ref, obj, conditions.errored, generation, message=message)
        await self._emit(obj, "Warning", "ReconcileFailed", message)

    async def _emit(self, obj: dict[str, Any], etype: str, reason: str, message: str) -> None:
        if not self.options.check:  # check mode writes nothing, Events included
            await self.recorder.emit(obj, etype, reason, message)

    # -- API calls --------------------------------------------------------------------------

    async def _get(self, ref: ObjectRef) -> dict[str, Any] | None:
        return await self.client.get_or_none(ref)

    async def _write_status(
        self,
        ref: ObjectRef,
        obj: dict[str, Any],
        transition: Callable[..., dict[str, Any]],
        generation: int | None = None,
        **details: Any,
    ) -> dict[str, Any]:
        """Apply a `conditions` transition (running, succeeded, ...) with its `details`, for
        `generation` (default: `obj`'s); patch them if changed (not unmanaged, not in check)."""
        if not self.watch.manage_status or self.options.check:
            return obj
        old = obj.get("status") if isinstance(obj.get("status"), dict) else {}
        if generation is None:
            generation = _generation(obj)
        new = transition(old, generation=generation, now=datetime.now(UTC), **details)
        if not conditionlist.status_changed(old, new):
            return obj
        status = {"conditions": new.get("conditions", [])}
        patched: dict[str, Any] | None = await self.client.send_or_none(
            kube.patch_status(ref, status, self.options.field_manager)
        )
        return obj if patched is None else patched

    async def _add_finalizer(
        self, ref: ObjectRef, obj: dict[str, Any], finalizer: str
    ) -> dict[str, Any]:
        if self.options.check:
            return obj
        meta = obj["metadata"]
        finalizers = [*(meta.get("finalizers") or []), finalizer]
        patched: dict[str, Any] = await self.client.send(
            kube.set_finalizers(ref, finalizers, meta["resourceVersion"])
        )
        return patched

    async def _remove_finalizer(self, ref: ObjectRef, obj: dict[str, Any], finalizer: str) -> None:
        if self.options.check:
            return
        meta = obj["metadata"]
        finalizers = [f for f in meta.get("finalizers") or [] if f != finalizer]
        await self.client.send_or_none(
            kube.set_finalizers(ref, finalizers, meta["resourceVersion"])
        )


def _generation(obj: Mapping[str, Any]) -> int:
    return int((obj.get("metadata") or {}).get("generation") or 0)


def _ansible_result(summary: RunSummary) -> AnsibleResult:
    return AnsibleResult.from_stats_event(summary.stats or {}, created=summary.stats_created)


def _changed(summary: RunSummary) -> int:
    return sum((summary.stats or {}).get("changed", {}).values())


def _is_failing(obj: Mapping[str, Any]) -> bool:
    status = obj.get("status")
    failure = conditionlist.find_condition(status if isinstance(status, dict) else None, "Failure")
    return bool(failure and failure.get("status") == "True")
