"""Sharding: rendezvous assignment, claims and handovers (control/shards.py), membership by
Leases and the label's compare-and-swap (app/leases/sharding.py), against the fake API and
clock."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import fake_api
import pytest
from fake_api import FakeApi, FakeClock

from runner.app.leases.sharding import (
    GROUP_LABEL,
    Liveness,
    Membership,
    ShardingConfig,
    label_value,
    relabeller,
    shard_identity,
    sharding_config,
)
from runner.control.queue import Lane
from runner.control.shards import LABEL, Shards, rendezvous, shard_key
from runner.kube import client as kube
from runner.kube.resources import ObjectRef, Resource

THINGS = Resource("example.com", "v1", "things", "Thing", True)


def ref(name: str) -> ObjectRef:
    return ObjectRef(THINGS, "ns", name)


# -- rendezvous ----------------------------------------------------------------------------


def test_rendezvous_spreads_keys_evenly_and_moves_only_what_it_must() -> None:
    keys = [f"ns/cr-{i}" for i in range(3000)]
    three = ["a", "b", "c"]
    before = {k: rendezvous(k, three) for k in keys}
    counts = Counter(before.values())
    assert all(900 < n < 1100 for n in counts.values()), counts
    after = {k: rendezvous(k, [*three, "d"]) for k in keys}
    moved = [k for k in keys if before[k] != after[k]]
    assert all(after[k] == "d" for k in moved), "a join takes keys only to the new member"
    assert 600 < len(moved) < 900
    gone = {k: rendezvous(k, ["a", "b"]) for k in keys}
    assert all(gone[k] == before[k] for k in keys if before[k] != "c"), "a leave moves its own"
    assert rendezvous("x", []) is None
    assert rendezvous("x", ["b", "a"]) == rendezvous("x", ["a", "b"])


# -- claims and handovers ------------------------------------------------------------------


@dataclass
class FakeController:
    running_now: set[ObjectRef] = field(default_factory=set)
    queued: list[tuple[ObjectRef, Lane]] = field(default_factory=list)
    forgotten: list[ObjectRef] = field(default_factory=list)

    def running(self, r: ObjectRef) -> bool:
        return r in self.running_now

    def forget(self, r: ObjectRef) -> None:
        self.forgotten.append(r)

    def enqueue(self, r: ObjectRef, delay: float = 0.0, lane: Lane = Lane.EVENT) -> None:
        self.queued.append((r, lane))


def thing(r: ObjectRef, holder: str = "") -> dict[str, Any]:
    """A CR as the fake API keeps it, its shard label saying `holder` ("": none)."""
    labels = {LABEL: holder} if holder else {}
    return {"metadata": {"name": r.name, "namespace": r.namespace, "labels": labels}}


def label(api: FakeApi, r: ObjectRef) -> str:
    obj = api.get(r)
    assert obj is not None
    return str(obj["metadata"]["labels"].get(LABEL, ""))


def label_writes(api: FakeApi) -> list[tuple[str, str]]:
    """(CR name, new holder) of each label the API took, in order."""
    return [
        (e.request.path.rsplit("/", 1)[1], e.request.body["metadata"]["labels"][LABEL])
        for e in api.exchanges
        if e.request.method == "PATCH" and e.status == 200
    ]


def replica(api: FakeApi, me: str, clock: FakeClock | None = None) -> Shards:
    """This replica's Shards, writing labels with the real relabeller through the fake API."""
    relabel = relabeller(api.client())
    return Shards(me, relabel) if clock is None else Shards(me, relabel, clock=clock)


async def settled(*shards: Shards) -> None:
    for _ in range(20):
        await asyncio.sleep(0)
    for s in shards:
        await asyncio.gather(*s._tasks)


def owned_by(name: str, members: list[str]) -> ObjectRef:
    """A CR that rendezvous assigns to `name` among `members`."""
    for i in range(1000):
        r = ref(f"cr-{i}")
        if rendezvous(shard_key(r), members) == name:
            return r
    raise AssertionError("no such CR")


