"""Where one EchoFlask reconcile's CPU goes, by process, on the warm executor.

    python -m bench.breakdown --kubeconfig K [--runs 10] [--executor warm|plain] [--idle S]

Starts operator-runner with the repository's watches.yaml on a fresh namespace, creates one
EchoFlask CR (size 1) with a reconcile period of 1 s, lets it settle, then reads /proc at the
end of each of the next `--runs` runs (between runs, so every process of a run has been
reaped) and prints the CPU seconds per run of:

- the operator process (kopf, the queue, ansible-runner's event handling, the proxy);
- the `ansible-playbook` client processes it starts (one per run);
- the runs: the forked `ansible-playbook`, its task workers and the shells they start (with the
  module clients), reaped by the playbook server (plain executor: reaped by the operator);
- the module jobs (one per module task), reaped by the module server;
- the servers themselves (accepting and forking).
Where one server serves both kinds (the warm executor since issue 17), runs and module jobs
are reaped by the same process and come as one figure.

Then the memory of the operator's process tree, RSS and PSS (smaps_rollup) per process: warm
(right after the last run), and idle (the CR deleted, the warm executors stopped after
`--idle` seconds without a run, the operator's `--warm-idle-timeout`). The tables are also
written as the bench's record, breakdown-<executor> (bench/record.py).

With OPERATOR_RUNNER_PROFILE=PREFIX in the environment every playbook job, task worker and
module job also writes a cProfile file (see bench/README.md).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import uuid
from functools import partial
from pathlib import Path

import yaml
from kubernetes import client, config

from . import record
from .cluster import established
from .harness import REPO, wait_until
from .reconcile_cost import start_operator

TICK = os.sysconf("SC_CLK_TCK")
GROUP, VERSION, PLURAL = "swallowlab.com", "v1alpha1", "echoflasks"


def stat(pid: int) -> tuple[float, float]:
    """(own CPU, reaped children's CPU) of a process, in seconds."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    utime, stime, cutime, cstime = (int(x) for x in fields[11:15])
    return (utime + stime) / TICK, (cutime + cstime) / TICK


def children(pid: int) -> list[int]:
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                ppid = int(Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            if ppid == pid:
                found.append(int(entry))
    return found


def snapshot(operator: int) -> dict[str, float]:
    own, reaped = stat(operator)
    out = {"operator": own, "playbook clients (reaped by the operator)": reaped}
    for child in children(operator):
        try:
            cmdline = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if b"runner.ansible.warm.server.forkserver" in cmdline:
            at = cmdline.index(b"runner.ansible.warm.server.forkserver") + 1
            kinds = {k.decode() for k in cmdline[at:-1:2]}  # KIND SOCKET [KIND SOCKET]
            server_own, jobs = stat(child)
            if kinds == {"playbook", "module"}:  # one server for both (the same reaper)
                label = "runs and module jobs (one server)"
            elif kinds == {"playbook"}:
                label = "runs: ansible-playbook, task workers, shells"
            else:
                label = "module jobs"
            out[label] = jobs
            out[f"{'+'.join(sorted(kinds))} server itself"] = server_own
    return out


def memory(root: int) -> list[tuple[str, float, float]]:
    """(process, RSS MiB, PSS MiB) of every process in the tree under `root`, root first."""
    out = []
    todo = [root]
    while todo:
        pid = todo.pop(0)
        todo.extend(children(pid))
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            fields = dict(
                line.split(":", 1)
                for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
            )
        except OSError:
            continue
        name = "operator" if pid == root else b" ".join(cmdline[1:4]).decode(errors="replace")
        rss, pss = (int(fields[k].split()[0]) / 1024 for k in ("Rss", "Pss"))
        out.append((name[:50], rss, pss))
    return out


def print_memory(title: str, rows: list[tuple[str, float, float]]) -> None:
    print(f"{title:<50} {'RSS MiB':>8} {'PSS MiB':>8}")
    for name, rss, pss in rows:
        print(f"  {name:<48} {rss:>8.1f} {pss:>8.1f}")
    total_rss, total_pss = sum(r[1] for r in rows), sum(r[2] for r in rows)
    print(f"  {'tree':<48} {total_rss:>8.1f} {total_pss:>8.1f}")


def runs_done(log: Path) -> list[float]:
    """Durations of the runs finished so far (from the operator's JSON log)."""
    durations = []
    for line in log.read_text(errors="replace").splitlines():
        try:
            record = json.loads(line)
        except ValueError:
            continue
        message = str(record.get("msg", ""))
        if message.startswith("ran reconcile in "):
            durations.append(float(message.split()[3]))
    return durations


def more_runs_than(log: Path, count: int) -> bool:
    return len(runs_done(log)) > count


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--executor", choices=("warm", "plain"), default="warm")
    parser.add_argument("--idle", type=float, default=10.0, help="--warm-idle-timeout, s")
    args = parser.parse_args()
    api = config.new_client_from_config(config_file=args.kubeconfig)
    ext, core = client.ApiextensionsV1Api(api), client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    crd = yaml.safe_load((REPO / "crds" / f"{GROUP}_{PLURAL}.yaml").read_text())
    try:
        ext.create_custom_resource_definition(crd)
    except client.exceptions.ApiException as err:
        if err.status != 409:
            raise
    name = f"{PLURAL}.{GROUP}"
    wait_until(partial(established, ext, name), 60, f"the CRD {name} Established")
    ns = f"breakdown-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": ns}})
    work = Path(tempfile.mkdtemp(prefix="breakdown-"))
    log = work / "operator.log"
    proc = start_operator(
        args.kubeconfig,
        ns,
        REPO / "watches.yaml",
        args.executor,
        work,
        f"--warm-idle-timeout={args.idle:g}s",
    )
    try:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "EchoFlask",
            "metadata": {
                "name": "breakdown",
                "annotations": {"ansible.sdk.operatorframework.io/reconcile-period": "1s"},
            },
            "spec": {"size": 1},
        }
        custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
        warmup = 4  # creation, the dependents it made, then steady resyncs
        wait_until(
            lambda: proc.poll() is not None or len(runs_done(log)) >= warmup,
            300,
            "the CR to settle",
        )
        if proc.poll() is not None:
            raise SystemExit(f"the operator exited: see {log}")
        rows: list[dict[str, float]] = []
        durations: list[float] = []
        last = None
        for _ in range(args.runs + 1):
            count = len(runs_done(log))
            wait_until(partial(more_runs_than, log, count), 120, "a further run")
            snap = snapshot(proc.pid)  # between runs: the next starts >= 1 s later
            durations.append(runs_done(log)[-1])
            if last is not None:
                rows.append({k: snap.get(k, 0.0) - last.get(k, 0.0) for k in snap})
            last = snap
        warm = memory(proc.pid)
        custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, "breakdown")
        wait_until(lambda: not children(proc.pid), args.idle + 120, "the warm executors to stop")
        idle = memory(proc.pid)
    finally:
        proc.terminate()
        proc.wait(timeout=60)
        core.delete_namespace(ns)
    keys = list(rows[0])
    total = [sum(r.values()) for r in rows]
    print(f"operator-runner --executor={args.executor}: EchoFlask, {len(rows)} runs (resyncs)")
    print(f"{'CPU s per run (mean of the runs)':<50} {'mean':>7} {'min':>7} {'max':>7}")
    for key in keys:
        values = [r[key] for r in rows]
        print(f"{key:<50} {statistics.mean(values):>7.3f} {min(values):>7.3f} {max(values):>7.3f}")
    print(f"{'total':<50} {statistics.mean(total):>7.3f} {min(total):>7.3f} {max(total):>7.3f}")
    print(f"{'wall s per run (the operator log)':<50} {statistics.mean(durations[1:]):>7.3f}")
    print_memory("memory warm (after the last run)", warm)
    print_memory(f"memory idle (no CR, executors stopped after {args.idle:g} s)", idle)
    print(f"operator log: {log}")
    cpu: list[list[record.Value]] = [[key, *spread([r[key] for r in rows])] for key in keys]
    cpu.append(["total", *spread(total)])
    record.write(
        f"breakdown-{args.executor}",
        "breakdown",
        f"--executor={args.executor}",
        [
            record.Table(
                f"CPU s per run, {len(rows)} runs", ["process", "mean", "min", "max"], cpu
            ),
            memory_table("memory warm (after the last run)", warm),
            memory_table(f"memory idle (no CR, executors stopped after {args.idle:g} s)", idle),
        ],
        [f"wall s per run (the operator's log): {statistics.mean(durations[1:]):.3f}"],
    )
    return 0


def spread(values: list[float]) -> list[float]:
    return [round(statistics.mean(values), 3), round(min(values), 3), round(max(values), 3)]


def memory_table(title: str, rows: list[tuple[str, float, float]]) -> record.Table:
    table: list[list[record.Value]] = [
        [name, round(rss, 1), round(pss, 1)] for name, rss, pss in rows
    ]
    table.append(["tree", round(sum(r[1] for r in rows), 1), round(sum(r[2] for r in rows), 1)])
    return record.Table(title, ["process", "RSS MiB", "PSS MiB"], table)


if __name__ == "__main__":
    sys.exit(main())
