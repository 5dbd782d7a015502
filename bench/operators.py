"""The operators under test: their specs (ours, the peer: operator-sdk's ansible-operator),
and one running under the launcher with its process tree sampled."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.ansible.collections_path import BUNDLED_COLLECTIONS

from .harness import BENCH, REPO, log
from .proctree import TreeSampler

CACHE = Path(os.environ.get("OPERATOR_RUNNER_CACHE") or Path.home() / ".cache" / "operator-runner")
PEER_DIR = CACHE / "peer"
# The version the issue asks for first; v1.30.0 (operator-sdk's own module, the last release
# that carried cmd/ansible-operator) where this machine's Go proxy refuses the newer module.
PEER_VERSIONS = ("v1.42.3", "v1.30.0")


def peer_binary() -> tuple[str, Path] | None:
    for version in PEER_VERSIONS:
        path = PEER_DIR / version / "ansible-operator"
        if path.exists():
            return version, path
    return None


PEER_VENV = PEER_DIR / "venv"


@dataclass
class OperatorSpec:
    key: str  # "ours" | "peer"
    label: str
    argv: list[str]
    env: dict[str, str]
    artifacts: Path  # where its ansible-runner artifacts go


def _help_lists(exe: Path, flag: str) -> bool:
    try:
        out = subprocess.run(
            [str(exe), "run", "--help"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in out


def ours_spec(work: Path, watches: Path, extra: list[str]) -> OperatorSpec:
    exe = REPO / ".venv" / "bin" / "operator-runner"
    artifacts = work / "artifacts"
    argv = [str(exe), "run", f"--watches-file={watches}", f"--artifacts-dir={artifacts}"]
    if _help_lists(exe, "--metrics-bind-address"):
        argv += ["--metrics-bind-address=0", "--health-probe-bind-address=0"]
    if _help_lists(exe, "--role-metrics-bind-address"):
        argv += ["--role-metrics-bind-address=127.0.0.1:0"]
    if _help_lists(exe, "--webhook-bind-address"):
        # the same work as the peer's, which has no admission webhooks (bench.admission
        # measures ours)
        argv += ["--webhook-bind-address=0"]
    argv += extra
    return OperatorSpec("ours", "operator-runner", argv, {}, artifacts)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peer_env() -> dict[str, str]:
    return {
        "PATH": f"{PEER_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        # operator_sdk.util: operator-runner's (Galaxy is out of reach here)
        "ANSIBLE_COLLECTIONS_PATH": str(BUNDLED_COLLECTIONS),
        "VIRTUAL_ENV": str(PEER_VENV),
    }


def peer_spec(mode: str, work: Path, watches: Path) -> OperatorSpec | None:
    """operator-sdk's ansible-operator that bench/peer.sh built (mode auto: None without one,
    with a log line; binary: stop without one). It keeps its artifacts in
    /tmp/ansible-operator/runner whatever `work` is."""
    if mode == "none":
        return None
    found = peer_binary()
    if found:
        if not (PEER_VENV / "bin" / "python").exists():
            raise SystemExit(f"bench: no peer virtualenv {PEER_VENV}; run bench/peer.sh")
        version, binary = found
        argv = [
            str(binary),
            "run",
            f"--watches-file={watches}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        ]
        return OperatorSpec(
            "peer",
            f"ansible-operator {version} (operator-sdk)",
            argv,
            peer_env(),
            Path("/tmp/ansible-operator/runner"),
        )
    if mode == "binary":
        raise SystemExit(f"bench: no ansible-operator under {PEER_DIR} (see bench/peer.sh)")
    log(f"no ansible-operator under {PEER_DIR} (see bench/peer.sh): the peer is left out")
    return None


class RunningOperator:
    def __init__(self, spec: OperatorSpec, kubeconfig: Path, namespace: str, work: Path) -> None:
        self.spec, self.work = spec, work
        work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        for k in ("VIRTUAL_ENV", "PYTHONPATH"):
            env.pop(k, None)
        env.update(spec.env)
        # Both operators as operator-sdk's scaffold deploys them (config/manager sets it): role
        # watches gather no facts. Without it both gather them for every run of a `role:` watch
        # (the bench's cost roles); EchoFlask's playbook says gather_facts: false itself.
        env.setdefault("ANSIBLE_GATHERING", "explicit")
        env["KUBECONFIG"] = str(kubeconfig)
        env["WATCH_NAMESPACE"] = namespace
        self.rusage_file = work / "rusage.json"
        self.log_file = work / "operator.log"
        self._log = open(self.log_file, "wb")  # noqa: SIM115
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "launch.py"),
                "--rusage-out",
                str(self.rusage_file),
                "--",
                *spec.argv,
            ],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO),
        )
        self.sampler = TreeSampler(self.proc.pid)
        self.sampler.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the launcher forwards it
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the session this harness created
                self.proc.wait(timeout=30)
        self.sampler.stop()
        self._log.close()
        try:
            rusage: dict[str, Any] = json.loads(self.rusage_file.read_text())
        except (OSError, ValueError):
            return {}
        return rusage

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def wait_quiet(op: RunningOperator, seconds: float, deadline: float) -> bool:
    """True once no ansible-playbook ran for `seconds` in a row (before the deadline)."""
    since = None
    while time.monotonic() < deadline:
        s = op.sampler.now()
        if s.running == 0:
            since = since or s.t
            if s.t - since >= seconds:
                return True
        else:
            since = None
        time.sleep(0.2)
    return False