def test_the_assigned_replica_takes_an_unlabelled_cr_and_runs_it() -> None:
    async def go() -> None:
        api = FakeApi()
        a = replica(api, "a")
        a.set_members(["a", "b"])
        r = owned_by("a", ["a", "b"])
        api.put(r, thing(r))
        ctl = FakeController()
        a.observe(ctl, r, "ADDED", api.get(r))
        assert not a.may_run(r)  # not before the label says so
        await settled(a)
        assert label(api, r) == "a" and a.may_run(r)
        assert ctl.queued == [(r, Lane.EVENT)]
        b = replica(api, "b")
        b.set_members(["a", "b"])
        b.observe(FakeController(), r, "MODIFIED", api.get(r))
        await settled(b)
        assert not b.may_run(r) and label_writes(api) == [(r.name, "a")]

    asyncio.run(go())


def test_handover_waits_for_the_run_to_end_and_the_new_owner_runs_after_it() -> None:
    async def go() -> None:
        api = FakeApi()
        r = owned_by("b", ["a", "b"])
        api.put(r, thing(r, "a"))
        a, b = replica(api, "a"), replica(api, "b")
        ctl_a, ctl_b = FakeController(running_now={r}), FakeController()
        a.set_members(["a"])
        a.observe(ctl_a, r, None, api.get(r))
        assert a.may_run(r)
        b.set_members(["a", "b"])
        b.observe(ctl_b, r, None, api.get(r))
        a.set_members(["a", "b"])  # b joined; a is still running the CR
        await settled(a, b)
        assert label(api, r) == "a", "no claim while the live holder holds it"
        assert not a.may_run(r) and not b.may_run(r), "neither starts a run meanwhile"
        ctl_a.running_now.clear()
        a.settle(r)  # what the controller does once the run ended
        await settled(a)
        assert ctl_a.forgotten == [r] and label(api, r) == "b"
        b.observe(ctl_b, r, "MODIFIED", api.get(r))  # the label change reaches b
        assert b.may_run(r) and ctl_b.queued == [(r, Lane.EVENT)]

    asyncio.run(go())


def test_a_cr_of_a_replica_that_is_gone_is_claimed() -> None:
    async def go() -> None:
        api = FakeApi()
        r = ref("orphan")
        api.put(r, thing(r, "dead"))
        b = replica(api, "b")
        b.set_members(["b", "dead"])
        ctl = FakeController()
        b.observe(ctl, r, None, api.get(r))
        await settled(b)
        assert label_writes(api) == [], "no claim from a live holder"
        b.set_members(["b"])  # its Lease expired
        await settled(b)
        assert label(api, r) == "b" and b.may_run(r) and (r, Lane.EVENT) in ctl.queued

    asyncio.run(go())


def test_of_two_claims_on_one_version_one_wins() -> None:
    async def go() -> None:
        api = FakeApi()
        r = ref("raced")
        api.put(r, thing(r))
        a, b = replica(api, "a"), replica(api, "b")
        a.set_members(["a"])  # each believes it is alone for a moment
        b.set_members(["b"])
        ctl_a, ctl_b = FakeController(), FakeController()
        a.observe(ctl_a, r, "ADDED", api.get(r))
        b.observe(ctl_b, r, "ADDED", api.get(r))
        await settled(a, b)
        assert len(label_writes(api)) == 1
        assert [e.status for e in api.exchanges if e.request.method == "PATCH"] == [200, 409]
        winner = label_writes(api)[0][1]
        assert [a.may_run(r), b.may_run(r)].count(True) == 1
        assert (a if winner == "a" else b).may_run(r)

    asyncio.run(go())


def test_a_label_write_that_meets_a_conflict_reads_the_cr_again() -> None:
    api = FakeApi()
    r, gone = ref("busy"), ref("gone")
    api.put(r, thing(r))
    api.fail(method="PATCH", status=409, times=1)  # its status changed meanwhile
    relabel = relabeller(api.client())
    written = asyncio.run(relabel(r, "", "a"))
    obj = api.get(r)
    assert obj is not None and written == obj["metadata"]["resourceVersion"]
    assert label(api, r) == "a"
    assert [(e.request.method, e.status) for e in api.exchanges] == [
        ("GET", 200),
        ("PATCH", 409),
        ("GET", 200),
        ("PATCH", 200),
    ]
    assert asyncio.run(relabel(r, "", "b")) is None, "the label says otherwise now"
    assert asyncio.run(relabel(gone, "", "a")) is None, "no such CR"
    assert label(api, r) == "a"


