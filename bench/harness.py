"""What every bench module shares: where the repository is, the log line, the sizes of each
scale, DidNotFinish and MiB."""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"

SCALES: dict[str, dict[str, Any]] = {
    # latency CRs, burst CRs, scale CRs, hard cap per scenario and operator (s), the least
    # and greatest reconcile period of the scale CRs (s), the CRs of the probe that estimates
    # it, and the resync runs measured (None: all N)
    "small": {
        "latency": 2,
        "burst": 6,
        "scale": 10,
        "cap": 300,
        "min_period": 30,
        "probe": 3,
        "max_period": 300,
        "resync_sample": None,
    },
    "medium": {
        "latency": 10,
        "burst": 50,
        "scale": 100,
        "cap": 1500,
        "min_period": 120,
        "probe": 10,
        "max_period": 1200,
        "resync_sample": None,
    },
    "full": {
        "latency": 20,
        "burst": 200,
        "scale": 1000,
        "cap": 3600,
        "min_period": 300,
        "probe": 50,
        "max_period": 3000,
        "resync_sample": 250,  # the peer's full resync of 1000: ~36 min after a ~45 min period
    },
}


def log(msg: str) -> None:
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class DidNotFinish(Exception):
    pass


MiB = 1024 * 1024


def wait_until(
    probe: Callable[[], object], timeout: float, what: str, interval: float = 0.05
) -> None:
    """Returns once `probe()` is true; TimeoutError naming `what` after `timeout` s."""
    deadline = time.monotonic() + timeout
    while not probe():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:g} s waiting for {what}")
        time.sleep(interval)
