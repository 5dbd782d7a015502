"""Starts and stops the warm executor (`forkserver`: one process serving both kinds of job) of
one operator process.

The playbook server is started with exactly the Ansible environment that ansible-runner gives
every run (read off a `RunnerConfig`), so a job's import-time configuration always matches the
server's; anything else falls back to the plain path inside the client.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from runner.ansible.warm import client as forkclient
from runner.ansible.warm import jobenv
from runner.util import tempdirs

log = logging.getLogger("runner.warm")

PLAYBOOK_SOCKET_ENV = jobenv.PLAYBOOK_SOCKET_ENV
MODULE_SOCKET_ENV = jobenv.MODULE_SOCKET_ENV
_PER_RUN = ("ANSIBLE_CACHE_PLUGIN_CONNECTION",)
#: The servers' sockets and clients (removed on stop, and by the next operator if this one
#: was killed).
WARM_DIR_PREFIX = "operator-runner-warm-"


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


class WarmPool:
    def __init__(self, base_env: Mapping[str, str]) -> None:
        self.dir = tempdirs.private_dir(WARM_DIR_PREFIX)
        self.sockets = {kind: str(self.dir / f"{kind}.sock") for kind in ("playbook", "module")}
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
        for key in _PER_RUN:
            run_env.pop(key, None)
        # One server for both kinds (their common imports held once); the playbook kind's
        # import-time environment is the runs' (module jobs take theirs from each job).
        args = [arg for kind, sock in self.sockets.items() for arg in (kind, sock)]
        self._procs: list[subprocess.Popen[bytes]] = [
            subprocess.Popen(
                [sys.executable, "-m", "runner.ansible.warm.server.forkserver", *args],
                env={**os.environ, **run_env},
                stdin=subprocess.DEVNULL,
                start_new_session=True,
            )
        ]

    @property
    def env(self) -> dict[str, str]:
        return {
            PLAYBOOK_SOCKET_ENV: self.sockets["playbook"],
            MODULE_SOCKET_ENV: self.sockets["module"],
            jobenv.ANSIBALLZ_CACHE_ENV: str(self.dir / "ansiballz_cache"),
            jobenv.TEMPLATE_CACHE_ENV: str(self.dir / "templates"),
        }

    def wait_ready(self, timeout: float = 30.0) -> bool:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(os.path.exists(s) for s in self.sockets.values()):
                return True
            if any(p.poll() is not None for p in self._procs):
                break
            time.sleep(0.05)
        log.warning("warm executors did not start; runs take the plain (slower) path")
        return False

    def stop(self) -> None:
        for proc in self._procs:
            proc.terminate()
        for proc in self._procs:
            try:
                proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
