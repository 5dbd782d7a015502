"""Runs a role or playbook through ansible-runner and reports what happened.

One private data dir per CR (see `artifacts`); ansible-runner writes one artifact folder per run
under it and keeps at most `rotate` of them. The playbook is local (`hosts: localhost`,
`connection: local`) and modules run with the runner's own Python, so kubernetes.core finds the
`kubernetes` package without configuration. Extra vars go through `env/extravars`, which
ansible-runner hands to ansible-playbook as `-e @file` without parsing it, so `!unsafe` tags
reach Ansible intact.
"""

from __future__ import annotations

import asyncio
import contextvars
import json
import logging
import os
import shlex
import shutil
import sys
import tempfile
import threading
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import ansible_runner

from runner.ansible import collections_path, ptyclose, quickrun
from runner.ansible.interface import LogEvents, QuickRequest, RunRequest, RunResult
from runner.ansible.results import RunSummary, apply_event
from runner.ansible.retention import Retention
from runner.ansible.tasklog import log_task_event
from runner.ansible.tasknames import TaskNames
from runner.ansible.warm import canary
from runner.ansible.warm.attempt import Hold, WarmAttempt, describe
from runner.ansible.warm.lifecycle import WarmLifecycle
from runner.ansible.warm.pool import WarmPool, runner_env
from runner.util import priority, tempdirs

log = logging.getLogger("runner.executor")

# The threads runs wait in (a run is a thread waiting for its ansible-playbook). Not a limit: the
# kinds' workers and the memory slots bound the runs in flight. The runs have a pool of their
# own so that they never take all of asyncio's default one (min(32, CPUs + 4) threads: 6 on two
# CPUs), which the short calls share: an admission's quick run starting, the client's
# credentials, a run's log. On it, seven runs at once made every admission wait for a whole run.
RUN_THREADS = 1024
# Those threads, and the runs they start, are niced below the request path (util/priority.py).

# ansible-playbook and friends of the Python environment the runner runs in go first on PATH.
_BIN_DIR = Path(sys.executable).parent
#: The runs' TMPDIR (see Executor).
RUN_TMP_PREFIX = "operator-runner-runs-"


def inventory_text(python: str = sys.executable) -> str:
    return (
        "[all]\n"
        f"localhost ansible_connection=local ansible_python_interpreter={shlex.quote(python)}\n"
    )


def user_inventory(environ: Mapping[str, str], cwd: Path | None = None) -> list[str]:
    """The inventory sources `ANSIBLE_INVENTORY` names (Ansible's comma-separated path list),
    relative paths taken from the operator's working directory; [] when it is unset.

    As operator-sdk (which passes it to ansible-runner as `--inventory`): when the operator's
    environment names an inventory, runs use it instead of the runner's own one-host
    inventory, so plays for its groups (`hosts: test`) find their hosts. Its variables, the
    Python interpreter included, are then the inventory's business.
    """
    raw = environ.get("ANSIBLE_INVENTORY", "")
    base = cwd or Path.cwd()
    return [str(base / Path(p.strip()).expanduser()) for p in raw.split(",") if p.strip()]


def ansible_env(tmp_dir: Path, roles_paths: list[Path]) -> dict[str, str]:
    """Environment of every run: our bundled collection first, no colour, temp files we own."""
    env: dict[str, str] = {}
    env["ANSIBLE_COLLECTIONS_PATH"] = collections_path.runs_path(os.environ)
    roles = [str(p) for p in roles_paths]
    if os.environ.get("ANSIBLE_ROLES_PATH"):
        roles.append(os.environ["ANSIBLE_ROLES_PATH"])
    if roles:
        env["ANSIBLE_ROLES_PATH"] = ":".join(roles)
    env["PATH"] = f"{_BIN_DIR}{os.pathsep}{os.environ.get('PATH', '')}"
    env["ANSIBLE_NOCOLOR"] = "1"
    env["ANSIBLE_FORCE_COLOR"] = "0"
    env["ANSIBLE_LOCAL_TEMP"] = str(tmp_dir)
    env["ANSIBLE_REMOTE_TEMP"] = str(tmp_dir)
    env["ANSIBLE_RETRY_FILES_ENABLED"] = "0"
    env["ANSIBLE_DEPRECATION_WARNINGS"] = "0"
    # Modules go to the local Python on stdin instead of as files in a temp dir that is made
    # and removed around each task (two shell commands and a file per task saved). Set
    # ANSIBLE_PIPELINING=False in the operator's environment to turn it off.
    env["ANSIBLE_PIPELINING"] = os.environ.get("ANSIBLE_PIPELINING", "True")
    return env


