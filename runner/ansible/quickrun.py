"""Quick runs: a playbook run on the request path (admission), without ansible-runner.

An admission webhook answers while the API server waits, so its run takes the shortest way:
`ansible-playbook` (the warm fork server's client when it is up, the real program otherwise) is
started directly as an asyncio subprocess, with exactly the environment ansible-runner gives a
run (its display callback included, so the fork server takes the job). The callback writes each
job event as a file into the run's own folder (`AWX_ISOLATED_DATA_DIR/job_events/`), which is
read once the job has ended and folded into a `RunSummary` as ansible-runner's events are. What
this skips: ansible-runner's pexpect pty and its polling, its artifact folder (the run's folder
is removed at the end) and its per-run configuration.

Jobs are started ahead (`QuickRunner`): for each playbook (and environment) one job waits,
started with `-e @<a named pipe>`, and does everything ansible-playbook does before it reads its
extra vars (the command line, the configuration, the plugin loaders, the inventory) while no
request waits; the request's vars are written into the pipe and the job goes on. The next job
is started as soon as one is taken; a job not taken for `idle` seconds is stopped (it holds the
warm executor up).

Quick runs follow the warm executor's fence as ansible-runner's runs do (executor.py): a job on
the warm path names a file of its own where a patch that failed inside it is recorded
(`warm/patches/guard.py`); when one did, the executor gives the warm executor up for good (one
warning), the jobs started ahead on it are stopped, and the run is made again on the plain path.
When the warm executor is not up (`--executor=plain`, a line it is not verified on, a failed
start or canary), `acquire` gives None and the job is the real ansible-playbook.

The role runs exactly as Ansible runs it: the same playbook, inventory, extra vars file
(`-e @file`, `!unsafe` tags intact) and `--ansible-args`. A run that is cancelled (the webhook's
deadline) has its process group sent SIGTERM (the client relays it to the job), then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import fcntl
import json
import logging
import os
import shutil
import signal
import tempfile
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.ansible.results import RunSummary, apply_event
from runner.ansible.warm.jobenv import FAILURES_ENV
from runner.ansible.warm.pool import WarmPool

log = logging.getLogger("runner.executor")

KILL_AFTER = 2.0  # seconds between SIGTERM and SIGKILL of a cancelled run
TAIL_LINES = 15


def job_events(folder: Path) -> list[dict[str, Any]]:
    """The job events the display callback wrote into `folder/job_events`, in order."""
    events = []
    for path in (folder / "job_events").glob("*-partial.json"):
        try:
            event = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # a job killed while writing one
            continue
        if isinstance(event, dict):
            events.append(event)
    events.sort(key=lambda event: str(event.get("created", "")))
    return events


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])


def _write_blocking(fd: int, data: bytes) -> None:
    flags = fcntl.fcntl(fd, fcntl.F_GETFL)
    fcntl.fcntl(fd, fcntl.F_SETFL, flags & ~os.O_NONBLOCK)
    with os.fdopen(fd, "wb") as pipe:
        pipe.write(data)


@dataclass(frozen=True)
class JobSpec:
    """What a job runs, apart from the request's extra vars."""

    binary: str
    playbook: Path
    inventory: tuple[str, ...]
    env: tuple[tuple[str, str], ...]
    cmdline: tuple[str, ...] = ()
    warm: bool = False  # on the warm executor: its patches' failures are recorded


@dataclass(frozen=True)
class Ended:
    """A quick run's end: its exit code, what its events say, the end of its output when it
    did not finish, and the warm executor's patches that failed inside it."""

    rc: int | None
    summary: RunSummary
    tail: str
    failures: tuple[dict[str, Any], ...] = ()

    @property
    def redo(self) -> bool:
        """Whether the run must be made again on the plain path (a patch failed in it and the
        job was not handed back to the real program)."""
        return any(failure.get("redo", True) for failure in self.failures)


class QuickJob:
    """One ansible-playbook, started with its extra vars to come through a named pipe."""

    def __init__(self, spec: JobSpec, folder: Path, process: asyncio.subprocess.Process) -> None:
        self.spec = spec
        self.folder = folder
        self.process = process

    @classmethod
    async def start(cls, spec: JobSpec, tmp_root: Path) -> QuickJob:
        folder = Path(tempfile.mkdtemp(prefix="quick-", dir=tmp_root))
        os.mkfifo(folder / "extravars", 0o600)
        args = [str(spec.playbook)]
        for source in spec.inventory:
            args += ["-i", source]
        args += ["-e", f"@{folder / 'extravars'}", *spec.cmdline]
        with (folder / "stdout").open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                spec.binary,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env={
                    **dict(spec.env),
                    "AWX_ISOLATED_DATA_DIR": str(folder),
                    "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(folder / "fact_cache"),
                    **({FAILURES_ENV: str(folder / "warm-failures")} if spec.warm else {}),
                },
                cwd=str(spec.playbook.parent),
                start_new_session=True,
            )
        return cls(spec, folder, process)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def _hand_over(self, text: str) -> None:
        """Write the extra vars into the pipe once the job opens it (while it lives)."""
        path = self.folder / "extravars"
        while True:
            try:
                fd = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
                break
            except OSError as err:
                if err.errno != errno.ENXIO or not self.alive:
                    return  # no reader will come: the job ended, its output says why
                await asyncio.sleep(0.002)
        await asyncio.to_thread(_write_blocking, fd, text.encode())

    async def run(self, extravars_text: str) -> Ended:
        """Give the job its extra vars and wait for it (`Ended`). Cancelled: the job is
        stopped."""
        try:
            await self._hand_over(extravars_text)
            rc = await self.process.wait()
            summary = RunSummary()
            for event in job_events(self.folder):
                apply_event(summary, event)
            tail = "" if summary.finished and rc == 0 else _tail(self.folder / "stdout")
            failures = WarmPool.read_failures(self.folder / "warm-failures")
            return Ended(rc, summary, tail, tuple(failures))
        except asyncio.CancelledError:
            await asyncio.shield(self.discard())
            raise
        finally:
            shutil.rmtree(self.folder, ignore_errors=True)

    async def discard(self) -> None:
        """SIGTERM to the job's process group, SIGKILL if it is still there KILL_AFTER s later."""
        for sig in (signal.SIGTERM, signal.SIGKILL):
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, sig)
            try:
                await asyncio.wait_for(self.process.wait(), KILL_AFTER)
                break
            except TimeoutError:
                continue
        shutil.rmtree(self.folder, ignore_errors=True)