def test_a_deleted_cr_is_forgotten() -> None:
    api = FakeApi()
    s = replica(api, "a")
    r = ref("x")
    api.put(r, thing(r, "a"))
    s.members = frozenset({"a"})
    s.observe(FakeController(), r, None, api.get(r))
    assert s.may_run(r) and s.held_by_us() == 1
    s.observe(FakeController(), r, "DELETED", api.get(r))
    assert not s.may_run(r) and s.holder(r) is None


# -- membership ----------------------------------------------------------------------------


def lease(name: str, holder: str, renewed: str, duration: int = 15) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration},
    }


def test_a_lease_is_live_while_its_renew_time_keeps_changing() -> None:
    clock = FakeClock(100.0)
    liveness = Liveness(clock)
    assert liveness.live([lease("l-a", "a", "t1"), lease("l-b", "b", "t1")]) == {
        "l-a": "a",
        "l-b": "b",
    }
    clock.now += 10
    assert set(liveness.live([lease("l-a", "a", "t2"), lease("l-b", "b", "t1")])) == {
        "l-a",
        "l-b",
    }
    clock.now += 6  # b unchanged for 16 s > 15 s: gone; a renewed 6 s ago
    assert liveness.live([lease("l-a", "a", "t2"), lease("l-b", "b", "t1")]) == {"l-a": "a"}
    assert liveness.live([lease("l-a", "a", "t3")]) == {"l-a": "a"}  # deleted: forgotten


def test_identity_is_the_pod_name_else_host_and_pid_as_a_label_value() -> None:
    assert shard_identity({"POD_NAME": "op-7d9f-x2"}) == "op-7d9f-x2"
    assert shard_identity({}, pid=42).endswith("-42")
    long = label_value("x" * 80)
    assert len(long) <= 63 and long.startswith("x")
    assert label_value("My_Host.local") == "My_Host.local"
    assert len(label_value("@@@")) == 16


def test_sharding_config_takes_the_election_settings_and_checks_them() -> None:
    env = {"POD_NAMESPACE": "ops", "POD_NAME": "op-1"}
    config = sharding_config(None, None, (15, 10, 2), ["example.com"], env)
    assert config.namespace == "ops" and config.identity == "op-1"
    assert config.group.startswith("operator-runner-") and config.lease_name.startswith(
        config.group
    )
    with pytest.raises(SystemExit, match="--leader-election-namespace is required with --sharding"):
        sharding_config(None, None, (15, 10, 2), ["example.com"], {})
    with pytest.raises(SystemExit, match="lease duration > renew deadline > retry period"):
        sharding_config("x", "ops", (5, 10, 2), [], env)


def handed_to_c() -> tuple[FakeClock, FakeApi, ObjectRef, Shards]:
    """Replica b at t=10 s, knowing a and b (listed at 9 s), and a CR that hashes to b but
    whose label a set to c, a replica b has not seen yet."""
    clock = FakeClock(10.0)
    api = FakeApi()
    r = owned_by("b", ["a", "b"])
    api.put(r, thing(r, "c"))
    b = replica(api, "b", clock)
    b.set_members(["a", "b"], listed_at=9.0)
    return clock, api, r, b


def test_a_holder_not_yet_seen_is_not_taken_for_dead() -> None:
    """a hands a CR to c, which has just joined; b has not seen c's Lease yet. b must not claim
    the CR on the list it has: only on a list of the Leases read after it saw the label."""

    async def go() -> None:
        clock, api, r, b = handed_to_c()
        b.observe(FakeController(), r, "MODIFIED", api.get(r))  # label c, seen at 10
        await settled(b)
        assert label_writes(api) == [] and not b.may_run(r)
        clock.now = 11.0
        b.set_members(["a", "b"], listed_at=10.5)  # a newer list: c is gone indeed
        await settled(b)
        assert label(api, r) == "b" and b.may_run(r)

    asyncio.run(go())


def test_the_next_list_shows_the_new_holder_and_nothing_is_claimed() -> None:
    async def go() -> None:
        clock, api, r, b = handed_to_c()
        b.observe(FakeController(), r, "MODIFIED", api.get(r))
        clock.now = 11.0
        b.set_members(["a", "b", "c"], listed_at=10.5)
        await settled(b)
        assert label_writes(api) == [] and not b.may_run(r)

    asyncio.run(go())


