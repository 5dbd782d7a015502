"""Smoke test of the benchmark harness (bench/, `make bench`): the latency scenario with two CRs,
operator-runner only (no peer), on the test cluster. Checks that the harness starts the operator
under its launcher, sees the CRs turn Successful, samples the process tree and writes its JSON,
and that the operator gives its warm executors back once idle.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, Cluster

pytestmark = pytest.mark.integration


@pytest.mark.timeout(240)
def test_latency_scenario_for_ours(cluster: Cluster, tmp_path: Path) -> None:
    out = tmp_path / "result.json"
    proc = subprocess.run(
        [
            sys.executable, "-m", "bench.run",
            "--kubeconfig", str(cluster.kubeconfig),
            "--peer", "none",
            "--scenarios", "latency",
            "--latency", "2",
            "--cap", "180",
            "--work", str(tmp_path / "work"),
            "--out", str(out),
            "--ours-arg=--warm-idle-timeout=5s",  # the steady idle memory within seconds
        ],
        cwd=REPO, capture_output=True, text=True, timeout=230,
        env={**os.environ, "BENCH_RECORD": "0"},  # a test run leaves the checkout's records alone
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    data = json.loads(out.read_text())
    ours = data["results"]["latency"]["ours"]
    assert "dnf" not in ours, ours.get("dnf")
    assert len(ours["latency_s"]) == 2
    assert 0 < ours["p50_s"] <= ours["p95_s"] < 180
    assert ours["idle_rss_mib"] > 10  # the tree was sampled: a Python operator is bigger than that
    assert ours["runs"] >= 2  # ansible-playbook processes were counted
    assert ours["rusage_children_at_exit"]["rc"] == 0  # stopped cleanly through the launcher
    assert any(line.startswith("latency p50") for line in data["table"])
    # its CRs deleted and 5 s without a run, the operator stopped its warm executors
    assert ours["idle_settled_nprocs"] == 1
    assert 0 < ours["idle_settled_rss_mib"] < ours["idle_rss_mib"]
