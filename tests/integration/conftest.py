"""Integration tests get a real Kubernetes API server.

`OPERATOR_RUNNER_KUBECONFIG` names an existing cluster to use (for instance `make -s kubeconfig`
after `make cluster`); otherwise a throwaway local cluster with a unique name is created for the
session and always deleted afterwards, also when tests fail or the run is interrupted (SIGINT,
SIGTERM).
"""

from __future__ import annotations

import os
import signal
import subprocess
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from types import FrameType

import pytest
from kubernetes import client, config

REPO = Path(__file__).resolve().parents[2]
CLUSTER_SH = REPO / "hack" / "cluster.sh"
BUILD_BINARIES_SH = REPO / "hack" / "build-binaries.sh"


@dataclass(frozen=True)
class Cluster:
    name: str
    kubeconfig: Path
    bin_dir: Path

    def kubectl(self, *args: str, check: bool = True, input: str | None = None) -> str:
        proc = subprocess.run(
            [str(self.bin_dir / "kubectl"), "--kubeconfig", str(self.kubeconfig), *args],
            capture_output=True,
            text=True,
            input=input,
            timeout=120,
        )
        if check and proc.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed: {proc.stderr}")
        return proc.stdout

    def api_client(self) -> client.ApiClient:
        return config.new_client_from_config(config_file=str(self.kubeconfig))


def _sigterm_as_interrupt(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def built_binaries() -> Path:
    """The folder of the control plane's binaries. They are built before pytest starts (`make
    test`, `make binaries`), never inside a test, where a cold build would run into the test's
    timeout."""
    proc = subprocess.run(
        [str(BUILD_BINARIES_SH), "--check"], capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        pytest.fail(proc.stderr.strip() or "hack/build-binaries.sh --check failed", pytrace=False)
    return Path(proc.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    bin_dir = built_binaries()
    given = os.environ.get("OPERATOR_RUNNER_KUBECONFIG")
    if given:
        yield Cluster(name="(given)", kubeconfig=Path(given), bin_dir=bin_dir)
        return
    name = f"ort-{os.getpid()}-{uuid.uuid4().hex[:6]}"
    previous = signal.signal(signal.SIGTERM, _sigterm_as_interrupt)
    try:
        subprocess.run([str(CLUSTER_SH), "up", name], check=True)
        kubeconfig = subprocess.run(
            [str(CLUSTER_SH), "kubeconfig", name], check=True, capture_output=True, text=True
        ).stdout.strip()
        yield Cluster(name=name, kubeconfig=Path(kubeconfig), bin_dir=bin_dir)
    finally:
        subprocess.run([str(CLUSTER_SH), "down", name], check=False)
        signal.signal(signal.SIGTERM, previous)


# The kit's fixtures, for every integration test (imported last: the kit uses Cluster above).
from .kit.namespaces import namespace  # noqa: E402, F401
from .kit.realnode import real_cluster  # noqa: E402, F401
