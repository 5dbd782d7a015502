"""Scenario `sharding`: throughput of 1, 2 and 4 replicas of operator-runner with --sharding.

Two workloads, each on the EchoFlask CRD:

- io: `bench/watches-delay.yaml`, role `bench/roles/delay`: every run waits DELAY_S on the
  bench's delay server (bench/delayserver.py, 127.0.0.1), almost no CPU: what more replicas
  can scale on one machine;
- cpu: the repository's `watches.yaml` (EchoFlask, size 0): CPU-bound, so the machine's CPUs
  cap it whatever the number of replicas.

For each workload and replica count: a fresh namespace (CRs and the replicas' Leases), the
replicas started (each its own process, POD_NAME bench-r<i>, the same --leader-election-id,
short Lease timings, --max-concurrent-reconciles fixed per replica), all Leases present, one
warm-up CR per replica, named so that rendezvous hashing gives it to that replica, Successful
and labelled by it (so every replica knows all the others), the warm-ups deleted and every
replica quiet; then N CRs created at once: throughput = N / (create -> the last one
Successful), speedup = throughput / throughput of 1 replica. The peer cannot shard: its single
replica is measured the same way, for reference.
"""

from __future__ import annotations

import dataclasses
import os
import time
from pathlib import Path
from typing import Any

from kubernetes import client

from runner.control.shards import LABEL, rendezvous

from .cluster import Cluster
from .crs import GROUP, PLURAL, VERSION, Tracker
from .delayserver import DelayServer
from .harness import BENCH, REPO, DidNotFinish, log
from .operators import OperatorSpec, RunningOperator

REPLICAS = (1, 2, 4)
DELAY_S = 2.0
# --max-concurrent-reconciles of every replica (and of the peer): fixed, so that more replicas
# is the only thing that changes
MAX_CONCURRENT = 2
ELECTION_ID = "bench-shard"
NAMESPACE = "@NAMESPACE@"  # in a replica's argv: the namespace of the measurement (CRs, Leases)
LEASE_ARGS = (
    "--leader-elect-lease-duration=6s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=1s",
)
# CRs per workload and scale
SIZES: dict[str, dict[str, int]] = {
    "small": {"io": 60, "cpu": 20},
    "medium": {"io": 120, "cpu": 60},
    "full": {"io": 200, "cpu": 200},
}
WORKLOADS = {
    "io": BENCH / "watches-delay.yaml",
    "cpu": REPO / "watches.yaml",
}


# --------------------------------------------------------------------------- pure logic


def throughput(n: int, t0: float, done: list[float]) -> float | None:
    """CRs per second from t0 until the last of n was done (None unless all n were)."""
    if n <= 0 or len(done) < n:
        return None
    span = max(done) - t0
    return n / span if span > 0 else None


def speedups(by_replicas: dict[int, float | None]) -> dict[int, float | None]:
    """Throughput of each replica count relative to that of 1 replica."""
    base = by_replicas.get(1)
    return {
        k: (v / base if v is not None and base else None) for k, v in sorted(by_replicas.items())
    }


def identities(k: int) -> list[str]:
    return [f"bench-r{i}" for i in range(k)]


def warmup_names(namespace: str, members: list[str]) -> dict[str, str]:
    """One CR name per member that rendezvous hashing (as the replicas do it, key
    `<namespace>/<name>`) gives to that member: name -> member."""
    out: dict[str, str] = {}
    want = set(members)
    j = 0
    while want:
        name = f"warmup-{j:03d}"
        owner = rendezvous(f"{namespace}/{name}", members)
        if owner in want:
            out[name] = owner
            want.discard(owner)
        j += 1
    return out


# --------------------------------------------------------------------------- one measurement


