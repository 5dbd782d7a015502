"""The warm executor's life in one operator: chosen at start-up, started with the first run (an
idle operator does not pay for it) or ahead of it (`start_ahead`: an operator whose webhooks
wait for it), proved by the canary at its first start, stopped after `idle_timeout` without
runs and started again with the next one, and given up for good, with one warning, on any
failure: a line its core is not verified on, a patch that failed to install or check, a canary
that did not give its result, a patch that failed inside a run.

Runs take it through `attempt()` (attempt.py: the hold, the failure record, the redo and the
deferred warnings); a job started ahead holds it with `hold()`. The server starts in a thread
of its own, outside the lock, so that `close` never waits for a start: it stops a server that
is starting as well as one that serves, each within `pool.STOP_TIMEOUT`.

Operator side: imports neither ansible nor the server's code (the registry is plain data).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import CancelledError, Future, ThreadPoolExecutor
from importlib import metadata

from runner.ansible.warm.attempt import Hold, WarmAttempt
from runner.ansible.warm.patches import registry
from runner.ansible.warm.pool import Started, WarmPool

log = logging.getLogger("runner.executor")


def ansible_core_version() -> str:
    """The installed ansible-core's version, without importing it ("" when unknown)."""
    try:
        return metadata.version("ansible-core")
    except metadata.PackageNotFoundError:
        return ""


class WarmLifecycle:
    def __init__(
        self,
        env: Mapping[str, str],
        enabled: bool,
        idle_timeout: float,
        canary: Callable[[WarmPool], str | None],
    ) -> None:
        self._env = env
        self._canary = canary
        self._idle_timeout = idle_timeout
        self.version = ansible_core_version()
        line = registry.line_of(self.version) if self.version else "?"
        self.why_plain: str | None = None if enabled else "--executor=plain"
        if enabled and not registry.verified(line):
            self.why_plain = (
                f"ansible-core {self.version or '(unknown)'} is not among the lines the warm "
                f"executor is verified on ({registry.CORE_LINES[0]} to {registry.CORE_LINES[-1]})"
            )
            log.warning("warm executor not used: %s; runs take the plain path", self.why_plain)
        self._proved = False
        self._closed = False
        self._pool: WarmPool | None = None
        self._starting: Future[WarmPool | None] | None = None
        self._booting: WarmPool | None = None  # the server being started (close stops it)
        self._lock = threading.Lock()
        self._active = 0  # holds on the pool
        self._idle_timer: threading.Timer | None = None
        # The server is started from a thread made now, at the operator's priority: the runs'
        # threads are niced (executor.py), and a process inherits its starting thread's nice
        # value, which the admission jobs forked from the server would share.
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="warm-start")
        self._starter.submit(int).result()

    @property
    def enabled(self) -> bool:
        return self.why_plain is None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def attempt(self) -> WarmAttempt:
        """A run's attempt (attempt.py), on the server when it is up (started if need be)."""
        return WarmAttempt(self.hold(), self.give_up)

    def hold(self) -> Hold:
        """A hold on the fork server, started with the first hold and again after it stopped
        for being idle; its pool is None on the plain path."""
        with self._lock:
            self._active += 1
            self._cancel_idle_timer()
            starting = self._start_locked()
            pool = self._pool
        if starting is not None:
            try:
                pool = starting.result()
            except CancelledError:  # the operator stops
                pool = None
        return Hold(pool, self._release)

    def start_ahead(self) -> Future[WarmPool | None] | None:
        """Start the server now, without holding it (an operator whose webhooks must answer at
        once); its future (None on the plain path, or when it is up already)."""
        with self._lock:
            starting = self._start_locked()
            if starting is None and self._pool is not None and self._active == 0:
                self._arm_idle_timer()
            return starting

    def _start_locked(self) -> Future[WarmPool | None] | None:
        if self.why_plain is not None or self._pool is not None or self._closed:
            return None
        if self._starting is None:
            self._starting = self._starter.submit(self._start)
        return self._starting

    def _start(self) -> WarmPool | None:
        """In the starter thread: the server started, its report read, the canary run at the
        first start; the pool, or None (given up)."""
        begun = time.monotonic()
        pool: WarmPool | None = None
        try:
            pool = WarmPool(self._env)
            with self._lock:
                self._booting = pool
                closed = self._closed
            started = Started(failure="the operator stops") if closed else pool.wait_ready()
            failure = started.failure
            ready = time.monotonic()
            if failure is None and not self._proved:
                try:
                    failure = self._canary(pool)
                except Exception as err:  # its machinery: the plain path all the same
                    failure = f"the canary run could not be made: {err}"
        except Exception as err:  # the server could not even be started
            started, failure, ready = Started(), f"its server could not start: {err}", 0.0
        with self._lock:
            self._starting = None
            self._booting = None
            closed = self._closed
            accepted = failure is None and not closed and pool is not None
            if accepted:
                self._pool = pool
                if self._active == 0:
                    self._arm_idle_timer()
        if not accepted or pool is None:
            if pool is not None:
                pool.stop()
            if not closed and failure is not None:
                self.give_up(failure, started.ansible)
            return None
        if not self._proved:
            self._proved = True
            log.info(
                "executor: warm (fork server), ansible-core %s, %d patches%s; up in %.1f s, "
                "its canary run %.1f s",
                started.ansible,
                len(started.installed),
                _skipped(started),
                ready - begun,
                time.monotonic() - ready,
            )
            log.debug("warm executor's patches: %s", ", ".join(started.installed))
        return pool

    def _release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active or self._pool is None:
                return
            if self.why_plain is not None:  # given up while runs held it: now it can go
                pool, self._pool = self._pool, None
            else:
                self._arm_idle_timer()
                return
        pool.stop()

    def give_up(self, reason: str, version: str = "") -> None:
        """The plain path for good (one warning, however many runs report it)."""
        with self._lock:
            if self.why_plain is not None:
                return
            self.why_plain = reason
        log.warning(
            "warm executor given up: %s (ansible-core %s); runs take the plain path from now on",
            reason,
            version or self.version,
        )

    def _arm_idle_timer(self) -> None:
        self._cancel_idle_timer()
        if self._idle_timeout > 0:
            timer = threading.Timer(self._idle_timeout, self._stop_if_idle)
            timer.daemon = True
            timer.start()
            self._idle_timer = timer

    def _cancel_idle_timer(self) -> None:
        if self._idle_timer is not None:
            self._idle_timer.cancel()
            self._idle_timer = None

    def _stop_if_idle(self) -> None:
        """The warm executor holds ~65 MB; an operator with nothing to do gives it back."""
        with self._lock:
            if self._active or self._pool is None:
                return
            pool, self._pool = self._pool, None
            self._idle_timer = None
        log.info(
            "warm executors stopped after %g s without runs (they start again with the next run)",
            self._idle_timeout,
        )
        pool.stop()

    def close(self) -> None:
        """Stop the server, and one that is starting, each within `pool.STOP_TIMEOUT`; no server
        starts from now on."""
        with self._lock:
            self._closed = True
            self._cancel_idle_timer()
            pool, self._pool = self._pool, None
            booting = self._booting
        for each in (pool, booting):
            if each is not None:
                each.stop()
        self._starter.shutdown(wait=False, cancel_futures=True)


def _skipped(started: Started) -> str:
    """The patches not installed on this line, for the info line."""
    if not started.skipped:
        return ""
    return f" (not on this line: {', '.join(started.skipped)})"
