"""Starts and stops the warm executor (`server/forkserver.py`: one process serving both kinds of
job) of one operator process, and reads what it reports: its start-up (`status.json`: the
ansible-core version, the patches installed and skipped, or the failure that sends runs to the
plain path) and the patches that failed inside a run's jobs (`patches/guard.py`).

The playbook server is started with exactly the Ansible environment that ansible-runner gives
every run (read off a `RunnerConfig`), so a job's import-time configuration always matches the
server's; anything else falls back to the plain path inside the client. Its working directory
is the pool's own folder (no `ansible.cfg` there): a run finds the same configuration file as
the server unless its project has one, and such a run is handed back to the plain path.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from runner.ansible.warm import client as forkclient
from runner.ansible.warm import jobenv
from runner.util import tempdirs

log = logging.getLogger("runner.executor")

PLAYBOOK_SOCKET_ENV = jobenv.PLAYBOOK_SOCKET_ENV
MODULE_SOCKET_ENV = jobenv.MODULE_SOCKET_ENV
_PER_RUN = ("ANSIBLE_CACHE_PLUGIN_CONNECTION",)
#: The servers' sockets and clients (removed on stop, and by the next operator if this one
#: was killed).
WARM_DIR_PREFIX = "operator-runner-warm-"
#: Seconds a stop waits for the server after SIGTERM before SIGKILL. Its exit handlers (Ansible's
#: local temp folder) take at most 0.05 s on every line with the CPUs saturated
#: (tests/integration/test_warm_stop.py, which holds each stop to 1 s).
STOP_TIMEOUT = 2.0


def runner_env(base: Mapping[str, str]) -> dict[str, str]:
    """The Ansible environment ansible-runner builds for a run with `base` envvars."""
    from ansible_runner.config.runner import RunnerConfig

    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "project").mkdir()
        (Path(tmp) / "project" / "main.yml").write_text("[]\n")
        config = RunnerConfig(
            private_data_dir=tmp, playbook="main.yml", ident="probe", envvars=dict(base), quiet=True
        )
        config.prepare()
        env: dict[str, str] = {str(k): str(v) for k, v in config.env.items()}
    return env


@dataclass(frozen=True)
class Started:
    """What the server reported at start-up."""

    ansible: str = ""
    installed: list[str] = field(default_factory=list)
    skipped: list[str] = field(default_factory=list)
    failure: str | None = None  # why runs must take the plain path


class WarmPool:
    def __init__(self, base_env: Mapping[str, str]) -> None:
        self.dir = tempdirs.private_dir(WARM_DIR_PREFIX)
        self.sockets = {kind: str(self.dir / f"{kind}.sock") for kind in ("playbook", "module")}
        self.failures = self.dir / "failures"
        self.failures.mkdir(mode=0o700)
        real_playbook = str(Path(sys.executable).parent / "ansible-playbook")
        self.playbook_client = forkclient.write_client(
            self.dir / "ansible-playbook",
            sys.executable,
            PLAYBOOK_SOCKET_ENV,
            [sys.executable, real_playbook],
        )
        self.python_client = forkclient.write_client(
            self.dir / jobenv.CLIENT_NAME, sys.executable, MODULE_SOCKET_ENV, [sys.executable]
        )
        run_env = runner_env(base_env)
        self._local_tmp = run_env.get("ANSIBLE_LOCAL_TEMP", "")
        for key in _PER_RUN:
            run_env.pop(key, None)
        # One server for both kinds (their common imports held once); the playbook kind's
        # import-time environment is the runs' (module jobs take theirs from each job).
        args = [arg for kind, sock in self.sockets.items() for arg in (kind, sock)]
        self._proc = subprocess.Popen(
            [sys.executable, "-m", "runner.ansible.warm.server.forkserver", *args],
            env={**os.environ, **run_env},
            cwd=self.dir,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
        )

    @property
    def env(self) -> dict[str, str]:
        return {
            PLAYBOOK_SOCKET_ENV: self.sockets["playbook"],
            MODULE_SOCKET_ENV: self.sockets["module"],
            jobenv.ANSIBALLZ_CACHE_ENV: str(self.dir / "ansiballz_cache"),
            jobenv.TEMPLATE_CACHE_ENV: str(self.dir / "templates"),
        }

    @property
    def server_pid(self) -> int:
        return self._proc.pid

    @property
    def exit_code(self) -> int | None:
        """The server's exit code once it has exited (-N: killed by signal N)."""
        return self._proc.poll()

    def wait_ready(self, timeout: float = 30.0) -> Started:
        """The server's start-up report, once its sockets are there or it has exited."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(os.path.exists(s) for s in self.sockets.values()):
                return self._report()
            code = self._proc.poll()
            if code is not None:
                report = self._report()
                if report.failure is None:
                    report = Started(report.ansible, failure=f"its server exited (code {code})")
                return report
            time.sleep(0.02)
        return Started(failure=f"its server did not start within {timeout:g} s")

    def _report(self) -> Started:
        try:
            body: dict[str, Any] = json.loads((self.dir / jobenv.STATUS_FILE).read_text())
        except (OSError, ValueError):
            return Started(failure="its server wrote no start-up report")
        failed = body.get("failed")
        return Started(
            ansible=str(body.get("ansible") or ""),
            installed=list(body.get("installed") or []),
            skipped=list(body.get("skipped") or []),
            failure=f"patch {failed['patch']} failed: {failed['error']}" if failed else None,
        )

    def stop(self) -> None:
        """SIGTERM (the server runs its exit handlers: Ansible's local temp folder goes), SIGKILL
        when it has not exited within STOP_TIMEOUT (then its temp folder is removed here); its
        own folder (sockets, clients, failure records) goes either way. Idempotent."""
        if self._proc.poll() is None:
            self._proc.terminate()
            try:
                self._proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                log.warning(
                    "warm executor's server (pid %d) did not stop within %g s of SIGTERM: killed",
                    self._proc.pid,
                    STOP_TIMEOUT,
                )
                self._proc.kill()
                self._proc.wait()
                self._remove_local_tmp()
        shutil.rmtree(self.dir, ignore_errors=True)

    def _remove_local_tmp(self) -> None:
        """The server's Ansible local temp folder (`ansible-local-<pid><8 random>`, made by
        ansible-core's configuration in ANSIBLE_LOCAL_TEMP), which its exit handlers would have
        removed."""
        if not self._local_tmp:
            return
        prefix = f"ansible-local-{self._proc.pid}"
        with contextlib.suppress(OSError):
            for path in Path(self._local_tmp).iterdir():
                if path.name.startswith(prefix) and len(path.name) == len(prefix) + 8:
                    shutil.rmtree(path, ignore_errors=True)