# -- membership: each replica's Lease, on the fake API and the fake clock -------------------------


def membership(
    api: FakeApi, identity: str, seen: dict[str, list[frozenset[str]]], lost: list[str]
) -> Membership:
    assert api.clock is not None
    config = ShardingConfig("ops", "op", identity, 15.0, 10.0, 2.0)
    return Membership(
        api.client(),
        config,
        on_members=lambda members, _: seen.setdefault(identity, []).append(members),
        on_lost=lost.append,
        clock=api.clock,
        now=api.clock.wall,
    )


def test_replicas_see_each_other_by_their_leases_and_drop_one_that_stops_renewing() -> None:
    async def go(api: FakeApi) -> None:
        seen: dict[str, list[frozenset[str]]] = {}
        lost: list[str] = []
        a, b = membership(api, "a", seen, lost), membership(api, "b", seen, lost)
        await a.join()  # 0 s: renews and looks at 2 s, 4 s, ...
        assert seen["a"] == [frozenset({"a"})]
        await asyncio.sleep(1)
        await b.join()  # 1 s: renews at 3 s, 5 s, ...
        assert seen["b"] == [frozenset({"a", "b"})]
        await asyncio.sleep(2)
        assert seen["a"][-1] == frozenset({"a", "b"})
        leases = api.listed(kube.lease_path("ops"))
        assert {lease["spec"]["holderIdentity"] for lease in leases} == {"a", "b"}
        assert all(lease["metadata"]["labels"] == {GROUP_LABEL: "op"} for lease in leases)
        await asyncio.sleep(0.5)
        assert b._task is not None
        b._task.cancel()  # 3.5 s: b hangs; its Lease (renewed at 3 s) stays as it is
        await asyncio.sleep(15.5)
        # a saw it change at its look at 4 s: live at the look at 18 s (14 s later)...
        assert seen["a"][-1] == frozenset({"a", "b"}), "live for the lease duration"
        await asyncio.sleep(2)
        assert seen["a"][-1] == frozenset({"a"}), "...gone at the look at 20 s (16 s later)"
        await a.leave()
        holders = [lease["spec"]["holderIdentity"] for lease in api.listed(kube.lease_path("ops"))]
        assert holders == ["b"], "a deleted its own Lease"
        assert lost == []

    clock = FakeClock()
    fake_api.run(go(FakeApi(clock)), clock)


def test_a_replica_that_cannot_renew_its_lease_for_the_renew_deadline_is_lost() -> None:
    async def go(api: FakeApi) -> None:
        seen: dict[str, list[frozenset[str]]] = {}
        lost: list[str] = []
        a = membership(api, "a", seen, lost)
        await a.join()
        assert api.clock is not None
        joined = api.clock()
        api.fail(error=ConnectionRefusedError("connection refused"))
        await asyncio.sleep(9)
        assert lost == [], "retried within the renew deadline"
        await asyncio.sleep(2)
        assert len(lost) == 1 and "could not renew the shard Lease" in lost[0]
        # the first look at or after the deadline, well before the others drop it (15 s)
        failed = [e.at for e in api.exchanges if e.status is None]
        assert failed[-1] == joined + 10

    clock = FakeClock()
    fake_api.run(go(FakeApi(clock)), clock)


def test_a_change_an_other_replicas_cr_depends_on_is_not_ours_to_run() -> None:
    """enqueue_named (dependents, watchReads) says False for a CR this replica does not hold:
    the read-following watches forget that CR's reads then."""
    from typing import cast

    from runner.control.controller import Controller
    from runner.reconcile.reconciler import Reconciler
    from runner.watches import GVK, Watch

    class Idle:
        watch = Watch(GVK("example.com", "v1", "Thing"), role="/r")

    async def go() -> None:
        api = FakeApi()
        shards = replica(api, "a")
        shards.set_members(["a", "b"])
        controller = Controller(cast(Reconciler, Idle()), workers=1, shards=shards)
        mine, theirs = owned_by("a", ["a", "b"]), owned_by("b", ["a", "b"])
        controller.on_event(mine, "ADDED", thing(mine, "a"))
        controller.on_event(theirs, "ADDED", thing(theirs, "b"))
        assert controller.enqueue_named("ns", mine.name) is True
        assert controller.enqueue_named("ns", theirs.name) is False
        await settled(shards)

    asyncio.run(go())
