"""One run's attempt on the warm executor, for reconcile runs (executor.py) and quick runs
(quickrun.py) alike: the one place that holds the pool, names the run's failure record, keeps
the run's warnings until the verdict, and decides whether the run is made again on the plain
path.

- **The hold** (`Hold`): the pool the run uses (None on the plain path), given back once,
  however many ways out a run has (`release` is idempotent), so that the lifecycle's count of
  runs in flight never drifts. A quick run's job started ahead holds the pool from its start
  until the run that takes it ends, or until it expires.
- **The failure record**: the file the run's jobs append to when a patch fails in them
  (`patches/guard.py`, `$OPERATOR_RUNNER_WARM_FAILURES`), read at the end as `PatchFailure`s.
- **The redo rule**, here alone: a run in which a patch failed, unless every job that saw it
  was handed back to the real program, is made again on the plain path (never a `Failure` for
  the warm executor's fault), but not when the run was cancelled.
- **The deferred warnings**: a warm run's failed tasks are not warnings yet; once the verdict
  is known they are said as warnings, or at debug level when the run is made again (its plain
  run then says what failed, if anything does), so the operator's one warning is the warm
  executor's own.

Operator side: no ansible import.
"""

from __future__ import annotations

import json
import logging
import threading
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runner.ansible.warm.jobenv import FAILURES_ENV

if TYPE_CHECKING:
    from runner.ansible.warm.pool import WarmPool

log = logging.getLogger("runner.executor")


@dataclass(frozen=True)
class PatchFailure:
    """A patch that failed inside one of a run's jobs (one line of its failure record)."""

    patch: str
    error: str
    #: the run must be made again: the job that saw it was not handed back to the real program
    redo: bool = True

    def __str__(self) -> str:
        return f"patch {self.patch} failed in a run: {self.error}"

    @classmethod
    def parse(cls, line: str) -> PatchFailure:
        """One record line (JSON, written by guard.py); anything else: an unknown patch."""
        try:
            body = json.loads(line)
        except ValueError:
            body = None
        if not isinstance(body, dict):
            return cls("?", line[:200])
        return cls(
            str(body.get("patch", "?")), str(body.get("error", "")), body.get("redo") is not False
        )


def describe(failures: Iterable[PatchFailure]) -> str:
    """One line for the patches a run's jobs recorded as failed."""
    return "; ".join(str(failure) for failure in failures)


def read_record(record: Path) -> tuple[PatchFailure, ...]:
    """What the jobs recorded in `record` (the file is removed); () when nothing failed."""
    try:
        text = record.read_text(encoding="utf-8")
    except OSError:
        return ()
    record.unlink(missing_ok=True)
    return tuple(PatchFailure.parse(line) for line in text.splitlines() if line.strip())


def new_record(folder: Path) -> Path:
    """A new file in `folder` for one run's jobs to record a patch that failed in them."""
    return folder / uuid.uuid4().hex


class Hold:
    """One hold on the warm executor: `pool` (None on the plain path), given back once."""

    def __init__(self, pool: WarmPool | None, release: Callable[[], None]) -> None:
        self.pool = pool
        self._release: Callable[[], None] | None = release
        self._lock = threading.Lock()

    def release(self) -> None:
        with self._lock:
            release, self._release = self._release, None
        if release is not None:
            release()

    @property
    def held(self) -> bool:
        return self._release is not None


class WarmAttempt:
    """A run on the warm executor, or on the plain path when the hold has no pool (module doc).
    `end` is called once the run's jobs are done; it gives the hold back."""

    def __init__(self, hold: Hold, give_up: Callable[[str], None]) -> None:
        self.hold = hold
        self._give_up = give_up
        self.record = new_record(hold.pool.failures) if hold.pool is not None else None
        self.failures: tuple[PatchFailure, ...] = ()
        self._kept: list[tuple[str, Mapping[str, Any]]] = []
        self._ended = False

    @property
    def pool(self) -> WarmPool | None:
        return self.hold.pool

    @property
    def warm(self) -> bool:
        return self.hold.pool is not None

    def env(self) -> dict[str, str]:
        """What a run's jobs need in their environment: the warm clients' sockets and caches,
        and where to record a patch that fails; {} on the plain path."""
        if self.hold.pool is None or self.record is None:
            return {}
        return {**self.hold.pool.env, FAILURES_ENV: str(self.record)}

    def keep(self, message: str, fields: Mapping[str, Any]) -> bool:
        """Keep a warning of the run until the verdict (True), or let it be said now (False:
        a plain run's, or one after the verdict)."""
        if not self.warm or self._ended:
            return False
        self._kept.append((message, dict(fields)))
        return True

    def end(self, cancelled: bool = False) -> bool:
        """The verdict, once: the failures read, the warm executor given up if any (before the
        hold goes, so that the last run's release stops its server), the hold given back, the
        kept warnings said; whether the run must be made again on the plain path."""
        if self._ended:
            return False
        self._ended = True
        if self.record is not None:
            self.failures = read_record(self.record)
        try:
            if self.failures:
                self._give_up(describe(self.failures))
        finally:
            self.hold.release()
        again = any(failure.redo for failure in self.failures) and not cancelled
        for message, fields in self._kept:
            if again:
                log.debug(
                    "%s (the warm attempt, made again on the plain path)", message, extra=fields
                )
            else:
                log.warning("%s", message, extra=fields)
        self._kept.clear()
        return again

    def abandon(self) -> None:
        """The run never happened (a job started ahead that expired or was stopped): the hold
        goes back, nothing is read or said."""
        self._ended = True
        self._kept.clear()
        self.hold.release()
        if self.record is not None:
            self.record.unlink(missing_ok=True)
