"""Does the cluster have room for N Services? Creates N ClusterIP Services in a namespace of its
own (8 client threads), counts the distinct cluster IPs allocated, deletes the namespace again.

    python -m bench.service_ips --kubeconfig FILE [--n 1200]

The full bench makes one Service per EchoFlask (1000 in its scale scenario, plus the other
scenarios' until their namespaces are gone); a cluster with kube-apiserver's default
--service-cluster-ip-range ran out (`failed to allocate a serviceIP`). Exit status 0 when all N
got an IP.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import time
from pathlib import Path

from kubernetes import client, config
from kubernetes.client.rest import ApiException


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m bench.service_ips", description=__doc__)
    p.add_argument("--kubeconfig", type=Path, required=True)
    p.add_argument("--n", type=int, default=1200)
    a = p.parse_args(argv)
    api = config.new_client_from_config(config_file=str(a.kubeconfig))
    core = client.CoreV1Api(api)
    ns = f"bench-svc-{int(time.time())}"
    core.create_namespace({"metadata": {"name": ns, "labels": {"bench": "operator-runner"}}})
    errors: list[str] = []

    def one(i: int) -> str | None:
        body = {
            "metadata": {"name": f"svc-{i:05d}"},
            "spec": {"type": "ClusterIP", "ports": [{"port": 80, "targetPort": 8080}]},
        }
        try:
            return str(core.create_namespaced_service(ns, body).spec.cluster_ip)
        except ApiException as exc:
            errors.append(f"svc-{i:05d}: {exc.status} {exc.reason}: {exc.body}")
            return None

    t0 = time.monotonic()
    try:
        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            ips = [ip for ip in pool.map(one, range(a.n)) if ip]
        print(
            f"{len(ips)} of {a.n} Services created in {time.monotonic() - t0:.0f} s, "
            f"{len(set(ips))} distinct cluster IPs ({min(ips, default='-')} .. "
            f"{max(ips, default='-')}); {len(errors)} errors"
        )
        for e in errors[:3]:
            print(f"  {e[:300]}")
    finally:
        core.delete_namespace(ns)
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                core.read_namespace(ns)
            except ApiException as exc:
                if exc.status == 404:
                    print(f"namespace {ns} deleted")
                    break
            time.sleep(1)
    return 0 if len(set(ips)) == a.n else 1


if __name__ == "__main__":
    raise SystemExit(main())