class Replicas:
    """k operator processes on one namespace (k = 1 for the peer, without --sharding)."""

    def __init__(
        self,
        cluster: Cluster,
        specs: list[OperatorSpec],
        work: Path,
        cap: float,
        sharded: bool,
        label: str,
    ) -> None:
        self.cluster, self.work, self.cap, self.sharded = cluster, work, cap, sharded
        self.label = label
        self.ns = cluster.namespace(f"bench-shard-{label}")
        self.specs = [
            dataclasses.replace(s, argv=[x.replace(NAMESPACE, self.ns) for x in s.argv])
            for s in specs
        ]
        self.deadline = time.monotonic() + cap
        self.result: dict[str, Any] = {"namespace": self.ns, "replicas": len(specs)}

    def __enter__(self) -> Replicas:
        self.tracker = Tracker(self.cluster.api, self.ns)
        self.tracker.start()
        self.tracker.ready.wait(30)
        self.ops = [
            RunningOperator(spec, self.cluster.kubeconfig, self.ns, self.work / f"r{i}")
            for i, spec in enumerate(self.specs)
        ]
        t0 = time.monotonic()
        try:
            self._warm_up()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        self.result["ready_s"] = time.monotonic() - t0
        return self

    def __exit__(self, *exc: object) -> None:
        self.tracker.stop()
        self.result["rusage_children_at_exit"] = [op.stop() for op in self.ops]
        self.result["operator_logs"] = [str(op.log_file) for op in self.ops]
        if not self.cluster.delete_namespace(self.ns):
            log(f"namespace {self.ns} still terminating after 300 s")

    def _until(self, cond: Any, what: str, limit: float = 120) -> None:
        deadline = min(self.deadline, time.monotonic() + limit)
        while not cond():
            if time.monotonic() > deadline:
                tails = "\n".join(op.log_tail(8) for op in self.ops)
                raise DidNotFinish(f"{self.label}: {what} not reached; logs:\n{tails}")
            dead = [op for op in self.ops if not op.alive()]
            if dead:
                raise DidNotFinish(f"{self.label}: a replica exited:\n{dead[0].log_tail()}")
            time.sleep(0.2)

    def _labels(self) -> dict[str, str]:
        items = self.cluster.custom.list_namespaced_custom_object(GROUP, VERSION, self.ns, PLURAL)
        return {
            o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(LABEL, "")
            for o in items.get("items") or []
        }

    def _warm_up(self) -> None:
        members = identities(len(self.ops))
        if self.sharded:
            leases = client.CoordinationV1Api(self.cluster.api)

            def all_leases() -> bool:
                return len(leases.list_namespaced_lease(self.ns).items) >= len(members)

            self._until(all_leases, "a Lease of every replica")
            expected = warmup_names(self.ns, members)
        else:
            expected = {"warmup-000": ""}
        names = list(expected)
        for name in names:
            self.tracker.state(name).created = time.monotonic()
            self.cluster.create_cr(self.ns, name, 0)
        self._until(lambda: self.tracker.count(names) == len(names), "warm-up CRs Successful")
        if self.sharded:
            # each warm-up CR labelled by the replica rendezvous hashing over all of them picks:
            # then every replica has seen every Lease
            def agreed() -> bool:
                labels = self._labels()
                return all(labels.get(n) == m for n, m in expected.items())

            self._until(agreed, "every warm-up CR labelled by its replica")
        for name in names:
            self.cluster.delete_cr(self.ns, name)
        self.wait_quiet(2.0)

    def wait_quiet(self, seconds: float, limit: float = 120) -> bool:
        """True once no replica ran Ansible for `seconds` in a row."""
        since: float | None = None
        deadline = min(self.deadline, time.monotonic() + limit)
        while time.monotonic() < deadline:
            now = time.monotonic()
            # the samplers' last periodic samples (100 ms): cheaper than k fresh ones
            if all(op.sampler.last is None or op.sampler.last.running == 0 for op in self.ops):
                since = since or now
                if now - since >= seconds:
                    return True
            else:
                since = None
            time.sleep(0.2)
        return False

    def cpu(self) -> float:
        return sum(op.sampler.now().cpu for op in self.ops)

    def runs(self) -> int:
        return sum(op.sampler.now().runs for op in self.ops)

    def measure(self, n: int) -> None:
        names = [f"shard-{i:04d}" for i in range(n)]
        cpu0, runs0 = self.cpu(), self.runs()
        t0 = time.monotonic()
        self.cluster.create_many(self.ns, names, 0, None, self.tracker)
        ok = self.tracker.wait(names, self.deadline)
        done = [
            t for n_ in names if (t := self.tracker.state(n_).successful) is not None
        ]  # when each one turned Successful
        self.result.update(
            n=n,
            successful=len(done),
            all_successful_s=(max(done) - t0) if ok else None,
            throughput_crs_per_s=throughput(n, t0, done),
            cpu_s=self.cpu() - cpu0,
            runs=self.runs() - runs0,
            loadavg=list(os.getloadavg()),
        )
        if self.sharded:
            labels = self._labels()
            per: dict[str, int] = {}
            for name in names:
                per[labels.get(name, "")] = per.get(labels.get(name, ""), 0) + 1
            self.result["crs_per_replica"] = per
        if not ok:
            raise DidNotFinish(f"{len(done)} of {n} Successful when the cap was reached")


