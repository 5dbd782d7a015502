"""`operator-runner run --watch-roles`: an edit of a role re-runs its (healthy) CR, a burst of
saves once; measured by bench/live_reload.py, whose edit-to-result seconds this prints."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from .conftest import REPO, Cluster

pytestmark = pytest.mark.integration


@pytest.mark.timeout(300)
def test_an_edit_of_the_role_is_seen_on_the_live_cr(cluster: Cluster, tmp_path: Path) -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "bench.live_reload", "--kubeconfig", str(cluster.kubeconfig),
         "--rounds", "3", "--work", str(tmp_path / "work")],
        cwd=REPO, capture_output=True, text=True, timeout=280,
        env={**os.environ, "BENCH_RECORD": "0"},  # a test run leaves the checkout's records alone
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr[-3000:]
    print(proc.stdout)
    result = json.loads(next(x for x in reversed(proc.stdout.splitlines()) if x.startswith("{")))
    assert len(result["seconds"]) == 3
    assert result["reruns"] == 3, "one re-run per burst of saves"
    assert result["median"] < 10, result  # the goal is < 3 s; this machine is shared
