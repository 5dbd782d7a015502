"""Conversion of a kind's objects between its CRD's versions: a ConversionReview in, its answer
out. The operator's `/convert` webhook hands each review to `Conversions.review`.

A `Converter` converts the objects of one watch's kind, as its `convert:` says:

* `fields` (a map of the fields named differently in each version): in the operator, no Ansible
  (fieldmap.py);
* `role` or `playbook`: one Ansible run per review, whatever the number of objects, as a quick
  run (the executor's run for the request path: no artifacts kept). The run gets `conversion:
  {uid, desired_api_version, desired_version, objects}` (the objects as the API server sent
  them, their strings marked unsafe as the watch's markUnsafe says), the watch's `vars` and the
  convert's `vars`, and answers with `operator_sdk.util.conversion` (`object:` one, `objects:`
  several), which writes them to the file the runner names in
  OPERATOR_RUNNER_CONVERSION_ANSWERS. A failed task fails the review with its message. Role
  runs gather no facts; their lookups reach the API through the admission roles' read-only
  proxy (writes are refused). A run that does not end in time (the API server waits 30 s) is stopped
  and fails the review.

The API server asks for conversions on every read and watch of a version other than the stored
one, and its watch cache of each served version converts every write (status too), whether
anyone reads that version or not (docs/webhooks.md).
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import shutil
import tempfile
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runner.ansible.interface import QuickRequest, QuickRuns, RunResult, role_playbook_text
from runner.convert.fieldmap import convert_fields
from runner.convert.requestvars import conversion_vars
from runner.convert.review import (
    ConversionFailed,
    ConversionRequest,
    answer,
    read_review,
    settle,
)
from runner.reconcile.extravars import render_extra_vars
from runner.util import tempdirs
from runner.util.redact import SecretValues
from runner.watches import Watch

log = logging.getLogger("runner.conversion")

ANSWERS_ENV: Final = "OPERATOR_RUNNER_CONVERSION_ANSWERS"
#: The API server gives a conversion webhook 30 s (not configurable); answer before it does.
CONVERSION_TIMEOUT: Final = 25.0
#: Seconds kept back from the API server's `?timeout=` for the answer to reach it.
MARGIN: Final = 1.0
TMP_PREFIX: Final = "operator-runner-conversion-"
#: Conversion runs at once, for all the kinds together: a burst of writes (the API server
#: converts each) queues for these, within each review's deadline, instead of starting a run
#: per write.
CONVERSION_RUNS: Final = 4


@dataclass(frozen=True)
class ConvertOptions:
    """Settings of a watch's conversion runs (from the operator's flags)."""

    verbosity: int = 0
    ansible_args: tuple[str, ...] = ()
    timeout: float = CONVERSION_TIMEOUT
    envvars: Mapping[str, str] = field(default_factory=dict)  # the runs' API access (read-only)
    # the values of the Secrets the runs read through that access: masked in failures
    secrets: SecretValues | None = None


def _source_name(watch: Watch) -> str:
    convert = watch.convert
    assert convert is not None
    if convert.playbook is not None:
        return f"convert playbook {convert.playbook.name}"
    if convert.role is not None:
        role = convert.role
        return f"convert role {Path(role).name if role.startswith('/') else role}"
    return "convert fields"


class Converter:
    """Converts the objects of one watch's kind (see the module)."""

    def __init__(
        self,
        watch: Watch,
        runs: QuickRuns | None = None,
        folder: Path | None = None,
        options: ConvertOptions | None = None,
        slots: asyncio.Semaphore | None = None,
    ) -> None:
        if watch.convert is None:
            raise ValueError(f"{watch.gvk} has no convert")
        if watch.convert.by_ansible and (runs is None or folder is None):
            raise ValueError("a convert role or playbook needs an executor and a folder")
        self.watch = watch
        self.spec = watch.convert  # the watch's convert:
        self.what = _source_name(watch)
        self._runs = runs
        self._folder = folder  # the role's playbook, the runs' answer files
        self._options = options or ConvertOptions()
        self._slots = slots or asyncio.Semaphore(CONVERSION_RUNS)

    def mask(self, text: str) -> str:
        """`text` with the values of the Secrets the runs read masked."""
        values = self._options.secrets
        return values.redact(text) if values is not None else text

    async def convert(
        self, request: ConversionRequest, timeout: float | None = None
    ) -> list[dict[str, Any]]:
        """The request's objects in its desired version; ConversionFailed with the reason.
        `timeout`: how long the API server waits (its `?timeout=`)."""
        if not self.spec.by_ansible:
            desired = request.desired_api_version
            converted = [convert_fields(o, desired, self.spec.fields) for o in request.objects]
            return settle(request, converted)
        limit = self._options.timeout
        if timeout is not None:
            limit = max(1.0, min(limit, timeout - MARGIN))
        return await self._run(request, limit)

    def _playbook(self, folder: Path) -> Path:
        if self.spec.playbook is not None:
            return self.spec.playbook
        assert self.spec.role is not None
        gvk = self.watch.gvk
        path = folder / f"convert-{gvk.kind}.{gvk.group or 'core'}.yml"
        text = role_playbook_text(self.spec.role, skip_facts=True)
        if not path.exists() or path.read_text(encoding="utf-8") != text:
            path.write_text(text, encoding="utf-8")
        return path

    async def _run(self, request: ConversionRequest, limit: float) -> list[dict[str, Any]]:
        assert self._runs is not None and self._folder is not None
        variables = conversion_vars(self.watch, request)
        fd, name = tempfile.mkstemp(prefix="answers-", suffix=".jsonl", dir=self._folder)
        os.close(fd)
        answers = Path(name)
        quick = QuickRequest(
            playbook=self._playbook(self._folder),
            extravars_text=render_extra_vars(variables, mark_unsafe=self.watch.mark_unsafe),
            envvars={**self._options.envvars, ANSWERS_ENV: str(answers)},
            cmdline=self._options.ansible_args,
            verbosity=self._options.verbosity,
        )
        try:
            try:
                result = await asyncio.wait_for(self._bounded(quick), limit)
            except TimeoutError:
                raise ConversionFailed(f"did not finish in {limit:g} s") from None
            _check(result)
            return settle(request, _read_answers(answers))
        finally:
            answers.unlink(missing_ok=True)

    async def _bounded(self, quick: QuickRequest) -> RunResult:
        assert self._runs is not None
        async with self._slots:
            return await self._runs.run_quick(quick)


