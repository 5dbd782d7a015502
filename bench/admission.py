#!/usr/bin/env python3
"""Admission webhooks written as Ansible: latency at 1, 10 and 50 requests a second beside a CEL
rule doing a comparable static check, the effect on reconciles, and where a run's time goes.

    .venv/bin/python -m bench.admission --kubeconfig KUBECONFIG [--seconds 10] [--out F.json]
    .venv/bin/python -m bench.admission --breakdown [--runs 20]     # no cluster needed but
                                                                    # $KUBECONFIG for the lookup

A project of its own in a temp folder, two CRDs of bench.operator-runner.dev/v1:

- `Guard`, validated by the role `admit_lookup` (watches.yaml `validate:`): ONE task, the
  answer (`operator_sdk.util.admission`, allowed: false) when one lookup (kubernetes.core.k8s)
  finds the Deployment `spec.target` names: a check only the cluster can answer;
- `CelGuard`, the same schema with a CEL rule (`x-kubernetes-validations`) that refuses
  `spec.target == 'taken'`: a comparable check of the object alone, the floor (the API server
  does it in process).

Each request is a server-side dry-run create (`?dryRun=All`: admitted, validated, not stored)
of a CR whose target is free (allowed), sent open-loop at the rate (1/s for max(--seconds, 20)
requests' worth, else --seconds of 10/s and 50/s) from a thread pool, and timed from send to
answer: p50, p99, and how many were refused or failed (at 50/s a 2-CPU machine cannot run 50
Ansible runs a second: requests wait for a run slot, and those past the webhook's deadline are
refused per failurePolicy Fail). Reconcile latency: create -> Successful of a `Probe` CR (a
one-task role), 5 times with no admission load, 5 times while Guard admissions run at 10/s.
The operator runs as `make run` runs it (the warm executor, --webhook-bind-address on
127.0.0.1), with `--webhook-configuration-name` of its own and WATCH_NAMESPACE.

`--breakdown` times one admission run (the same role) on the executor directly, each way:
ansible-runner's run (the reconcile path), a quick run (no ansible-runner), a quick run whose
job was started ahead, and that with the lookup plugin and its client loaded ahead; and the
stages of the last (job events' timestamps): vars handed over -> playbook start -> task
start -> task result -> exit.

Without --breakdown, the table is also written as the bench's record (bench/record.py).
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import datetime
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from functools import partial
from pathlib import Path
from typing import Any

from . import record
from .admission_project import GROUP, crd, write_project
from .cluster import established
from .harness import wait_until

RATES = (1, 10, 50)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


class Load:
    """Dry-run creates at a rate, open loop, from a thread pool."""

    def __init__(self, api: Any, namespace: str, plural: str, kind: str) -> None:
        from kubernetes import client

        self.custom = client.CustomObjectsApi(api)
        self.namespace, self.plural, self.kind = namespace, plural, kind

    def one(self) -> tuple[float, str]:
        from kubernetes.client.exceptions import ApiException

        body = {
            "apiVersion": f"{GROUP}/v1",
            "kind": self.kind,
            "metadata": {"generateName": "g-"},
            "spec": {"target": "free"},
        }
        started = time.monotonic()
        try:
            self.custom.create_namespaced_custom_object(
                GROUP, "v1", self.namespace, self.plural, body, dry_run="All"
            )
            outcome = "allowed"
        except ApiException as err:
            outcome = "refused" if err.status in (400, 403, 422) else f"error {err.status}"
        return time.monotonic() - started, outcome

    def run(self, rate: float, count: int) -> dict[str, Any]:
        results: list[tuple[float, str]] = []
        with concurrent.futures.ThreadPoolExecutor(max_workers=96) as pool:
            futures = []
            start = time.monotonic()
            for i in range(count):
                delay = start + i / rate - time.monotonic()
                if delay > 0:
                    time.sleep(delay)
                futures.append(pool.submit(self.one))
            results = [f.result() for f in futures]
        seconds = [s for s, _ in results]
        outcomes: dict[str, int] = {}
        for _, outcome in results:
            outcomes[outcome] = outcomes.get(outcome, 0) + 1
        return {
            "rate": rate,
            "requests": count,
            "p50": round(percentile(seconds, 0.5), 3),
            "p99": round(percentile(seconds, 0.99), 3),
            "max": round(max(seconds), 3),
            "outcomes": outcomes,
        }


def tree_pss(root: int) -> float:
    """MiB of PSS of `root` and every process under it (/proc/*/smaps_rollup)."""
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    total, todo = 0, [root]
    while todo:
        pid = todo.pop()
        todo += children.get(pid, [])
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def reconcile_latency(api: Any, namespace: str, n: int, tag: str) -> list[float]:
    from kubernetes import client

    custom = client.CustomObjectsApi(api)
    seconds = []
    for i in range(n):
        name = f"probe-{tag}-{i}"
        started = time.monotonic()
        body = {"apiVersion": f"{GROUP}/v1", "kind": "Probe", "metadata": {"name": name}}
        custom.create_namespaced_custom_object(GROUP, "v1", namespace, "probes", body)

        def successful(name: str = name) -> bool:
            obj = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "probes", name)
            conditions = (obj.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Successful" and c["status"] == "True" for c in conditions)

        wait_until(successful, 60, f"{name} Successful", interval=0.02)
        seconds.append(time.monotonic() - started)
        time.sleep(0.5)
    return seconds


def measure(kubeconfig: Path, work: Path, seconds: float) -> dict[str, Any]:
    from kubernetes import client, config

    watches = write_project(work)
    api = config.new_client_from_config(config_file=str(kubeconfig))
    ext = client.ApiextensionsV1Api(api)
    core = client.CoreV1Api(api)
    for definition in (crd("Guard"), crd("CelGuard", cel=True), crd("Probe")):
        try:
            ext.create_custom_resource_definition(definition)
        except client.exceptions.ApiException as err:
            if err.status != 409:
                raise
    for name in ("guards", "celguards", "probes"):
        wait_until(partial(established, ext, f"{name}.{GROUP}"), 30, f"CRD {name}")
    namespace = f"admission-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    name = f"bench-{uuid.uuid4().hex[:8]}"
    environ = {
        **os.environ,
        "KUBECONFIG": str(kubeconfig),
        "WATCH_NAMESPACE": namespace,
        "ANSIBLE_GATHERING": "explicit",
    }
    exe = Path(sys.executable).parent / "operator-runner"
    log_path = work / "operator.log"
    command = [
        str(exe), "run", f"--watches-file={watches}", "--log-format=json",
        f"--artifacts-dir={work / 'artifacts'}", "--metrics-bind-address=0",
        "--health-probe-bind-address=0", "--role-metrics-bind-address=0",
        "--webhook-bind-address=127.0.0.1:0", f"--webhook-configuration-name={name}",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environ)
    result: dict[str, Any] = {"log": str(log_path)}
    try:
        wait_until(lambda: "served for the API server" in log_path.read_text(), 120, "the webhooks")
        guard, cel = (
            Load(api, namespace, "guards", "Guard"),
            Load(api, namespace, "celguards", "CelGuard"),
        )
        wait_until(lambda: guard.one()[1] == "allowed", 120, "the first admission")  # warm
        for _ in range(5):
            guard.one()
        rows = []
        for rate in RATES:
            count = int(max(20, rate * seconds))
            for label, load in (("role (one lookup)", guard), ("CEL rule", cel)):
                row = load.run(rate, count)
                row["webhook"] = label
                rows.append(row)
                print(json.dumps(row), flush=True)
                time.sleep(3)
        result["latency"] = rows
        result["pss_mib_webhooks_warm"] = tree_pss(proc.pid)
        idle = reconcile_latency(api, namespace, 5, "idle")
        stop = threading.Event()

        def background() -> None:
            while not stop.is_set():
                guard.run(10, 10)

        thread = threading.Thread(target=background, daemon=True)
        thread.start()
        time.sleep(2)
        busy = reconcile_latency(api, namespace, 5, "busy")
        stop.set()
        thread.join(timeout=60)
        result["reconcile"] = {
            "idle_p50": round(statistics.median(idle), 3),
            "under_10rps_admissions_p50": round(statistics.median(busy), 3),
            "idle": [round(s, 3) for s in idle],
            "busy": [round(s, 3) for s in busy],
        }
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        core.delete_namespace(namespace)
        api.close()
    return result


def breakdown(runs: int) -> dict[str, Any]:
    """One admission run on the executor, each way (see the module doc)."""
    from runner.ansible import quickrun
    from runner.ansible.executor import Executor
    from runner.ansible.interface import LogEvents, RunRequest, role_playbook_text
    from runner.ansible.warm.jobenv import WARM_LOOKUPS_ENV

    kubeconfig = os.environ["KUBECONFIG"]
    work = Path(tempfile.mkdtemp(prefix="admission-breakdown-"))
    write_project(work)
    playbook = work / "validate.yml"
    playbook.write_text(role_playbook_text("admit_lookup", skip_facts=True))
    extra = "ansible_operator_meta: {name: g, namespace: default}\ntarget: free\n"
    env = {"KUBECONFIG": kubeconfig, "K8S_AUTH_KUBECONFIG": kubeconfig}

    async def go() -> dict[str, Any]:
        executor = Executor([work / "roles"], work / "tmp", warm=True, warm_idle_timeout=0)
        times: dict[str, list[float]] = {
            k: [] for k in ("runner", "quick", "ahead", "ahead+lookup")
        }
        stages: list[list[float]] = []
        attempt = await asyncio.to_thread(executor._warm.attempt)
        try:
            for i in range(runs + 1):
                started = time.monotonic()
                request = RunRequest(
                    private_dir=work / "private", ident=f"r{i}", playbook=playbook,
                    extravars_text=extra, envvars=env, log_events=LogEvents.NOTHING,
                )  # fmt: skip
                result = await asyncio.to_thread(executor.run_sync, request)
                assert result.ok, result.stdout_tail
                times["runner"].append(time.monotonic() - started)
                for label, job_env, ahead in (
                    ("quick", env, False),
                    ("ahead", env, True),
                    ("ahead+lookup", {**env, WARM_LOOKUPS_ENV: "kubernetes.core.k8s"}, True),
                ):
                    spec = executor._quick_spec(attempt, playbook, job_env, [])
                    job = None
                    if ahead:
                        job = await quickrun.QuickJob.start(spec, executor.run_tmp, attempt)
                        await asyncio.sleep(1.0)  # started ahead: ready before the request
                    started = time.monotonic()
                    if job is None:
                        job = await quickrun.QuickJob.start(spec, executor.run_tmp, attempt)
                    handed = time.time()
                    await job._hand_over(extra)
                    await job.process.wait()
                    ended = time.time()
                    times[label].append(time.monotonic() - started)
                    if label == "ahead+lookup":
                        events = {
                            e["event"]: datetime.datetime.fromisoformat(e["created"])
                            .replace(tzinfo=datetime.UTC)
                            .timestamp()
                            for e in quickrun.job_events(job.folder)
                        }
                        result_at = events.get("runner_on_skipped", events.get("runner_on_ok"))
                        stages.append(
                            [
                                events["playbook_on_start"] - handed,
                                events["playbook_on_task_start"] - events["playbook_on_start"],
                                (result_at or 0) - events["playbook_on_task_start"],
                                ended - (result_at or ended),
                            ]
                        )
                    shutil.rmtree(job.folder, ignore_errors=True)
        finally:
            attempt.abandon()
            executor.close()
        summary: dict[str, Any] = {
            label: {"p50": round(statistics.median(v[1:]), 3), "min": round(min(v[1:]), 3)}
            for label, v in times.items()
        }
        names = ("vars -> playbook start", "-> task start", "-> task result", "-> exit")
        summary["stages_p50"] = {
            name: round(statistics.median(s[j] for s in stages[1:]), 3)
            for j, name in enumerate(names)
        }
        return summary

    try:
        return asyncio.run(go())
    finally:
        shutil.rmtree(work, ignore_errors=True)


def table(result: dict[str, Any]) -> record.Table:
    rows: list[list[record.Value]] = [
        [
            f"{row['rate']}/s",
            row["webhook"],
            round(row["p50"] * 1000),
            round(row["p99"] * 1000),
            round(row["max"] * 1000),
            ", ".join(f"{k} {v}" for k, v in sorted(row["outcomes"].items())),
        ]
        for row in result["latency"]
    ]
    columns = ["rate", "webhook", "p50 ms", "p99 ms", "max ms", "outcomes"]
    return record.Table("dry-run creates", columns, rows)


def notes(result: dict[str, Any]) -> list[str]:
    rec = result["reconcile"]
    return [
        f"operator process tree, webhooks warm: {result['pss_mib_webhooks_warm']} MiB PSS",
        f"reconcile create -> Successful p50: {rec['idle_p50']:.2f} s idle, "
        f"{rec['under_10rps_admissions_p50']:.2f} s while admissions run at 10/s",
    ]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--seconds", type=float, default=10.0, help="of load at 10/s and 50/s")
    parser.add_argument("--breakdown", action="store_true", help="time one run, each way")
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument("--out", type=Path, default=None)
    args = parser.parse_args()
    if not args.kubeconfig:
        parser.error("--kubeconfig or $KUBECONFIG is required (make cluster; make -s kubeconfig)")
    os.environ["KUBECONFIG"] = str(args.kubeconfig)
    if args.breakdown:
        result = breakdown(args.runs)
        print(json.dumps(result, indent=1))
    else:
        work = Path(tempfile.mkdtemp(prefix="admission-bench-"))
        try:
            result = measure(args.kubeconfig, work, args.seconds)
        except TimeoutError as err:
            print(f"admission: {err}; operator log: {work / 'operator.log'}", file=sys.stderr)
            return 1
        print("\n".join([record.text(table(result)), "", *notes(result)]))
        record.write("admission", "admission", "", [table(result)], notes(result))
    if args.out:
        args.out.write_text(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
