"""Sharding: rendezvous assignment, claims and handovers (control/shards.py), membership by
Leases (app/sharding.py), against plain fakes."""

from __future__ import annotations

import asyncio
from collections import Counter
from dataclasses import dataclass, field
from typing import Any

import pytest

from runner.app.sharding import Liveness, label_value, shard_identity, sharding_config
from runner.control.queue import Lane
from runner.control.shards import LABEL, Shards, rendezvous, shard_key
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


@dataclass
class FakeApi:
    """The CRs' labels and resourceVersions, with the API's optimistic concurrency."""

    labels: dict[ObjectRef, str] = field(default_factory=dict)
    versions: dict[ObjectRef, int] = field(default_factory=dict)
    writes: list[tuple[str, str]] = field(default_factory=list)

    def body(self, r: ObjectRef) -> dict[str, Any]:
        labels = {LABEL: self.labels[r]} if self.labels.get(r) else {}
        return {"metadata": {"labels": labels, "resourceVersion": str(self.versions[r])}}

    async def relabel(self, r: ObjectRef, expected: str, holder: str) -> str | None:
        await asyncio.sleep(0)
        if self.labels.get(r, "") != expected:
            return None  # the label says otherwise now
        self.versions[r] += 1
        self.labels[r] = holder
        self.writes.append((r.name, holder))
        return str(self.versions[r])


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
        a = Shards("a", api.relabel)
        a.set_members(["a", "b"])
        r = owned_by("a", ["a", "b"])
        api.versions[r] = 1
        ctl = FakeController()
        a.observe(ctl, r, "ADDED", api.body(r))
        assert not a.may_run(r)  # not before the label says so
        await settled(a)
        assert api.labels[r] == "a" and a.may_run(r)
        assert ctl.queued == [(r, Lane.EVENT)]
        b = Shards("b", api.relabel)
        b.set_members(["a", "b"])
        b.observe(FakeController(), r, "MODIFIED", api.body(r))
        await settled(b)
        assert not b.may_run(r) and api.writes == [(r.name, "a")]

    asyncio.run(go())


def test_handover_waits_for_the_run_to_end_and_the_new_owner_runs_after_it() -> None:
    async def go() -> None:
        api = FakeApi()
        r = owned_by("b", ["a", "b"])
        api.versions[r], api.labels[r] = 5, "a"
        a, b = Shards("a", api.relabel), Shards("b", api.relabel)
        ctl_a, ctl_b = FakeController(running_now={r}), FakeController()
        a.set_members(["a"])
        a.observe(ctl_a, r, None, api.body(r))
        assert a.may_run(r)
        b.set_members(["a", "b"])
        b.observe(ctl_b, r, None, api.body(r))
        a.set_members(["a", "b"])  # b joined; a is still running the CR
        await settled(a, b)
        assert api.labels[r] == "a", "no claim while the live holder holds it"
        assert not a.may_run(r) and not b.may_run(r), "neither starts a run meanwhile"
        ctl_a.running_now.clear()
        a.settle(r)  # what the controller does once the run ended
        await settled(a)
        assert ctl_a.forgotten == [r] and api.labels[r] == "b"
        b.observe(ctl_b, r, "MODIFIED", api.body(r))  # the label change reaches b
        assert b.may_run(r) and ctl_b.queued == [(r, Lane.EVENT)]

    asyncio.run(go())


def test_a_cr_of_a_replica_that_is_gone_is_claimed() -> None:
    async def go() -> None:
        api = FakeApi()
        r = ref("orphan")
        api.versions[r], api.labels[r] = 3, "dead"
        b = Shards("b", api.relabel)
        b.set_members(["b", "dead"])
        ctl = FakeController()
        b.observe(ctl, r, None, api.body(r))
        await settled(b)
        assert api.writes == [], "no claim from a live holder"
        b.set_members(["b"])  # its Lease expired
        await settled(b)
        assert api.labels[r] == "b" and b.may_run(r) and (r, Lane.EVENT) in ctl.queued

    asyncio.run(go())


