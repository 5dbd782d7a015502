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

Quick runs follow the warm executor's fence as ansible-runner's runs do (executor.py), through
the same `WarmAttempt` (warm/attempt.py): each job holds one, from its start (ahead) to the end
of the run that takes it; the attempt names the file where a patch that failed inside the job
is recorded, gives the warm executor up when one did (one warning) and says whether the run is
made again on the plain path; the jobs started ahead on the given-up executor are stopped.
When the warm executor is not up (`--executor=plain`, a line it is not verified on, a failed
start or canary), the attempt holds no pool and the job is the real ansible-playbook.

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
from runner.ansible.warm.attempt import WarmAttempt

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
    did not finish."""

    rc: int | None
    summary: RunSummary
    tail: str


class QuickJob:
    """One ansible-playbook, started with its extra vars to come through a named pipe."""

    def __init__(self, spec: JobSpec, folder: Path, process: asyncio.subprocess.Process) -> None:
        self.spec = spec
        self.folder = folder
        self.process = process
        self._writer: int | None = None  # the pipe's write end, once the job reads it

    @classmethod
    async def start(cls, spec: JobSpec, tmp_root: Path, attempt: WarmAttempt) -> QuickJob:
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
                    **attempt.env(),
                },
                cwd=str(spec.playbook.parent),
                start_new_session=True,
            )
        return cls(spec, folder, process)

    @property
    def alive(self) -> bool:
        return self.process.returncode is None

    async def wait_reading(self, poll: float = 0.002) -> bool:
        """Wait until the job reads its extra vars: everything ansible-playbook does before
        (the command line, the configuration, the plugin loaders, the inventory) is done, and
        its run can start at once. False when it ended instead. The pipe's write end, opened
        to see that, is kept for the hand-over (closing it would end the job's read)."""
        path = self.folder / "extravars"
        while self._writer is None:
            try:
                self._writer = os.open(path, os.O_WRONLY | os.O_NONBLOCK)
            except OSError as err:
                if err.errno != errno.ENXIO or not self.alive:
                    return False  # no reader will come: the job ended, its output says why
                await asyncio.sleep(poll)
        return True

    async def _hand_over(self, text: str) -> None:
        """Write the extra vars into the pipe once the job opens it (while it lives)."""
        if not await self.wait_reading():
            return
        fd, self._writer = self._writer, None
        assert fd is not None
        await asyncio.to_thread(_write_blocking, fd, text.encode())

    def _close_writer(self) -> None:
        fd, self._writer = self._writer, None
        if fd is not None:
            with contextlib.suppress(OSError):
                os.close(fd)

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
            return Ended(rc, summary, tail)
        except asyncio.CancelledError:
            await asyncio.shield(self.discard())
            raise
        finally:
            self._close_writer()
            shutil.rmtree(self.folder, ignore_errors=True)

    async def discard(self) -> None:
        """SIGTERM to the job's process group, SIGKILL if it is still there KILL_AFTER s later."""
        self._close_writer()
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
    """Quick runs with one job started ahead per JobSpec (module doc). `attempt` gives a run's
    (or a job started ahead's) warm attempt; `spec_for` builds the job's spec from it."""

    def __init__(
        self,
        attempt: Callable[[], WarmAttempt],
        spec_for: Callable[[WarmAttempt, Path, Mapping[str, str], Sequence[str]], JobSpec],
        tmp_root: Path,
        idle: float = 120.0,
    ) -> None:
        self._attempt = attempt
        self._spec_for = spec_for
        self._tmp_root = tmp_root
        self._idle = idle
        self._ready: dict[JobSpec, tuple[QuickJob, WarmAttempt, asyncio.TimerHandle | None]] = {}
        self._starting: set[asyncio.Task[Any]] = set()
        self._closed = False
        self._generation = 0  # a patch failed: the jobs started ahead before it are stale

    async def run(
        self, playbook: Path, extravars_text: str, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> Ended:
        """The run; made again on the plain path when its attempt says so (a patch of the warm
        executor failed in it, which gave the warm executor up)."""
        ended, again = await self._run_once(playbook, extravars_text, env, cmdline)
        if not again:
            return ended
        log.info("the quick run of %s is made again on the plain path", playbook.name)
        ended, _ = await self._run_once(playbook, extravars_text, env, cmdline)
        return ended

    async def _run_once(
        self, playbook: Path, extravars_text: str, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> tuple[Ended, bool]:
        attempt = await self._new_attempt()
        try:
            spec = self._spec_for(attempt, playbook, env, cmdline)
            taken = self._take(spec)
            if taken is not None:  # the job started ahead runs, with its own attempt
                attempt.abandon()
                job, attempt = taken
            else:
                job = await QuickJob.start(spec, self._tmp_root, attempt)
        except BaseException:
            attempt.abandon()
            raise
        self._start_ahead(spec)
        try:
            ended = await job.run(extravars_text)
        except BaseException:
            attempt.end(cancelled=True)
            raise
        again = attempt.end()
        if attempt.failures:
            self._stop_ready()
        return ended, again

    async def _new_attempt(self) -> WarmAttempt:
        """An attempt, made in a thread (it may wait for the warm executor's start); when the
        caller is cancelled meanwhile, it is abandoned once made, so that no hold is lost."""
        making = asyncio.ensure_future(asyncio.to_thread(self._attempt))
        try:
            return await asyncio.shield(making)
        except asyncio.CancelledError:
            making.add_done_callback(_abandon_made)
            raise

    def _stop_ready(self) -> None:
        """Stop the jobs started ahead (on the warm executor just given up); the next runs
        start theirs on the plain path."""
        self._generation += 1
        for spec in list(self._ready):
            self._expire(spec)

    async def prepare(self, playbook: Path, env: Mapping[str, str], cmdline: Sequence[str]) -> bool:
        """Start a job ahead for these before the first request (the webhooks' start-up) and
        wait until it reads its extra vars: from then on a request is answered without waiting
        for the warm executor's start or ansible-playbook's (False: the job ended instead, its
        run will say why)."""
        task = asyncio.get_running_loop().create_task(self._prepare_for(playbook, env, cmdline))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)
        return await task

    async def _prepare_for(
        self, playbook: Path, env: Mapping[str, str], cmdline: Sequence[str]
    ) -> bool:
        attempt = await self._new_attempt()
        try:
            spec = self._spec_for(attempt, playbook, env, cmdline)
        finally:
            attempt.abandon()
        if spec not in self._ready:
            await self._prepare(spec)
        ready = self._ready.get(spec)
        return ready is not None and await ready[0].wait_reading(poll=0.01)

    def _take(self, spec: JobSpec) -> tuple[QuickJob, WarmAttempt] | None:
        ready = self._ready.pop(spec, None)
        if ready is None:
            return None
        job, attempt, timer = ready
        if timer is not None:
            timer.cancel()
        if not job.alive:
            attempt.abandon()
            return None
        return job, attempt

    def _start_ahead(self, spec: JobSpec) -> None:
        if self._closed or spec in self._ready:
            return
        task = asyncio.get_running_loop().create_task(self._prepare(spec))
        self._starting.add(task)
        task.add_done_callback(self._starting.discard)

    async def _prepare(self, spec: JobSpec) -> None:
        generation = self._generation
        attempt = await self._new_attempt()
        kept = False
        try:
            if attempt.warm != spec.warm:  # given up meanwhile: the next run starts its own
                return
            try:
                job = await QuickJob.start(spec, self._tmp_root, attempt)
            except OSError:
                return
            if self._closed or spec in self._ready or generation != self._generation:
                await job.discard()
                return
            loop = asyncio.get_running_loop()
            timer = loop.call_later(self._idle, self._expire, spec) if self._idle > 0 else None
            self._ready[spec] = (job, attempt, timer)
            kept = True
        finally:
            if not kept:
                attempt.abandon()

    def _expire(self, spec: JobSpec) -> None:
        """Stop the job started ahead for `spec` (not taken in time, or stale); its hold goes
        at once."""
        ready = self._ready.pop(spec, None)
        if ready is not None:
            job, attempt, timer = ready
            if timer is not None:
                timer.cancel()
            attempt.abandon()
            task = asyncio.get_running_loop().create_task(job.discard())
            self._starting.add(task)
            task.add_done_callback(self._starting.discard)

    def close(self) -> None:
        """Stop the jobs started ahead (the operator stops): SIGTERM, which the client relays
        to the job (and a job whose client went away stops itself)."""
        self._closed = True
        for task in list(self._starting):
            task.cancel()
        for job, attempt, timer in self._ready.values():
            if timer is not None:
                timer.cancel()
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(job.process.pid, signal.SIGTERM)
            shutil.rmtree(job.folder, ignore_errors=True)
            attempt.abandon()
        self._ready.clear()


def _abandon_made(making: asyncio.Future[WarmAttempt]) -> None:
    if not making.cancelled() and making.exception() is None:
        making.result().abandon()