class Executor:
    """Runs Ansible for one CR at a time per call; many calls may run at once."""

    def __init__(
        self,
        roles_paths: list[Path],
        tmp_dir: Path,
        warm: bool = True,
        warm_idle_timeout: float = 120.0,
        max_parallel_runs: int | None = None,
        retention: Retention | None = None,
    ) -> None:
        self._retention = retention or Retention()  # what stays of the runs (retention.py)
        self._env = ansible_env(tmp_dir, roles_paths)
        # The runs' TMPDIR, removed with the operator (and by the next start after a SIGKILL):
        # kubernetes.core keeps its discovery cache there, a file per API server URL and user,
        # and the runs' URL is the roles' proxy, on a new port at every start.
        self.run_tmp = tempdirs.private_dir(RUN_TMP_PREFIX)
        self._env["TMPDIR"] = str(self.run_tmp)
        self._user_inventory = user_inventory(os.environ)
        if self._user_inventory:
            log.info("inventory from ANSIBLE_INVENTORY: %s", ", ".join(self._user_inventory))
        # One budget for all kinds together (each kind's workers are limited on their own):
        # no more runs in flight than the memory limit holds.
        self._slots = asyncio.Semaphore(max_parallel_runs) if max_parallel_runs else None
        tmp_dir.mkdir(parents=True, exist_ok=True, mode=0o700)
        self._cancel = threading.Event()
        self._threads = ThreadPoolExecutor(RUN_THREADS, "ansible-run", priority.nice_this_thread)
        self._task_names = TaskNames()  # the per-task metrics' labels
        ptyclose.install()
        self._warm = WarmLifecycle(self._env, warm, warm_idle_timeout, self._canary)
        self._quick_env: dict[str, str] | None = None  # ansible-runner's environment of a run
        self._quick = quickrun.QuickRunner(
            self._warm.attempt, self._quick_spec, self.run_tmp, warm_idle_timeout
        )
        log.info(
            "executor: %s, ansible-core %s, %s",
            "warm (fork server, started and proved by a canary with the first run)"
            if self._warm.enabled
            else f"plain ansible-runner ({self._warm.why_plain})",
            self._warm.version or "(unknown)",
            f"at most {max_parallel_runs} runs at once (memory limit)"
            if max_parallel_runs
            else "no memory limit known",
        )

    def add_env(self, env: Mapping[str, str]) -> None:
        """Variables for every run from now on (set before the first run: the warm executor
        takes the environment it starts with)."""
        self._env.update(env)

    @property
    def warm_running(self) -> bool:
        return self._warm.running

    def start_warm(self) -> None:
        """Start the warm executor now rather than with the first run (an operator whose
        webhooks must answer at once)."""
        self._warm.start_ahead()

    async def wait_warm(self) -> None:
        """Until runs start without waiting for the warm executor: it is up, or given up
        (started now if need be)."""
        starting = self._warm.start_ahead()
        if starting is not None:
            await asyncio.wrap_future(starting)

    def close(self) -> None:
        """Stop everything within a bound: the jobs started ahead, the warm executor (a server
        starting too: its canary run is cancelled), the runs' temp folder."""
        self._cancel.set()
        self._quick.close()
        self._warm.close()
        self._threads.shutdown(wait=False)
        shutil.rmtree(self.run_tmp, ignore_errors=True)

    def cancel_all(self) -> None:
        """Stop every run in progress (shutdown after the grace period)."""
        self._cancel.set()

    async def run(self, request: RunRequest) -> RunResult:
        if self._slots is None:
            return await self._in_thread(request)
        async with self._slots:
            return await self._in_thread(request)

    async def _in_thread(self, request: RunRequest) -> RunResult:
        """`run_sync` in a thread of the runs' own pool (RUN_THREADS), as asyncio.to_thread."""
        context = contextvars.copy_context()
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, context.run, self.run_sync, request)

    def run_sync(self, request: RunRequest) -> RunResult:
        """One run: on the warm executor when it is up; a run in which a patch failed is run
        again on the plain path (its attempt says so: warm/attempt.py)."""
        attempt = self._warm.attempt()
        try:
            result = self._run_sync(request, attempt)
        finally:
            again = attempt.end(cancelled=self._cancel.is_set())
        if not again:
            return result
        log.info("the run is made again on the plain path", extra=dict(request.log_extra))
        shutil.rmtree(request.private_dir / "artifacts" / request.ident, ignore_errors=True)
        return self._run_sync(request, None)

    async def run_quick(self, request: QuickRequest) -> RunResult:
        """A run on the request path (quickrun.py): on the warm fork server when it is up (it
        starts with the first run), else a fresh ansible-playbook; a job for the next request
        waits, started ahead; a run in which a patch failed is made again on the plain path
        (and the warm executor given up), as `run_sync`'s; cancelling stops the run."""
        cmdline = list(request.cmdline)
        if request.verbosity:
            cmdline.append("-" + "v" * request.verbosity)
        ended = await self._quick.run(
            request.playbook, request.extravars_text, request.envvars, cmdline
        )
        status = "successful" if ended.rc == 0 else "failed"
        return RunResult(status, ended.rc, ended.summary, ended.tail)

    async def prepare_quick(self, request: QuickRequest) -> bool:
        """A job started ahead for `request`'s playbook (its extra vars come with a run),
        returned once it waits for them: the warm executor up (or given up) and the job's
        start done (quickrun.py)."""
        return await self._quick.prepare(request.playbook, request.envvars, list(request.cmdline))

    def _quick_spec(
        self,
        attempt: WarmAttempt,
        playbook: Path,
        envvars: Mapping[str, str],
        cmdline: Sequence[str],
    ) -> quickrun.JobSpec:
        """A quick run's job: ansible-runner's environment of a run, the warm client."""
        if self._quick_env is None:
            self._quick_env = runner_env(self._env)
        pool = attempt.pool
        env = {**self._quick_env, **envvars, **(pool.env if pool else {})}
        binary = pool.playbook_client if pool else _BIN_DIR / "ansible-playbook"
        if self._user_inventory:
            inventory = tuple(self._user_inventory)
        else:
            python = str(pool.python_client) if pool else sys.executable
            hosts = self.run_tmp / f"quick-hosts-{abs(hash(python))}"  # per warm client
            if not hosts.exists():
                _write_private(hosts, inventory_text(python))
            inventory = (str(hosts),)
        items = tuple(sorted(env.items()))
        return quickrun.JobSpec(
            str(binary), playbook, inventory, items, tuple(cmdline), warm=attempt.warm
        )

    def _canary(self, pool: WarmPool) -> str | None:
        """Run the canary playbook on `pool` (an attempt that holds nothing: the lifecycle is
        starting it): why the warm path cannot be used, or None."""
        with tempfile.TemporaryDirectory(prefix="canary-", dir=self.run_tmp) as tmp:
            playbook = canary.write_project(Path(tmp) / "project")
            request = RunRequest(
                private_dir=Path(tmp) / "private",
                ident=canary.IDENT,
                playbook=playbook,
                extravars_text="{}",
                log_events=LogEvents.NOTHING,
            )
            attempt = WarmAttempt(Hold(pool, lambda: None), lambda reason: None)
            result = self._run_sync(request, attempt, own_inventory=True, retention=Retention())
            attempt.end()
            if attempt.failures:
                return describe(attempt.failures)
            return canary.verdict(result.status, request.private_dir / "artifacts" / canary.IDENT)

    def _run_sync(
        self,
        request: RunRequest,
        attempt: WarmAttempt | None,
        own_inventory: bool = False,
        retention: Retention | None = None,
    ) -> RunResult:
        """One run through ansible-runner: with `attempt`'s warm client when it holds the pool,
        else the plain ansible-playbook; `retention` (the executor's) says what stays of it."""
        retention = retention or self._retention
        pool = attempt.pool if attempt is not None else None
        summary = RunSummary()
        private = request.private_dir
        (private / "env").mkdir(parents=True, exist_ok=True, mode=0o700)
        (private / "inventory").mkdir(exist_ok=True, mode=0o700)
        # ansible-runner saves the envvars, settings and command line of a run into env/ and
        # prefers those files to its arguments on the next run (stale kubeconfig paths; the
        # warm path's playbook argument on a plain run). Pass them fresh.
        for stale in ("envvars", "settings", "cmdline"):
            (private / "env" / stale).unlink(missing_ok=True)
        extravars = private / "env" / "extravars"
        _write_private(extravars, request.extravars_text)
        inventory: str | list[str] = [] if own_inventory else self._user_inventory
        if not inventory:
            hosts = private / "inventory" / "hosts"
            text = inventory_text(str(pool.python_client) if pool else sys.executable)
            if not hosts.exists() or hosts.read_text(encoding="utf-8") != text:
                _write_private(hosts, text)
            inventory = str(hosts)
        cmdline = list(request.cmdline)
        envvars = {**self._env, **request.envvars}
        if attempt is not None and pool is not None:  # the warm client is a raw binary: the
            cmdline.insert(0, str(request.playbook))  # playbook is an argument
            envvars.update(attempt.env())
        keep = attempt.keep if attempt is not None else None

        def on_event(event: Mapping[str, Any]) -> bool:
            apply_event(summary, event)
            log_task_event(event, request, keep)
            return retention.job_events  # False: ansible-runner writes no job_events/ file

        cancel: Callable[[], bool] = self._cancel.is_set  # close() sets it too (the canary)
        with retention.writing(private / "artifacts" / request.ident):
            runner = ansible_runner.run(
                private_data_dir=str(private),
                ident=request.ident,
                playbook=str(request.playbook),
                project_dir=str(request.playbook.parent),
                inventory=inventory,
                binary=str(pool.playbook_client) if pool else None,
                envvars=envvars,
                verbosity=request.verbosity or None,
                cmdline=shlex.join(cmdline) if cmdline else None,
                rotate_artifacts=0,  # artifacts.finish_run keeps `latest` out of the rotation
                quiet=not request.echo,
                event_handler=on_event,
                cancel_callback=cancel,
                # ansible-runner looks at cancel_callback each time pexpect returns: at the latest
                # after pexpect_timeout (5 s by default) of a silent run; shutdown's grace period
                # ends with a cancel that must take effect within a second
                settings={"suppress_ansible_output": not request.echo, "pexpect_timeout": 0.5},
            )
        _scrub_command(private / "artifacts" / request.ident / "command")
        retention.finished(private, request.ident, request.rotate, _failed(runner.status, summary))
        self._task_names.fill(summary.task_results, request.secrets.redact)
        tail = ""
        if not summary.finished or runner.status != "successful":
            tail = request.secrets.redact(_tail(runner))
        summary.failures = [request.secrets.redact(m) for m in summary.failures]
        return RunResult(status=runner.status, rc=runner.rc, summary=summary, stdout_tail=tail)


def _failed(status: str, summary: RunSummary) -> bool | None:
    """Whether a run failed, as the reconciler sees it; None: cancelled (neither)."""
    if status == "canceled":
        return None
    return status != "successful" or not summary.finished or bool(summary.failures)


_SAFE_ENV = (
    "ANSIBLE_",
    "OPERATOR_RUNNER_CR_",
    "KUBECONFIG",
    "K8S_AUTH_KUBECONFIG",
    "PATH",
    "WATCH_NAMESPACE",
    "HOME",
    "LANG",
)


def _scrub_command(path: Path) -> None:
    """ansible-runner records the whole environment of the run in `command`; keep only what
    cannot be a secret, so the operator's credentials never land in the artifacts."""
    try:
        record = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return
    env = record.get("env") or {}
    record["env"] = {k: v for k, v in env.items() if k.startswith(_SAFE_ENV)}
    _write_private(path, json.dumps(record, indent=1))


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _tail(runner: Any, lines: int = 15) -> str:
    try:
        text = runner.stdout.read()
    except Exception:  # the run may have died before writing stdout
        return ""
    return "\n".join(str(text).rstrip().splitlines()[-lines:])
