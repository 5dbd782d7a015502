"""What one reconcile costs: wall and CPU seconds, per executor, for two roles; and RSS.

    python -m bench.reconcile_cost --kubeconfig K [--runs 10] [--crs 100]

For each executor (warm, plain) and role (trivial: one debug task; five: five
kubernetes.core.k8s ConfigMaps): start the operator, reconcile one CR `--runs` times (a spec
change each time, waiting for Successful at the new generation), and read the CPU seconds of
the operator's whole process tree (its own, its live descendants', and those they reaped)
before and after. Then RSS of the tree idle, and with `--crs` trivial CRs converged.
Prints a table and writes it as the bench's record (bench/record.py); --json writes the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from kubernetes import client, config

from . import record
from .cluster import ANY_OBJECT, crd_body, crd_version, established
from .harness import BENCH, wait_until

GROUP = "cost.operator-runner.dev"
ROLES = {"Trivial": "one debug task", "Five": "five kubernetes.core.k8s tasks"}
TICK = os.sysconf("SC_CLK_TCK")


def tree(root: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                stat = Path(f"/proc/{entry}/stat").read_text()
            except OSError:
                continue
            ppid = int(stat[stat.rindex(")") + 2 :].split()[1])
            children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [root]
    while todo:
        pid = todo.pop()
        out.append(pid)
        todo.extend(children.get(pid, []))
    return out


def cpu_seconds(root: int) -> float:
    total = 0
    for pid in tree(root):
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += sum(int(f) for f in fields[11:15])  # utime stime cutime cstime
    return total / TICK


def rss_mb(root: int) -> float:
    total = 0
    for pid in tree(root):
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


def crd(kind: str) -> dict[str, Any]:
    return crd_body(GROUP, kind, [crd_version("v1", ANY_OBJECT)])


def successful(
    custom: client.CustomObjectsApi, ns: str, plural: str, name: str, generation: int
) -> bool:
    obj = custom.get_namespaced_custom_object(GROUP, "v1", ns, plural, name)
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c["type"] == "Successful" and c["status"] == "True":
            return bool(c.get("observedGeneration") == generation)
    return False


def start_operator(
    kubeconfig: str, ns: str, watches: Path, executor: str, work: Path, *extra: str
) -> subprocess.Popen[bytes]:
    """operator-runner on `ns` with `watches`, JSON log in WORK/operator.log, artifacts in
    WORK/artifacts, no metrics or probe endpoints (also used by bench/breakdown.py)."""
    with (work / "operator.log").open("wb") as log:
        return subprocess.Popen(
            [
                str(Path(sys.executable).parent / "operator-runner"),
                "run",
                f"--watches-file={watches}",
                f"--executor={executor}",
                f"--artifacts-dir={work / 'artifacts'}",
                "--metrics-bind-address=0",
                "--health-probe-bind-address=0",
                "--role-metrics-bind-address=127.0.0.1:0",
                "--webhook-bind-address=0",  # a reconcile's cost: no admission runs
                "--log-format=json",
                # every run's "ran reconcile" line (at info only runs that changed something log
                # it), which is how runs are counted here
                "--zap-log-level=debug",
                *extra,
            ],
            env={**os.environ, "KUBECONFIG": kubeconfig, "WATCH_NAMESPACE": ns},
            stdout=log,
            stderr=subprocess.STDOUT,
        )


def measure(kubeconfig: str, executor: str, runs: int, crs: int) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=kubeconfig)
    custom, core = client.CustomObjectsApi(api), client.CoreV1Api(api)
    ns = f"cost-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    tmp = Path(tempfile.mkdtemp(prefix="cost-"))
    proc = start_operator(
        kubeconfig, ns, BENCH / "watches-cost.yaml", executor, tmp, "--ansible-verbosity=0"
    )
    result: dict[str, Any] = {"executor": executor}
    try:
        time.sleep(5)  # idle: after start-up, nothing to do (a figure, not a condition)
        result["rss_idle_mb"] = round(rss_mb(proc.pid), 1)
        for kind in ("Trivial", "Five"):
            plural = kind.lower() + "s"
            name = f"one-{kind.lower()}"
            custom.create_namespaced_custom_object(
                GROUP,
                "v1",
                ns,
                plural,
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": kind,
                    "metadata": {"name": name},
                    "spec": {"value": "0"},
                },
            )
            warmed = partial(successful, custom, ns, plural, name, 1)
            wait_until(warmed, 120, f"{name} Successful")  # warms up
            walls, cpu_before = [], cpu_seconds(proc.pid)
            for i in range(1, runs + 1):
                start = time.monotonic()
                custom.patch_namespaced_custom_object(
                    GROUP, "v1", ns, plural, name, {"spec": {"value": str(i)}}
                )
                wait_until(
                    partial(successful, custom, ns, plural, name, i + 1),
                    120,
                    f"{name} Successful at generation {i + 1}",
                )
                walls.append(time.monotonic() - start)
            cpu = (cpu_seconds(proc.pid) - cpu_before) / runs
            result[kind] = {
                "wall_p50_s": round(statistics.median(walls), 3),
                "cpu_per_reconcile_s": round(cpu, 3),
            }
        for i in range(crs):
            custom.create_namespaced_custom_object(
                GROUP,
                "v1",
                ns,
                "trivials",
                {
                    "apiVersion": f"{GROUP}/v1",
                    "kind": "Trivial",
                    "metadata": {"name": f"m-{i}"},
                    "spec": {},
                },
            )
        for i in range(crs):
            done = partial(successful, custom, ns, "trivials", f"m-{i}", 1)
            wait_until(done, 600, f"m-{i} Successful")
        result[f"rss_{crs}_crs_mb"] = round(rss_mb(proc.pid), 1)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        core.delete_namespace(ns)
    return result


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--crs", type=int, default=100)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    api = config.new_client_from_config(config_file=args.kubeconfig)
    ext = client.ApiextensionsV1Api(api)
    for kind in ("Trivial", "Five"):
        try:
            ext.create_custom_resource_definition(crd(kind))
        except client.exceptions.ApiException as err:
            if err.status != 409:
                raise
    for kind in ("Trivial", "Five"):
        name = f"{kind.lower()}s.{GROUP}"
        wait_until(partial(established, ext, name), 60, f"the CRD {name} Established")
    rows = [
        measure(args.kubeconfig, executor, args.runs, args.crs) for executor in ("warm", "plain")
    ]
    table = record.Table(
        f"{args.runs} reconciles of each role; the operator's process tree",
        ["executor", "role", "wall p50 s", "CPU s per reconcile", "RSS idle MB", "RSS with CRs MB"],
        [
            [
                row["executor"],
                ROLES[kind],
                row[kind]["wall_p50_s"],
                row[kind]["cpu_per_reconcile_s"],
                row["rss_idle_mb"],
                row[f"rss_{args.crs}_crs_mb"],
            ]
            for row in rows
            for kind in ("Trivial", "Five")
        ],
    )
    print(record.text(table))
    record.write(
        "reconcile_cost",
        "reconcile_cost",
        "",
        [table],
        [f"RSS with CRs: with {args.crs} one-task CRs converged"],
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
