"""watchReads against the real API server: a Secret nobody owns that a role reads is rotated,
and the CR runs again; unrelated Secrets change and nothing runs; a read a later run no longer
makes stops triggering; a restart keeps the triggers; sharded replicas run only their own CRs;
and without the key nothing changes (operator-sdk's behaviour).

The role `reader` (watches-references.yaml: kind Reader with `watchReads: [{version: v1, kind:
Secret}]`, kind Blind without) reads the Secret its spec names, by `k8s_info` or a lookup, and
writes the value it read into the ConfigMap <name>-seen.

Each "nothing happened" is checked after a sentinel: a change that does trigger, made after the
one that must not, on the same watch stream (events of one collection arrive in order), so that
once the sentinel's run is seen the earlier change has been judged.
"""

from __future__ import annotations

import base64
import re
import statistics
import time
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from runner.control.shards import LABEL, rendezvous

from . import kit
from .conftest import Cluster
from .kit import PROJECT, RunningOperator, crd, install_crd, line_at, or_none, wait_for

# `lines`: the reads are kubernetes.core's (k8s_info, the k8s lookup), whose requests each line's
# collection makes its own way.
pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "refs.operator-runner.dev"
WATCHES = PROJECT / "watches-references.yaml"
KINDS = ("Reader", "Blind")
ROTATIONS = 20


class Env(kit.Env):
    other = ""  # a second namespace, not watched


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("references")
    with (
        cluster.api_client() as api,
        kit.temporary_namespace(cluster, "refs") as ns,
        kit.temporary_namespace(cluster, "far") as other,
    ):
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, ns, tmp, group=GROUP, watches=WATCHES)
        environment.other = other
        try:
            environment.start()
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


# -- helpers --------------------------------------------------------------------------------


def put_secret(env: Env, name: str, value: str, namespace: str | None = None) -> None:
    """Create the Secret, or set its value (the way a rotation does: a patch of its data)."""
    ns = namespace or env.ns
    data = {"value": base64.b64encode(value.encode()).decode()}
    if or_none(env.core.read_namespaced_secret, name, ns) is None:
        env.core.create_namespaced_secret(ns, {"metadata": {"name": name}, "data": data})
    else:
        env.core.patch_namespaced_secret(name, ns, {"data": data})


def seen(env: Env, cr: str, namespace: str | None = None) -> str:
    cm = or_none(env.core.read_namespaced_config_map, f"{cr}-seen", namespace or env.ns)
    return str((cm.data or {}).get("value")) if cm is not None else ""


def wait_seen(
    env: Env, cr: str, value: str, timeout: float = 60, namespace: str | None = None
) -> float:
    """Wait until the CR's run wrote `value`; when it did (time.monotonic())."""
    try:
        wait_for(
            lambda: seen(env, cr, namespace=namespace) == value,
            timeout=timeout,
            what=f"{cr} to read {value!r}",
            interval=0.02,
        )
    except AssertionError:
        print(env.op.log_text()[-5000:])
        raise
    return time.monotonic()


def ran(op: RunningOperator, cr: str) -> list[dict[str, Any]]:
    """The log lines of the runs of the CR named `cr` this operator finished."""
    return [
        line
        for line in op.log_lines()
        if line.get("name") == cr and str(line.get("msg", "")).startswith("ran reconcile")
    ]


def runs(op: RunningOperator, cr: str) -> int:
    """How many runs of the CR named `cr` this operator finished."""
    return len(ran(op, cr))


def run_started(line: dict[str, Any]) -> datetime:
    """When the run a "ran reconcile in N s" line ends began."""
    took = re.match(r"ran reconcile in ([0-9.]+) s", str(line["msg"]))
    assert took, line
    return line_at(line) - timedelta(seconds=float(took.group(1)))


def triggers(op: RunningOperator, cr: str) -> list[dict[str, Any]]:
    """The log lines of changes to objects `cr` read that reconciled it."""
    return [
        line
        for line in op.log_lines()
        if line.get("name") == cr and "read: reconciling it" in str(line.get("msg", ""))
    ]


def idle(env: Env, kind: str, cr: str, op: RunningOperator | None = None) -> None:
    """The CR's last run is over (no run in progress, none queued by its own writes)."""
    env.wait_condition(kind, cr, generation=False, idle=True, op=op)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def ms(values: list[float]) -> str:
    """p50 and p99 of `values` (seconds), in milliseconds."""
    return f"{statistics.median(values) * 1000:.0f} ms, {percentile(values, 0.99) * 1000:.0f} ms"


# -- the tests ------------------------------------------------------------------------------


