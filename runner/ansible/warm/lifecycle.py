"""The warm executor's life in one operator: chosen at start-up, started with the first run (an
idle operator does not pay for it), proved by the canary at its first start, stopped after
`idle_timeout` without runs and started again with the next one, and given up for good, with
one warning, on any failure: a line its core is not verified on, a patch that failed to install
or check, a canary that did not give its result, a patch that failed inside a run.

Operator side: imports neither ansible nor the server's code (the registry is plain data).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata

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
        self._pool: WarmPool | None = None
        self._lock = threading.Lock()
        self._active = 0  # runs holding the pool
        self._idle_timer: threading.Timer | None = None
        # The server is started from a thread made now, at the operator's priority: the runs'
        # threads are niced (executor.py), and a process inherits its starting thread's nice
        # value, which the admission jobs forked from the server would share. (Not shut down
        # at close: the next run may start the server again; its thread ends with the object.)
        self._starter = ThreadPoolExecutor(1, thread_name_prefix="warm-start")
        self._starter.submit(int).result()

    @property
    def enabled(self) -> bool:
        return self.why_plain is None

    @property
    def running(self) -> bool:
        return self._pool is not None

    def acquire(self) -> WarmPool | None:
        """The fork server, started with the first run and again after it stopped for being
        idle; None on the plain path."""
        with self._lock:
            self._active += 1
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            if self.why_plain is None and self._pool is None:
                self._pool = self._start()
            return self._pool

    def _start(self) -> WarmPool | None:
        begun = time.monotonic()
        pool = self._starter.submit(WarmPool, self._env).result()
        started = pool.wait_ready()
        failure = started.failure
        ready = time.monotonic()
        if failure is None and not self._proved:
            try:
                failure = self._canary(pool)
            except Exception as err:  # the canary's own machinery: the plain path all the same
                failure = f"the canary run could not be made: {err}"
        if failure is not None:
            pool.stop()
            self._give_up(failure, started.ansible)
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

    def release(self) -> None:
        with self._lock:
            self._active -= 1
            if self._active or self._pool is None:
                return
            if self.why_plain is not None:  # given up while runs held it: now it can go
                self._pool.stop()
                self._pool = None
            elif self._idle_timeout > 0:
                timer = threading.Timer(self._idle_timeout, self._stop_if_idle)
                timer.daemon = True
                timer.start()
                self._idle_timer = timer

    def give_up(self, reason: str) -> None:
        """The plain path for good (one warning, however many runs report it)."""
        with self._lock:
            self._give_up(reason, self.version)

    def _give_up(self, reason: str, version: str) -> None:
        if self.why_plain is not None:
            return
        self.why_plain = reason
        log.warning(
            "warm executor given up: %s (ansible-core %s); runs take the plain path from now on",
            reason,
            version or self.version,
        )

    def _stop_if_idle(self) -> None:
        """The warm executor holds ~65 MB; an operator with nothing to do gives it back."""
        with self._lock:
            if self._active == 0 and self._pool is not None:
                log.info(
                    "warm executors stopped after %g s without runs (they start again with "
                    "the next run)",
                    self._idle_timeout,
                )
                self._pool.stop()
                self._pool = None
            self._idle_timer = None

    def close(self) -> None:
        with self._lock:
            if self._idle_timer is not None:
                self._idle_timer.cancel()
                self._idle_timer = None
            if self._pool is not None:
                self._pool.stop()
                self._pool = None


def _skipped(started: Started) -> str:
    """The patches not installed on this line, for the info line."""
    if not started.skipped:
        return ""
    return f" (not on this line: {', '.join(started.skipped)})"


def describe(failures: list[dict[str, object]]) -> str:
    """One line for the patches a run's jobs recorded as failed."""
    return "; ".join(f"patch {f.get('patch')} failed in a run: {f.get('error')}" for f in failures)