def _check(result: RunResult) -> None:
    summary = result.summary
    if summary.failures:
        raise ConversionFailed("; ".join(summary.failures))
    if not summary.finished or result.status != "successful":
        raise ConversionFailed(
            f"the Ansible run ended without a result (status {result.status}, rc {result.rc}); "
            f"last output: {result.stdout_tail or '(none)'}"
        )


def _read_answers(path: Path) -> list[Any]:
    """What operator_sdk.util.conversion wrote: one JSON line per call, {"objects": [...]}."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except FileNotFoundError:
        return []
    objects: list[Any] = []
    for line in lines:
        if line.strip():
            try:
                objects.extend(json.loads(line)["objects"])
            except (ValueError, KeyError, TypeError):
                raise ConversionFailed(f"could not read its answers ({path})") from None
    return objects


class Conversions:
    """Every converter of the operator, by group and kind: the `/convert` webhook's handler."""

    def __init__(self, converters: Iterable[Converter], folder: Path | None = None) -> None:
        self._by_kind = {(c.watch.gvk.group, c.watch.gvk.kind): c for c in converters}
        self._folder = folder

    @classmethod
    def of(
        cls, watches: Iterable[Watch], runs: QuickRuns, options: ConvertOptions | None = None
    ) -> Conversions:
        """The converters of the watches that have `convert:`; a private folder (removed by
        `close`) for the runs' playbooks and answers when one converts with Ansible."""
        converting = [w for w in watches if w.convert is not None]
        folder = None
        if any(w.convert is not None and w.convert.by_ansible for w in converting):
            folder = tempdirs.private_dir(TMP_PREFIX)
        slots = asyncio.Semaphore(CONVERSION_RUNS)
        converters = [Converter(w, runs, folder, options, slots) for w in converting]
        return cls(converters, folder)

    def close(self) -> None:
        if self._folder is not None:
            shutil.rmtree(self._folder, ignore_errors=True)

    def __bool__(self) -> bool:
        return bool(self._by_kind)

    @property
    def kinds(self) -> list[tuple[str, str]]:
        """(group, kind) of every converted kind."""
        return list(self._by_kind)

    async def review(self, body: Any, timeout: float | None = None) -> dict[str, Any]:
        """The answer to a ConversionReview; ReviewError when `body` is none. `timeout`: how
        long the API server waits for it."""
        request = read_review(body)
        if not request.objects:
            return answer(request, [])
        converter = self._by_kind.get((request.group, request.kind))
        if converter is None:
            known = ", ".join(f"{k}.{g}" for g, k in self._by_kind) or "none"
            return answer(
                request,
                failure=f"this operator converts no {request.kind} of group {request.group} "
                f"(watches.yaml's convert:; it converts {known})",
            )
        started = time.monotonic()
        fields = {"kind": request.kind, "webhook": "conversion"}
        try:
            converted = await converter.convert(request, timeout)
        except ConversionFailed as err:
            reason = converter.mask(str(err))
            message = f"{converter.what} failed: {reason}"
            log.warning(
                "conversion of %d %s (%s) failed: %s",
                len(request.objects),
                request.kind,
                request.versions(),
                reason,
                extra=fields,
            )
            return answer(request, failure=message)
        log.debug(
            "converted %d %s (%s) in %.3f s",
            len(converted),
            request.kind,
            request.versions(),
            time.monotonic() - started,
            extra=fields,
        )
        return answer(request, converted)