# --------------------------------------------------------------------------- the scenario


def _with(spec: OperatorSpec, env: dict[str, str], args: list[str]) -> OperatorSpec:
    return dataclasses.replace(spec, env={**spec.env, **env}, argv=[*spec.argv, *args])


def run(
    cluster: Cluster,
    work: Path,
    scale: str,
    cap: float,
    ours_spec: Any,
    peer_spec: Any,
    replicas: tuple[int, ...] = REPLICAS,
    sizes: dict[str, int] | None = None,
) -> dict[str, Any]:
    """`ours_spec(work, watches)` / `peer_spec(work, watches)` (None: no peer) make the specs.
    Returns {"ours": {...}, "peer": {...}} for the JSON (flat keys for the table included)."""
    sizes = sizes or SIZES[scale]
    ours: dict[str, Any] = {"max_concurrent_reconciles": MAX_CONCURRENT, "delay_s": DELAY_S}
    peer: dict[str, Any] = {"max_concurrent_reconciles": MAX_CONCURRENT, "delay_s": DELAY_S}
    with DelayServer(DELAY_S) as delay:
        env = {"BENCH_DELAY_URL": delay.url}
        for workload, watches in WORKLOADS.items():
            n = sizes[workload]
            per_k: dict[int, dict[str, Any]] = {}
            for k in replicas:
                label = f"{workload}-{k}"
                specs = []
                for i, who in enumerate(identities(k)):
                    spec = ours_spec(work / label / f"r{i}", watches)
                    specs.append(
                        _with(
                            spec,
                            {**env, "POD_NAME": who},
                            [
                                "--sharding",
                                f"--leader-election-id={ELECTION_ID}",
                                f"--leader-election-namespace={NAMESPACE}",
                                *LEASE_ARGS,
                                f"--max-concurrent-reconciles={MAX_CONCURRENT}",
                            ],
                        )
                    )
                per_k[k] = _measure(cluster, specs, work / label, cap, True, label, n, workload)
            thr = {k: r.get("throughput_crs_per_s") for k, r in per_k.items()}
            sp = speedups(thr)
            ours[workload] = {
                "n": n,
                "replicas": list(per_k),
                "throughput_crs_per_s": [thr[k] for k in per_k],
                "speedup": [sp[k] for k in per_k],
            }
            ours[workload]["by_replicas"] = {str(k): r for k, r in per_k.items()}
            for k in per_k:
                ours[f"{workload}_throughput_{k}"] = thr[k]
                ours[f"{workload}_speedup_{k}"] = sp[k]
            if peer_spec is not None:
                spec = peer_spec(work / f"{workload}-peer", watches)
                # operator-sdk finds a watch's role on ANSIBLE_ROLES_PATH
                roles = f"{BENCH / 'roles'}{os.pathsep}{spec.env.get('ANSIBLE_ROLES_PATH', '')}"
                spec = _with(
                    spec,
                    {**env, "ANSIBLE_ROLES_PATH": roles},
                    [f"--max-concurrent-reconciles={MAX_CONCURRENT}"],
                )
                peer["operator"] = spec.label
                r = _measure(
                    cluster,
                    [spec],
                    work / f"{workload}-peer",
                    cap,
                    False,
                    f"{workload}-peer",
                    n,
                    workload,
                )
                peer[workload] = {"n": n, "replicas": [1], "by_replicas": {"1": r}}
                peer[f"{workload}_throughput_1"] = r.get("throughput_crs_per_s")
        ours["delay_requests_answered"] = delay.answered
    out: dict[str, Any] = {"ours": ours}
    if peer_spec is not None:
        out["peer"] = peer
    return out


def _measure(
    cluster: Cluster,
    specs: list[OperatorSpec],
    work: Path,
    cap: float,
    sharded: bool,
    label: str,
    n: int,
    workload: str,
) -> dict[str, Any]:
    log(f"sharding: {workload}, {specs[0].label}, {len(specs)} replica(s), {n} CRs ...")
    reps = Replicas(cluster, specs, work, cap, sharded, label)
    try:
        with reps:
            reps.measure(n)
    except DidNotFinish as exc:
        reps.result["dnf"] = f"did not finish in {cap:.0f} s: {exc}"
    except Exception as exc:  # keep going with the other measurements
        reps.result["dnf"] = f"error: {type(exc).__name__}: {exc}"
    r = reps.result
    log(
        f"sharding: {label}: "
        + (r["dnf"] if "dnf" in r else f"{r.get('throughput_crs_per_s') or 0:.2f} CRs/s")
    )
    return r
