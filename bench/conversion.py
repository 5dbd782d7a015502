#!/usr/bin/env python3
"""Scenario `conversion`: what a ConversionReview costs, answered by a field map and by a role.

    .venv/bin/python -m bench.conversion --kubeconfig KUBECONFIG [--rounds 30]

The API server asks the CRD's conversion webhook on every read of a version other than the
stored one that its cache cannot serve (a GET), and its watch cache of each such version
converts every write (status too), one object per review. operator-runner answers with
`convert: fields:` in the operator, or with one run of a `convert:` role per review.

Two kinds of two versions (v1alpha1 `spec.size`, stored and watched; v1alpha0 `spec.replicas`):
`Mapped` (`fields:`, the seeds' EchoFlask's) and `Roled` (the seeds' roles/echoflask_convert),
served by one operator (`operator-runner run`, its webhooks on a free port, the warm executor).
Measured, each `--rounds` times after two warm-up rounds:

- a ConversionReview POSTed to the operator's `/convert` over one TLS connection kept alive, as
  the API server sends it, of 1 object and of 100 objects (EchoFlask-shaped, with managedFields
  and status): the webhook's latency, and the operator's CPU per review (its whole process
  tree, from /proc);
- through the API server: a GET of one object in v1alpha0 (converted by the webhook) and in
  v1alpha1 (stored: no webhook), with the Python client.

Prints a table (p50 and p99 in ms, CPU in ms per review), writes it as the bench's record
(bench/record.py) and, with --out, the figures as JSON.
"""

from __future__ import annotations

import argparse
import base64
import http.client
import json
import ssl
import statistics
import tempfile
import time
import urllib.parse
from pathlib import Path
from typing import Any

from kubernetes import client, config

from . import record
from .cluster import ANY_OBJECT, crd_body, crd_version
from .harness import REPO, log
from .operators import RunningOperator, ours_spec
from .results import pct

GROUP = "conversion.bench.operator-runner.dev"
KINDS = {"Mapped": "fields (in the operator)", "Roled": "role (roles/echoflask_convert)"}
WATCHES = f"""---
- version: v1alpha1
  group: {GROUP}
  kind: Mapped
  role: {REPO / "bench" / "roles" / "trivial"}
  convert:
    fields:
      - v1alpha1: spec.size
        v1alpha0: spec.replicas
- version: v1alpha1
  group: {GROUP}
  kind: Roled
  role: {REPO / "bench" / "roles" / "trivial"}
  convert:
    role: {REPO / "roles" / "echoflask_convert"}
"""


def crd(kind: str) -> dict[str, Any]:
    def version(name: str, field: str, storage: bool) -> dict[str, Any]:
        spec = {**ANY_OBJECT, "properties": {field: {"type": "integer"}}}
        schema = {"type": "object", "properties": {"spec": spec, "status": ANY_OBJECT}}
        return crd_version(name, schema, storage)

    conversion = {
        "strategy": "Webhook",
        "webhook": {
            "conversionReviewVersions": ["v1"],
            "clientConfig": {"url": "https://127.0.0.1:1/convert"},
        },
    }
    versions = [version("v1alpha1", "size", True), version("v1alpha0", "replicas", False)]
    return crd_body(GROUP, kind, versions, conversion)


def flask_like(kind: str, i: int) -> dict[str, Any]:
    """An object of the size of a reconciled EchoFlask (annotations, managedFields, status)."""
    name = f"bench-{i}"
    return {
        "apiVersion": f"{GROUP}/v1alpha1",
        "kind": kind,
        "metadata": {
            "name": name,
            "namespace": "bench",
            "uid": f"00000000-0000-0000-0000-{i:012d}",
            "resourceVersion": str(1000 + i),
            "generation": 1,
            "creationTimestamp": "2026-12-04T20:00:00Z",
            "annotations": {
                "kubectl.kubernetes.io/last-applied-configuration": json.dumps(
                    {"apiVersion": f"{GROUP}/v1alpha1", "kind": kind, "spec": {"size": 3}}
                )
            },
            "managedFields": [
                {
                    "manager": "kubectl-client-side-apply",
                    "operation": "Update",
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "time": "2026-12-04T20:00:00Z",
                    "fieldsType": "FieldsV1",
                    "fieldsV1": {"f:spec": {".": {}, "f:size": {}}},
                }
            ],
        },
        "spec": {"size": 3, "image": "takeyan/flask:0.0.3"},
        "status": {
            "nodes": [f"{name}-deployment-5d4f8-{j}" for j in range(3)],
            "readyReplicas": 3,
            "conditions": [
                {
                    "type": t,
                    "status": "True",
                    "reason": t,
                    "message": "",
                    "lastTransitionTime": "2026-12-04T20:00:00Z",
                    "observedGeneration": 1,
                }
                for t in ("Running", "Successful", "Ready")
            ],
        },
    }


class Webhook:
    """The operator's /convert, called as the API server calls it: POSTs over one TLS
    connection, kept alive."""

    def __init__(self, url: str, bundle: bytes) -> None:
        parts = urllib.parse.urlsplit(url)
        self.path = parts.path + "?timeout=30s"
        context = ssl.create_default_context(cadata=bundle.decode())
        self.connection = http.client.HTTPSConnection(
            parts.hostname or "127.0.0.1", parts.port, context=context, timeout=60
        )

    def review(self, kind: str, n: int) -> float:
        body = {
            "apiVersion": "apiextensions.k8s.io/v1",
            "kind": "ConversionReview",
            "request": {
                "uid": "bench",
                "desiredAPIVersion": f"{GROUP}/v1alpha0",
                "objects": [flask_like(kind, i) for i in range(n)],
            },
        }
        data = json.dumps(body).encode()
        started = time.perf_counter()
        self.connection.request(
            "POST", self.path, body=data, headers={"Content-Type": "application/json"}
        )
        response = json.loads(self.connection.getresponse().read())["response"]
        took = time.perf_counter() - started
        if response["result"]["status"] != "Success" or len(response["convertedObjects"]) != n:
            raise SystemExit(f"bench: the review of {n} {kind} failed: {response['result']}")
        return took

    def close(self) -> None:
        self.connection.close()


