"""One watch's `validate:` or `mutate:`: an AdmissionReview in, its answer out.

The flow of one review, beside reconcile's (and sharing nothing with its queue):

1. read the AdmissionReview (review.py);
2. build the run's extra vars: a reconcile's, of the request's object, plus `admission`
   (requestvars.py);
3. run the role or playbook on the request path (the executor's quick run: the warm fork
   server, no artifacts), with a kubeconfig of the read-only proxy: lookups work, writes are
   refused with a message; at most `slots` runs at once for all the admission webhooks;
4. the result becomes the answer (verdicts.py); a run without a result is answered per the
   webhook's failurePolicy, with the end of its output in the log;
5. the answer must be there before the API server gives up (`timeoutSeconds`, or the
   `?timeout=` the API server sends): at that time less a margin the run is cancelled and the
   request answered per failurePolicy: Fail denies ("... did not finish in N s"), Ignore allows
   with a warning.

An UPDATE that changes only metadata.finalizers (the operator adding or removing its own) is
allowed at once, without a run: under `make run` the operator shares the user's identity, so
the configurations cannot leave it out by username (configurations.py).

Each review is logged in one line: a denial, a late or broken run at info (warning), an allowed
one at debug.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.admit.requestvars import admission_extra_vars
from runner.admit.review import AdmissionRequest, Verdict, answer
from runner.admit.verdicts import verdict
from runner.ansible.interface import QuickRequest, QuickRuns
from runner.reconcile.extravars import render_extra_vars
from runner.util.logs import cr_fields
from runner.util.redact import SecretValues
from runner.watches import Admission, Watch

log = logging.getLogger("runner.admit")

TIMEOUT_KEY = "_timeout"  # the webhook server puts the API server's ?timeout= here (seconds)


def margin(timeout: float) -> float:
    """How long before the API server's timeout the answer goes out: a quarter of it, at most
    1 s (10 s -> 9 s, 1 s -> 0.75 s)."""
    return min(1.0, timeout / 4)


@dataclass(frozen=True)
class RunSettings:
    """How the admission runs run: the playbook, the read-only API access, the options."""

    playbook: Path
    envvars: Mapping[str, str]
    cmdline: tuple[str, ...] = ()
    verbosity: int = 0
    # the values of the Secrets the runs read through the read-only proxy: masked in answers
    # and log lines, as a reconcile's are (runner/util/redact.py)
    secrets: SecretValues | None = None


class Admitter:
    """Answers the AdmissionReviews of one watch's `validate` or `mutate` (`hook`)."""

    def __init__(
        self,
        watch: Watch,
        hook_kind: str,
        runs: QuickRuns,
        settings: RunSettings,
        slots: asyncio.Semaphore,
        clock: Any = time.monotonic,
    ) -> None:
        hook = watch.validate if hook_kind == "validate" else watch.mutate
        assert hook is not None, f"{watch.gvk.kind} has no {hook_kind}"
        self.watch = watch
        self.hook: Admission = hook
        self.kind = hook_kind
        self.runs = runs
        self.settings = settings
        self.slots = slots
        self._clock = clock

    async def prepare(self) -> bool:
        """Get a run ready before the first review comes (a job started ahead), returned once
        it can answer at once (False: it could not be made ready)."""
        return await self.runs.prepare_quick(self._run(""))

    def _run(self, extravars_text: str) -> QuickRequest:
        return QuickRequest(
            playbook=self.settings.playbook,
            extravars_text=extravars_text,
            envvars=self.settings.envvars,
            cmdline=self.settings.cmdline,
            verbosity=self.settings.verbosity,
        )

    async def review(self, body: dict[str, Any]) -> dict[str, Any]:
        """The answer to the AdmissionReview `body` (a webhook server's handler)."""
        request = AdmissionRequest.read(body)
        if request.only_finalizers():  # bookkeeping: never waits for a role
            return answer(request, Verdict(True))
        timeout = float(body.get(TIMEOUT_KEY) or self.hook.timeout_seconds)
        started = self._clock()
        try:
            decided = await asyncio.wait_for(self._decide(request), timeout - margin(timeout))
        except TimeoutError:
            decided = self._late(request, timeout)
        decided = self._masked(decided)
        self._log(request, decided, self._clock() - started)
        return answer(request, decided)

    async def _decide(self, request: AdmissionRequest) -> Verdict:
        extra_vars = admission_extra_vars(request, self.watch, self.hook)
        run = self._run(render_extra_vars(extra_vars, mark_unsafe=self.watch.mark_unsafe))
        async with self.slots:
            result = await self.runs.run_quick(run)
        decided = verdict(result, request, mutate=self.kind == "mutate")
        if decided is not None:
            return decided
        detail = self._mask(result.stdout_tail or f"exit code {result.rc}")
        log.warning(
            "%s of %s: the run ended without a result: %s",
            self.kind,
            request.describe(),
            detail,
            extra=self._fields(request),
        )
        return self._by_policy(request, "ended without a result (see the operator's log)")

    def _mask(self, text: str) -> str:
        return self.settings.secrets.redact(text) if self.settings.secrets is not None else text

    def _masked(self, decided: Verdict) -> Verdict:
        """The verdict with the Secrets' values the runs read masked in what kubectl shows."""
        if self.settings.secrets is None or not (decided.message or decided.warnings):
            return decided
        return replace(
            decided,
            message=self._mask(decided.message),
            warnings=tuple(self._mask(w) for w in decided.warnings),
        )

    def _late(self, request: AdmissionRequest, timeout: float) -> Verdict:
        return self._by_policy(request, f"did not finish in {timeout:g} s")

    def _by_policy(self, request: AdmissionRequest, what: str) -> Verdict:
        """No answer from the role: as the webhook's failurePolicy says."""
        action = "validation" if self.kind == "validate" else "mutation"
        text = f"{action} of {request.describe()} {what}"
        if self.hook.failure_policy == "Ignore":
            return Verdict(True, warnings=(f"{text}; allowed (failurePolicy Ignore)",))
        return Verdict(False, f"{text} (failurePolicy Fail)", code=500)

    def _fields(self, request: AdmissionRequest) -> dict[str, Any]:
        meta = request.subject.get("metadata") or {}
        name = request.name or str(meta.get("name") or "")
        return {
            **cr_fields(self.watch.gvk.kind, request.namespace or None, name),
            "operation": request.operation,
            "dry_run": request.dry_run,
        }

    def _log(self, request: AdmissionRequest, decided: Verdict, seconds: float) -> None:
        outcome = "allowed" if decided.allowed else f"denied: {decided.message}"
        if decided.allowed and decided.patch:
            outcome = f"allowed with a patch of {len(decided.patch)} operation(s)"
        if decided.warnings:
            outcome += f" (warnings: {'; '.join(decided.warnings)})"
        level = logging.DEBUG if decided.allowed and not decided.warnings else logging.INFO
        log.log(
            level,
            "%s %s %s%s in %.3f s: %s",
            self.kind,
            request.operation,
            request.describe(),
            " (dry run)" if request.dry_run else "",
            seconds,
            outcome,
            extra={**self._fields(request), "seconds": round(seconds, 3)},
        )
