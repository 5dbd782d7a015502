"""Where the time of one reconcile goes.

    python -m bench.anatomy ARTIFACTS_DIR                # runs the benchmark made
    python -m bench.anatomy --startup [--python PY ...]  # process start-up costs

From ansible-runner's job events (artifacts/<ident>/job_events/*.json, each with its `created`
time): per run, the time from the first event to `playbook_on_start` (ansible-playbook has
parsed the playbook), from there to the first task, each task's duration (`runner_on_ok` and
friends carry `duration`), and the whole run (first event to `playbook_on_stats`).

--startup measures, for each Python given, the wall and CPU time of the processes every
reconcile starts: `ansible-runner --version`, `ansible-playbook --version`, and the imports a
kubernetes.core module does in its AnsiballZ process (`kubernetes.dynamic`, `kubernetes.client`).
"""

from __future__ import annotations

import argparse
import glob
import json
import random
import resource
import statistics
import subprocess
import sys
import time
from collections import defaultdict
from datetime import datetime
from pathlib import Path
from typing import Any


def _events(run_dir: Path) -> list[dict[str, Any]]:
    evs = []
    for f in glob.glob(str(run_dir / "job_events" / "*.json")):
        try:
            with open(f, encoding="utf-8") as fh:
                evs.append(json.load(fh))
        except (OSError, ValueError):
            pass
    evs.sort(key=lambda e: e.get("counter", 0))
    return evs


def _t(e: dict[str, Any]) -> float:
    return datetime.fromisoformat(e["created"]).timestamp()


def run_profile(run_dir: Path) -> dict[str, Any] | None:
    evs = _events(run_dir)
    if not evs or not any(e.get("event") == "playbook_on_stats" for e in evs):
        return None
    t0 = _t(evs[0])
    out: dict[str, Any] = {"tasks": {}}
    for e in evs:
        kind = e.get("event")
        data = e.get("event_data") or {}
        if kind == "playbook_on_start" and "to_playbook_start_s" not in out:
            out["to_playbook_start_s"] = _t(e) - t0
        if kind == "runner_on_start" and "to_first_task_s" not in out:
            out["to_first_task_s"] = _t(e) - t0
        if kind in ("runner_on_ok", "runner_on_failed", "runner_on_skipped") and "duration" in data:
            out["tasks"][data.get("task", "?")] = float(data["duration"])
        if kind == "playbook_on_stats":
            out["total_s"] = _t(e) - t0
    return out


def summarize_artifacts(root: Path, sample: int = 60) -> dict[str, Any]:
    runs = [Path(p).parent for p in glob.glob(str(root / "**" / "job_events"), recursive=True)]
    random.Random(7).shuffle(runs)
    profiles = [p for p in (run_profile(r) for r in runs[:sample]) if p]
    out: dict[str, Any] = {"runs_found": len(runs), "runs_profiled": len(profiles)}
    if profiles:
        for k in ("to_playbook_start_s", "to_first_task_s", "total_s"):
            vals = [p[k] for p in profiles if k in p]
            if vals:
                out[f"{k}_mean"] = statistics.fmean(vals)
        tasks: dict[str, list[float]] = defaultdict(list)
        for p in profiles:
            for name, d in p["tasks"].items():
                tasks[name].append(d)
        out["task_mean_s"] = {k: statistics.fmean(v) for k, v in tasks.items()}
        out["tasks_sum_mean_s"] = sum(out["task_mean_s"].values())
    return out


def _measure(argv: list[str]) -> dict[str, float]:
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    t = time.monotonic()
    subprocess.run(argv, capture_output=True, check=False)
    wall = time.monotonic() - t
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return {"wall_s": round(wall, 3), "cpu_s": round(cpu, 3)}


def startup(pythons: list[str], repeat: int = 3) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for py in pythons:
        bin_dir = Path(py).parent
        cases = {
            "python -c pass": [py, "-c", "pass"],
            "ansible-runner --version": [str(bin_dir / "ansible-runner"), "--version"],
            "ansible-playbook --version": [str(bin_dir / "ansible-playbook"), "--version"],
            "import kubernetes.client+dynamic (k8s module)": [
                py,
                "-c",
                "import kubernetes.client, kubernetes.dynamic",
            ],
            "import ansible_runner": [py, "-c", "import ansible_runner"],
        }
        res = {}
        for name, argv in cases.items():
            ms = [_measure(argv) for _ in range(repeat)]
            res[name] = {
                "wall_s": min(m["wall_s"] for m in ms),
                "cpu_s": min(m["cpu_s"] for m in ms),
            }
        out[py] = res
    return out


def main() -> int:
    p = argparse.ArgumentParser(prog="python -m bench.anatomy")
    p.add_argument("artifacts", nargs="?", type=Path)
    p.add_argument("--startup", action="store_true")
    p.add_argument("--python", action="append", default=[])
    a = p.parse_args()
    if a.startup:
        print(json.dumps(startup(a.python or [sys.executable]), indent=1))
    if a.artifacts:
        print(json.dumps(summarize_artifacts(a.artifacts), indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
