#!/usr/bin/env python3
"""Edit-to-result of `operator-runner run --watch-roles`: how long from saving a role to seeing
its effect on a live CR.

    .venv/bin/python -m bench.live_reload --kubeconfig KUBECONFIG [--rounds 5]

A project of its own in a temp folder: a CRD `Reload` (bench.operator-runner.dev/v1), a role of
one task (a ConfigMap whose `data.value` is a literal in the task), the operator running with
--watch-roles and the warm executor, one CR, Successful. Each round rewrites the task with a new
literal (a burst of three saves, as editors do) and measures the time until the ConfigMap holds
it. Prints each round's seconds and the median, and writes them as the bench's record
(bench/record.py); exits 1 when a round times out.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
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
from .harness import wait_until

GROUP = "bench.operator-runner.dev"
TASK = """---
- name: Write the value
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{{{ ansible_operator_meta.name }}}}-value"
        namespace: "{{{{ ansible_operator_meta.namespace }}}}"
      data:
        value: "{value}"
"""
CRD = crd_body(GROUP, "Reload", [crd_version("v1", ANY_OBJECT)])


def _kubectl_apply(api: client.ApiClient, obj: dict[str, Any]) -> None:
    ext = client.ApiextensionsV1Api(api)
    try:
        ext.create_custom_resource_definition(obj)
    except client.exceptions.ApiException as err:
        if err.status != 409:
            raise
    wait_until(partial(established, ext, obj["metadata"]["name"]), 30, "the CRD")


def measure(kubeconfig: Path, work: Path, rounds: int = 5, timeout: float = 60.0) -> dict[str, Any]:
    """Run the scenario; {"seconds": [...], "median": s, "reruns": n, "log": path}."""
    role = work / "roles" / "reload" / "tasks" / "main.yml"
    role.parent.mkdir(parents=True)
    role.write_text(TASK.format(value="v0"))
    watches = work / "watches.yaml"
    watches.write_text(f"- version: v1\n  group: {GROUP}\n  kind: Reload\n  role: reload\n")
    api = config.new_client_from_config(config_file=str(kubeconfig))
    core = client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    _kubectl_apply(api, CRD)
    namespace = f"reload-{uuid.uuid4().hex[:6]}"
    core.create_namespace({"metadata": {"name": namespace}})
    log_path = work / "operator.log"
    environ = {**os.environ, "KUBECONFIG": str(kubeconfig), "WATCH_NAMESPACE": namespace}
    exe = Path(sys.executable).parent / "operator-runner"
    command = [
        str(exe), "run", f"--watches-file={watches}", "--watch-roles", "--log-format=json",
        f"--artifacts-dir={work / 'artifacts'}", "--metrics-bind-address=0",
        "--health-probe-bind-address=0", "--role-metrics-bind-address=127.0.0.1:0",
        "--ansible-verbosity=0",
    ]  # fmt: skip
    with log_path.open("wb") as log:
        proc = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=environ)
    seconds: list[float] = []
    try:
        custom.create_namespaced_custom_object(
            GROUP, "v1", namespace, "reloads",
            {"apiVersion": f"{GROUP}/v1", "kind": "Reload", "metadata": {"name": "r"}, "spec": {}},
        )  # fmt: skip

        def value() -> str | None:
            try:
                cm = core.read_namespaced_config_map("r-value", namespace)
            except client.exceptions.ApiException:
                return None
            return (cm.data or {}).get("value")

        def successful() -> bool:
            obj = custom.get_namespaced_custom_object(GROUP, "v1", namespace, "reloads", "r")
            conditions = (obj.get("status") or {}).get("conditions") or []
            return any(c["type"] == "Successful" and c["status"] == "True" for c in conditions)

        def holds(expected: str) -> bool:
            return value() == expected

        wait_until(partial(holds, "v0"), 120, "the first run", interval=0.02)
        wait_until(successful, 30, "Successful", interval=0.02)
        for i in range(1, rounds + 1):
            time.sleep(1.5)  # apart from the previous round (rate limit, the run's own writes)
            started = time.monotonic()
            for _ in range(3):  # a burst of saves: one re-run
                role.write_text(TASK.format(value=f"v{i}"))
                time.sleep(0.05)
            wait_until(partial(holds, f"v{i}"), timeout, f"round {i}", interval=0.02)
            seconds.append(time.monotonic() - started)
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=60)
        core.delete_namespace(namespace)
        api.close()
    reruns = sum(
        1 for line in log_path.read_text().splitlines() if "re-running" in line and "Reload" in line
    )
    return {
        "seconds": [round(s, 3) for s in seconds],
        "median": round(statistics.median(seconds), 3),
        "reruns": reruns,
        "log": str(log_path),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", type=Path, default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--work", type=Path, default=None)
    args = parser.parse_args()
    if not args.kubeconfig:
        parser.error("--kubeconfig or $KUBECONFIG is required (make cluster; make -s kubeconfig)")
    work = args.work or Path(tempfile.mkdtemp(prefix="live-reload-"))
    try:
        result = measure(args.kubeconfig, work, args.rounds)
    except TimeoutError as err:
        print(f"live_reload: {err}; operator log: {work / 'operator.log'}", file=sys.stderr)
        return 1
    for i, s in enumerate(result["seconds"], 1):
        print(f"round {i}: {s:.2f} s from the edit to the new value on the live CR's ConfigMap")
    print(
        f"median edit-to-result: {result['median']:.2f} s ({result['reruns']} re-runs for "
        f"{len(result['seconds'])} bursts of 3 saves)"
    )
    print(json.dumps(result))
    rounds = [[i, s] for i, s in enumerate(result["seconds"], 1)]
    record.write(
        "live_reload",
        "live_reload",
        "",
        [record.Table("", ["round", "edit -> new value on the CR's ConfigMap, s"], rounds)],
        [
            f"median {result['median']:.2f} s; {result['reruns']} re-runs for "
            f"{len(result['seconds'])} bursts of 3 saves"
        ],
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