def test_rotating_a_secret_nobody_owns_reruns_the_cr_within_two_seconds(env: Env) -> None:
    """20 rotations of a Secret the role reads (no owner, no label): each one reconciles the
    CR. Measured: rotation -> the operator's line that enqueues the CR (trigger), and rotation
    -> the run's write of the new value (end to end)."""
    put_secret(env, "db", "v0")
    env.create("Reader", "rot", {"secretName": "db"})
    wait_seen(env, "rot", "v0", timeout=90)
    idle(env, "Reader", "rot")
    runs_before = runs(env.op, "rot")
    trigger_s: list[float] = []
    started_s: list[float] = []
    end_to_end_s: list[float] = []
    for i in range(1, ROTATIONS + 1):
        before, ran_before = len(triggers(env.op, "rot")), runs(env.op, "rot")
        wall, start = datetime.now(UTC), time.monotonic()
        put_secret(env, "db", f"v{i}")
        end_to_end_s.append(wait_seen(env, "rot", f"v{i}", timeout=30) - start)
        line = wait_for(
            lambda before=before: triggers(env.op, "rot")[before:],
            timeout=10,
            what="the trigger's line",
        )[0]
        trigger_s.append(max(0.0, (line_at(line) - wall).total_seconds()))
        done = wait_for(
            lambda n=ran_before: ran(env.op, "rot")[n:], timeout=30, what="the run's end"
        )[0]
        started_s.append(max(0.0, (run_started(done) - wall).total_seconds()))
        idle(env, "Reader", "rot")
    print(
        f"\nreference trigger over {ROTATIONS} rotations (p50, p99): "
        f"rotation -> CR queued {ms(trigger_s)}; "
        f"-> its run starts {ms(started_s)}; "
        f"-> the run's write of the new value {ms(end_to_end_s)}"
    )
    assert max(trigger_s) < 2.0, trigger_s
    assert runs(env.op, "rot") == runs_before + ROTATIONS, "one run per rotation, no more"
    msg = str(triggers(env.op, "rot")[-1]["msg"])
    assert msg.startswith(f"secrets {env.ns}/db changed, which Reader {env.ns}/rot read"), msg
    assert "v2" not in env.op.log_text(), "no Secret value in the log"


def test_unrelated_secrets_changing_cause_zero_runs(env: Env) -> None:
    put_secret(env, "quiet-db", "a")
    env.create("Reader", "quiet", {"secretName": "quiet-db"})
    wait_seen(env, "quiet", "a", timeout=90)
    idle(env, "Reader", "quiet")
    before = runs(env.op, "quiet")
    for i in range(20):  # created, changed, deleted: Secrets no run read
        put_secret(env, f"noise-{i}", "x")
        put_secret(env, f"noise-{i}", "y")
        env.core.delete_namespaced_secret(f"noise-{i}", env.ns)
    # a bookkeeping change to the Secret it does read
    env.core.patch_namespaced_secret(
        "quiet-db", env.ns, {"metadata": {"annotations": {LAST_APPLIED: "{}"}}}
    )
    put_secret(env, "quiet-db", "b")  # the sentinel: after all of them on the same stream
    wait_seen(env, "quiet", "b")
    idle(env, "Reader", "quiet")
    assert runs(env.op, "quiet") == before + 1, "the sentinel's run only"
    assert len(triggers(env.op, "quiet")) == 1


LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def test_a_read_by_lookup_and_in_another_namespace_triggers_too(env: Env) -> None:
    put_secret(env, "far-db", "one", namespace=env.other)
    env.create("Reader", "far", {"secretName": "far-db", "secretNamespace": env.other})
    spec = {"secretName": "far-db", "secretNamespace": env.other}
    env.create("Reader", "looked", {**spec, "byLookup": True})
    wait_seen(env, "far", "one", timeout=90)
    wait_seen(env, "looked", "one", timeout=90)
    idle(env, "Reader", "far")
    idle(env, "Reader", "looked")
    put_secret(env, "far-db", "two", namespace=env.other)
    wait_seen(env, "far", "two", timeout=10)
    wait_seen(env, "looked", "two", timeout=10)


def test_a_secret_missing_when_read_reruns_the_cr_once_it_exists(env: Env) -> None:
    env.create("Reader", "early", {"secretName": "late-db"})
    wait_seen(env, "early", "missing", timeout=90)
    idle(env, "Reader", "early")
    put_secret(env, "late-db", "here")
    wait_seen(env, "early", "here", timeout=10)


def test_a_read_dropped_by_a_later_run_stops_triggering(env: Env) -> None:
    put_secret(env, "old-db", "1")
    put_secret(env, "new-db", "1")
    env.create("Reader", "moved", {"secretName": "old-db"})
    wait_seen(env, "moved", "1", timeout=90)
    env.patch_spec("Reader", "moved", {"secretName": "new-db"})
    env.wait_condition("Reader", "moved")  # the run of the new spec succeeded
    idle(env, "Reader", "moved")
    before = runs(env.op, "moved")
    put_secret(env, "old-db", "2")  # no run reads it now
    put_secret(env, "new-db", "2")  # the sentinel
    wait_seen(env, "moved", "2")
    idle(env, "Reader", "moved")
    assert runs(env.op, "moved") == before + 1
    assert not [t for t in triggers(env.op, "moved") if "/old-db " in str(t["msg"])]


