"""--sharding against the real cluster: replicas divide the CRs, join and leave, and a CR never
has two runs at once across replicas.

Three replicas of the operator (`watches-sharding.yaml`: kind Journaled, role `journal`, which
writes the start and end of every run to a file, keeps a ConfigMap and asks to run again after
2 s), with short Leases. Replicas join; one leaves with SIGTERM; one is SIGKILLed. Meanwhile the
runs go on; at the end the journal shows, for every CR, runs that never overlap.
"""

from __future__ import annotations

import itertools
import signal
import time
from collections import defaultdict
from collections.abc import Iterator
from pathlib import Path

import pytest
from kubernetes import client

from runner.control.shards import LABEL, rendezvous

from .conftest import Cluster
from .kit import PROJECT, Env, RunningOperator, crd, install_crd, or_none, temporary_namespace
from .kit import wait_for as _wait_for

pytestmark = pytest.mark.integration

GROUP = "shard.operator-runner.dev"
KIND = "Journaled"
LEASE_DURATION = 6.0
TIMINGS = (
    f"--leader-elect-lease-duration={LEASE_DURATION:g}s",
    "--leader-elect-renew-deadline=4s",
    "--leader-elect-retry-period=1s",
)
REPLICAS = ("shard-a", "shard-b", "shard-c")


def cr_names(namespace: str, count: int = 12, each: int = 2) -> list[str]:
    """`count` CR names of which each of the three replicas holds at least `each` (rendezvous
    hashing of `<namespace>/<name>`, and the namespace is random: 12 names taken blindly left
    one replica with none in about 2 % of runs)."""
    candidates = [f"cr-{i:02d}" for i in range(100)]
    owner = {n: rendezvous(f"{namespace}/{n}", list(REPLICAS)) for n in candidates}
    chosen: list[str] = []
    for member in REPLICAS:
        chosen += [n for n in candidates if owner[n] == member][:each]
    chosen += [n for n in candidates if n not in chosen][: count - len(chosen)]
    return sorted(chosen)


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("sharding")
    with cluster.api_client() as api:
        install_crd(api, crd(GROUP, KIND))
        try:
            with temporary_namespace(cluster, "shard") as namespace:
                yield Env(
                    cluster,
                    api,
                    namespace,
                    tmp,
                    group=GROUP,
                    watches=PROJECT / "watches-sharding.yaml",
                )
        finally:
            or_none(
                client.ApiextensionsV1Api(api).delete_custom_resource_definition,
                f"{KIND.lower()}s.{GROUP}",
            )


def replica(env: Env, name: str) -> RunningOperator:
    return env.launch(
        name,
        "--sharding",
        "--leader-election-id=shard-test",
        f"--leader-election-namespace={env.ns}",
        *TIMINGS,
        env={"POD_NAME": name},
        max_concurrent=3,
    )


def holders(env: Env) -> dict[str, str]:
    items = env.custom.list_namespaced_custom_object(GROUP, "v1", env.ns, "journaleds")["items"]
    return {
        o["metadata"]["name"]: (o["metadata"].get("labels") or {}).get(LABEL, "") for o in items
    }


def wait_for(probe, *, timeout: float, what: str, ops: list[RunningOperator]):  # type: ignore[no-untyped-def]
    try:
        return _wait_for(probe, timeout=timeout, what=what)
    except AssertionError:
        for op in ops:
            print(op.log_text()[-3000:])
        raise


def split_as_hashed(env: Env, names: list[str], members: list[str]) -> bool:
    now = holders(env)
    return len(now) == len(names) and all(
        now[name] == rendezvous(f"{env.ns}/{name}", members) for name in names
    )


def runs(journal: Path) -> dict[str, list[tuple[float, float, str]]]:
    """CR -> its runs (start, end, replica), from the journal the role wrote."""
    starts: dict[tuple[str, str], float] = {}
    out: dict[str, list[tuple[float, float, str]]] = defaultdict(list)
    for line in journal.read_text().splitlines():
        what, name, at, who = line.split()
        if what == "start":
            starts[(name, who)] = float(at)
        elif (name, who) in starts:
            out[name].append((starts.pop((name, who)), float(at), who))
    return out


def ran_by(journal: Path) -> set[str]:
    return {who for cr_runs in runs(journal).values() for _, _, who in cr_runs}


def test_replicas_divide_the_crs_and_never_run_one_twice_at_once(env: Env) -> None:
    journal = env.tmp / "journal"
    journal.touch()
    names = cr_names(env.ns)
    ops: list[RunningOperator] = []
    a = replica(env, "shard-a")
    ops.append(a)
    try:
        for name in names:
            env.create(KIND, name, {"journal": str(journal)})
        wait_for(
            lambda: split_as_hashed(env, names, ["shard-a"]),
            timeout=90,
            what="shard-a holds all",
            ops=ops,
        )
        wait_for(lambda: set(runs(journal)) == set(names), timeout=90, what="a ran each", ops=ops)

        b, c = replica(env, "shard-b"), replica(env, "shard-c")  # two join
        ops += [b, c]
        three = list(REPLICAS)
        wait_for(
            lambda: split_as_hashed(env, names, three), timeout=60, what="a split in three", ops=ops
        )
        assert {h for h in holders(env).values()} == set(three), holders(env)
        wait_for(  # the new replicas run what they were handed
            lambda: {"shard-b", "shard-c"} <= ran_by(journal),
            timeout=60,
            what="runs on shard-b and shard-c",
            ops=ops,
        )

        assert b.stop(timeout=60) == 0, b.log_text()[-3000:]  # b leaves cleanly
        two = ["shard-a", "shard-c"]
        wait_for(
            lambda: split_as_hashed(env, names, two), timeout=30, what="b's CRs taken over", ops=ops
        )

        moving = [n for n in names if rendezvous(f"{env.ns}/{n}", two) == "shard-c"]
        killed = time.monotonic()
        c.proc.send_signal(signal.SIGKILL)  # c dies
        c.proc.wait(timeout=10)
        wait_for(
            lambda: split_as_hashed(env, names, ["shard-a"]),
            timeout=60,
            what="c's CRs taken",
            ops=ops,
        )
        pickup = time.monotonic() - killed
        print(f"\na SIGKILLed replica's {len(moving)} CRs were taken over in {pickup:.1f} s")
        # the Lease duration, a look (1 s) and one run of ~1-2 s at most, with room for a busy CI
        assert pickup < LEASE_DURATION + 10, pickup

        # a moved CR's dependent is watched by its new holder: deleting it brings it back
        moved = moving[0]
        env.core.delete_namespaced_config_map(f"{moved}-cm", env.ns)
        wait_for(
            lambda: env.config_map(f"{moved}-cm"), timeout=30, what="the dependent back", ops=ops
        )
        before = {name: len(r) for name, r in runs(journal).items()}
        wait_for(  # every CR runs on, under its new holder
            lambda: all(len(runs(journal)[n]) > before.get(n, 0) for n in names),
            timeout=60,
            what="every CR run again",
            ops=ops,
        )
    finally:
        for op in ops:
            if op.proc.poll() is None:
                op.stop(timeout=60)

    by_cr = runs(journal)
    handed = {n for n, r in by_cr.items() if len({who for _, _, who in r}) > 1}
    assert len(handed) >= 2, "CRs run by one replica, then by another"
    for name, cr_runs in by_cr.items():
        cr_runs.sort()
        for (_s1, end, who1), (start, _e2, who2) in itertools.pairwise(cr_runs):
            assert start >= end, f"{name}: a run by {who2} began before {who1}'s ended"