class QuickRunner:
    """Quick runs with one job started ahead per JobSpec (module doc). `acquire` and `release`
    hold the warm executor for a job (acquire returns what `spec_for` needs to build the
    spec: the pool, or None on the plain path); `failed` hears of the patches that failed in a
    warm job (the executor gives the warm executor up: `acquire` gives None from then on)."""

    def __init__(
        self,
        acquire: Callable[[], Any],
        release: Callable[[], None],
        spec_for: Callable[[Any, Path, Mapping[str, str], Sequence[str]], JobSpec],
        tmp_root: Path,
        idle: float = 120.0,
        failed: Callable[[list[dict[str, Any]]], None] = lambda failures: None,
    ) -> None:
        self._acquire = acquire
        self._release = release
        self._spec_for = spec_for
        self._tmp_root = tmp_root
        self._idle = idle
        self._failed = failed
        self._ready: dict[JobSpec, tuple[QuickJob, Any, asyncio.TimerHandle | None]] = {}
        self._starting: set[asyncio.Task[None]] = set()
        self._closed = False
        self._generation = 0  # a patch failed: the jobs started ahead before it are stale

    async def run(
        self, playbook: Path, extravars_text: str, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> Ended:
        """The run; made again on the plain path when a patch of the warm executor failed in
        it (`failed` is told first, so that it is the plain path)."""
        ended = await self._run_once(playbook, extravars_text, env, cmdline)
        if not ended.failures:
            return ended
        self._failed(list(ended.failures))
        self._stop_ready()
        if not ended.redo:
            return ended
        log.info("the quick run of %s is made again on the plain path", playbook.name)
        return await self._run_once(playbook, extravars_text, env, cmdline)

    async def _run_once(
        self, playbook: Path, extravars_text: str, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> Ended:
        pool = await asyncio.to_thread(self._acquire)
        try:
            spec = self._spec_for(pool, playbook, env, cmdline)
            job = self._take(spec)
            if job is None:
                job = await QuickJob.start(spec, self._tmp_root)
            self._start_ahead(spec)
            return await job.run(extravars_text)
        finally:
            self._release()

    def _stop_ready(self) -> None:
        """Stop the jobs started ahead (on the warm executor just given up); the next runs
        start theirs on the plain path."""
        self._generation += 1
        for spec in list(self._ready):
            self._expire(spec)

    def prepare(self, playbook: Path, env: Mapping[str, str], cmdline: Sequence[str]) -> None:
        """Start a job ahead for these before the first request (the webhooks' start-up)."""
        task = asyncio.get_running_loop().create_task(self._prepare_for(playbook, env, cmdline))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _prepare_for(
        self, playbook: Path, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> None:
        pool = await asyncio.to_thread(self._acquire)
        try:
            spec = self._spec_for(pool, playbook, env, cmdline)
        finally:
            self._release()
        self._start_ahead(spec)

    def _take(self, spec: JobSpec) -> QuickJob | None:
        ready = self._ready.pop(spec, None)
        if ready is None:
            return None
        job, _, timer = ready
        if timer is not None:
            timer.cancel()
        self._release()  # the job's hold on the pool passes to the run
        return job if job.alive else None

    def _start_ahead(self, spec: JobSpec) -> None:
        if self._closed or spec in self._ready:
            return
        task = asyncio.get_running_loop().create_task(self._prepare(spec))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _prepare(self, spec: JobSpec) -> None:
        generation = self._generation
        pool = await asyncio.to_thread(self._acquire)
        try:
            job = await QuickJob.start(spec, self._tmp_root)
        except OSError:
            self._release()
            return
        if self._closed or spec in self._ready or generation != self._generation:
            await job.discard()
            self._release()
            return
        loop = asyncio.get_running_loop()
        timer = loop.call_later(self._idle, self._expire, spec) if self._idle > 0 else None
        self._ready[spec] = (job, pool, timer)

    def _expire(self, spec: JobSpec) -> None:
        ready = self._ready.pop(spec, None)
        if ready is not None:
            task = asyncio.get_running_loop().create_task(ready[0].discard())
            task.add_done_callback(lambda _: self._release())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    def close(self) -> None:
        """Stop the jobs started ahead (the operator stops): SIGTERM, which the client relays
        to the job (and a job whose client went away stops itself)."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for job, _, timer in self._ready.values():
            if timer is not None:
                timer.cancel()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(job.process.pid, signal.SIGTERM)
            shutil.rmtree(job.folder, ignore_errors=True)
            self._release()
        self._ready.clear()