def test_without_watch_reads_nothing_follows_reads(env: Env) -> None:
    """The default: as operator-sdk, a Secret the role read changing reconciles nothing."""
    put_secret(env, "blind-db", "1")
    put_secret(env, "blind-sentinel", "1")
    env.create("Blind", "blind", {"secretName": "blind-db"})
    env.create("Reader", "sentinel", {"secretName": "blind-sentinel"})
    wait_seen(env, "blind", "1", timeout=90)
    wait_seen(env, "sentinel", "1", timeout=90)
    idle(env, "Blind", "blind")
    idle(env, "Reader", "sentinel")
    before = runs(env.op, "blind")
    put_secret(env, "blind-db", "2")
    put_secret(env, "blind-sentinel", "2")  # the Reader's: on the same watch, after it
    wait_seen(env, "sentinel", "2")
    assert runs(env.op, "blind") == before and seen(env, "blind") == "1"
    assert not triggers(env.op, "blind")


def test_a_restart_keeps_the_triggers(env: Env) -> None:
    put_secret(env, "kept-db", "before")
    env.create("Reader", "kept", {"secretName": "kept-db"})
    wait_seen(env, "kept", "before", timeout=90)
    env.restart()  # every CR runs once at start, reading again what it reads
    wait_for(lambda: runs(env.op, "kept") >= 1, timeout=120, what="kept's run after the restart")
    idle(env, "Reader", "kept")
    put_secret(env, "kept-db", "after")
    wait_seen(env, "kept", "after", timeout=10)
    assert triggers(env.op, "kept"), "reconciled by the rotation, not by a resync"


# -- sharded replicas -------------------------------------------------------------------------

REPLICAS = ("refs-a", "refs-b")


def test_sharded_replicas_each_rerun_only_the_crs_they_hold(
    cluster: Cluster, env: Env, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """Two replicas with --sharding, a CR held by each, both reading one Secret: a rotation
    runs each CR once, on the replica that holds it."""
    tmp = tmp_path_factory.mktemp("references-sharded")
    with kit.temporary_namespace(cluster, "refs-shard") as ns:
        sharded = Env(cluster, env.api, ns, tmp, group=GROUP, watches=WATCHES)
        names = {member: _held_by(ns, member) for member in REPLICAS}
        ops = {
            member: sharded.launch(
                member,
                "--sharding",
                "--leader-election-id=refs-shard",
                f"--leader-election-namespace={ns}",
                "--leader-elect-lease-duration=6s",
                "--leader-elect-renew-deadline=4s",
                "--leader-elect-retry-period=1s",
                env={"POD_NAME": member},
            )
            for member in REPLICAS
        }
        try:
            put_secret(sharded, "shared", "1")
            for name in names.values():
                sharded.create("Reader", name, {"secretName": "shared"})
            for name in names.values():
                wait_for(
                    lambda name=name: (
                        _holder(sharded, name) == rendezvous(f"{ns}/{name}", list(REPLICAS))
                    ),
                    timeout=60,
                    what=f"{name} held by its replica",
                )
                wait_seen(sharded, name, "1", timeout=90)
            for member, name in names.items():
                idle(sharded, "Reader", name, op=ops[member])
            # (a replica may have run the other's CR before the two knew each other)
            before = {(m, name): runs(ops[m], name) for m in REPLICAS for name in names.values()}
            put_secret(sharded, "shared", "2")
            for name in names.values():
                wait_seen(sharded, name, "2", timeout=10)
            for member, name in names.items():
                idle(sharded, "Reader", name, op=ops[member])
            for member, name in names.items():
                assert runs(ops[member], name) == before[(member, name)] + 1, member
                assert len(triggers(ops[member], name)) == 1, member
                for other in set(names.values()) - {name}:
                    assert runs(ops[member], other) == before[(member, other)], (member, other)
                    assert not triggers(ops[member], other)
        except AssertionError:
            for member, op in ops.items():
                print(f"--- {member} ---\n{op.log_text()[-12000:]}")
            raise
        finally:
            for op in ops.values():
                op.stop()


def _held_by(namespace: str, member: str) -> str:
    for i in range(200):
        name = f"cr-{i}"
        if rendezvous(f"{namespace}/{name}", list(REPLICAS)) == member:
            return name
    raise AssertionError(f"no name for {member}")


def _holder(env: Env, name: str) -> str:
    obj = env.get("Reader", name) or {}
    return str(((obj.get("metadata") or {}).get("labels") or {}).get(LABEL, ""))