def stats(values: list[float]) -> dict[str, float | None]:
    return {
        "p50_ms": 1000 * statistics.median(values),
        "p99_ms": (1000 * p) if (p := pct(values, 99)) is not None else None,
    }


def measure(a: argparse.Namespace) -> dict[str, Any]:
    api = config.new_client_from_config(config_file=str(a.kubeconfig))
    ext, core = client.ApiextensionsV1Api(api), client.CoreV1Api(api)
    custom = client.CustomObjectsApi(api)
    for kind in KINDS:
        definition = crd(kind)
        name = definition["metadata"]["name"]
        try:
            current = ext.read_custom_resource_definition(name)
            definition["metadata"]["resourceVersion"] = current.metadata.resource_version
            ext.replace_custom_resource_definition(name, definition)
        except client.exceptions.ApiException as err:
            if err.status != 404:
                raise
            ext.create_custom_resource_definition(definition)
    ns = f"bench-conversion-{int(time.time())}"
    core.create_namespace({"metadata": {"name": ns}})
    work = Path(tempfile.mkdtemp(prefix="bench-conversion-"))
    watches = work / "watches.yaml"
    watches.write_text(WATCHES)
    spec = ours_spec(work, watches, ["--webhook-bind-address=127.0.0.1:0", "--zap-log-level=info"])
    op = RunningOperator(spec, a.kubeconfig, ns, work / "ours")
    results: dict[str, Any] = {"rounds": a.rounds}
    try:
        deadline = time.monotonic() + 120
        url = ""
        while not url:
            if time.monotonic() > deadline or not op.alive():
                raise SystemExit(f"bench: the operator did not serve webhooks:\n{op.log_tail()}")
            cfg = ext.read_custom_resource_definition(f"roleds.{GROUP}").spec.conversion
            found = cfg.webhook.client_config if cfg and cfg.webhook else None
            if found and found.url and not found.url.startswith("https://127.0.0.1:1/"):
                url, bundle = found.url, base64.b64decode(found.ca_bundle)
            else:
                time.sleep(0.2)
        hook = Webhook(url, bundle)
        for kind in KINDS:
            for n in (1, 100):
                for _ in range(2):
                    hook.review(kind, n)  # warm-up: the warm executor, the first run's imports
                cpu0 = op.sampler.now().cpu
                took = [hook.review(kind, n) for _ in range(a.rounds)]
                cpu = (op.sampler.now().cpu - cpu0) / a.rounds
                results[f"webhook_{kind}_{n}"] = {**stats(took), "cpu_ms": 1000 * cpu}
                log(f"{kind}, {n} object(s): {results[f'webhook_{kind}_{n}']}")
            plural = kind.lower() + "s"
            custom.create_namespaced_custom_object(
                GROUP,
                "v1alpha1",
                ns,
                plural,
                {
                    "apiVersion": f"{GROUP}/v1alpha1",
                    "kind": kind,
                    "metadata": {"name": "read"},
                    "spec": {"size": 3},
                },
            )
            for version in ("v1alpha1", "v1alpha0"):
                for _ in range(2):
                    custom.get_namespaced_custom_object(GROUP, version, ns, plural, "read")
                took = []
                for _ in range(a.rounds):
                    started = time.perf_counter()
                    custom.get_namespaced_custom_object(GROUP, version, ns, plural, "read")
                    took.append(time.perf_counter() - started)
                results[f"get_{kind}_{version}"] = stats(took)
        hook.close()
    finally:
        op.stop()
        core.delete_namespace(ns)
    return results


def table(results: dict[str, Any]) -> record.Table:
    rows: list[list[record.Value]] = []
    for kind, how in KINDS.items():
        for n in (1, 100):
            r = results[f"webhook_{kind}_{n}"]
            rows.append(
                [
                    f"/convert, {n} object{'s' if n > 1 else ''}, {how}",
                    round(r["p50_ms"], 1),
                    None if r["p99_ms"] is None else round(r["p99_ms"], 1),
                    round(r["cpu_ms"]),
                ]
            )
        for version in ("v1alpha1", "v1alpha0"):
            r = results[f"get_{kind}_{version}"]
            via = "stored, no webhook" if version == "v1alpha1" else "converted"
            rows.append(
                [
                    f"GET through the API server, {version} ({via}), {how}",
                    round(r["p50_ms"], 1),
                    None if r["p99_ms"] is None else round(r["p99_ms"], 1),
                    None,
                ]
            )
    columns = ["what", "p50 ms", "p99 ms", "CPU ms/review"]
    return record.Table(f"{results['rounds']} rounds each", columns, rows)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--rounds", type=int, default=30)
    p.add_argument("--out", type=Path, help="write the figures as JSON here")
    a = p.parse_args(argv)
    results = measure(a)
    print(record.text(table(results)))
    record.write("conversion", "conversion", "", [table(results)])
    if a.out:
        a.out.write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