def test_of_two_claims_on_one_version_one_wins() -> None:
    async def go() -> None:
        api = FakeApi()
        r = ref("raced")
        api.versions[r] = 1
        a, b = Shards("a", api.relabel), Shards("b", api.relabel)
        a.set_members(["a"])  # each believes it is alone for a moment
        b.set_members(["b"])
        ctl_a, ctl_b = FakeController(), FakeController()
        a.observe(ctl_a, r, "ADDED", api.body(r))
        b.observe(ctl_b, r, "ADDED", api.body(r))
        await settled(a, b)
        assert len(api.writes) == 1
        winner = api.writes[0][1]
        assert [a.may_run(r), b.may_run(r)].count(True) == 1
        assert (a if winner == "a" else b).may_run(r)

    asyncio.run(go())


def test_a_deleted_cr_is_forgotten() -> None:
    api = FakeApi()
    s = Shards("a", api.relabel)
    r = ref("x")
    api.versions[r], api.labels[r] = 1, "a"
    s.members = frozenset({"a"})
    s.observe(FakeController(), r, None, api.body(r))
    assert s.may_run(r) and s.held_by_us() == 1
    s.observe(FakeController(), r, "DELETED", api.body(r))
    assert not s.may_run(r) and s.holder(r) is None


# -- membership ----------------------------------------------------------------------------


def lease(name: str, holder: str, renewed: str, duration: int = 15) -> dict[str, Any]:
    return {
        "metadata": {"name": name},
        "spec": {"holderIdentity": holder, "renewTime": renewed, "leaseDurationSeconds": duration},
    }


def test_a_lease_is_live_while_its_renew_time_keeps_changing() -> None:
    now = [100.0]
    liveness = Liveness(lambda: now[0])
    assert liveness.live([lease("l-a", "a", "t1"), lease("l-b", "b", "t1")]) == {
        "l-a": "a",
        "l-b": "b",
    }
    now[0] += 10
    assert set(liveness.live([lease("l-a", "a", "t2"), lease("l-b", "b", "t1")])) == {
        "l-a",
        "l-b",
    }
    now[0] += 6  # b unchanged for 16 s > 15 s: gone; a renewed 6 s ago
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


def handed_to_c() -> tuple[list[float], FakeApi, ObjectRef, Shards]:
    """Replica b at t=10 s, knowing a and b (listed at 9 s), and a CR that hashes to b but
    whose label a set to c, a replica b has not seen yet."""
    now = [10.0]
    api = FakeApi()
    r = owned_by("b", ["a", "b"])
    api.versions[r], api.labels[r] = 1, "c"
    b = Shards("b", api.relabel, clock=lambda: now[0])
    b.set_members(["a", "b"], listed_at=9.0)
    return now, api, r, b


def test_a_holder_not_yet_seen_is_not_taken_for_dead() -> None:
    """a hands a CR to c, which has just joined; b has not seen c's Lease yet. b must not claim
    the CR on the list it has: only on a list of the Leases read after it saw the label."""

    async def go() -> None:
        now, api, r, b = handed_to_c()
        b.observe(FakeController(), r, "MODIFIED", api.body(r))  # label c, seen at 10
        await settled(b)
        assert api.writes == [] and not b.may_run(r)
        now[0] = 11.0
        b.set_members(["a", "b"], listed_at=10.5)  # a newer list: c is gone indeed
        await settled(b)
        assert api.labels[r] == "b" and b.may_run(r)

    asyncio.run(go())


def test_the_next_list_shows_the_new_holder_and_nothing_is_claimed() -> None:
    async def go() -> None:
        now, api, r, b = handed_to_c()
        b.observe(FakeController(), r, "MODIFIED", api.body(r))
        now[0] = 11.0
        b.set_members(["a", "b", "c"], listed_at=10.5)
        await settled(b)
        assert api.writes == [] and not b.may_run(r)

    asyncio.run(go())
