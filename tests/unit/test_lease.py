"""The Lease without I/O (runner/app/leases/lease.py): the decision as a pure function, the
Lease bodies written (by one builder, for leader election and the shards alike), the
configuration."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from runner.app.leases.lease import (
    Action,
    ElectionConfig,
    ElectionError,
    LeaseRecord,
    decide,
    default_election_id,
    election_namespace,
    format_time,
    lease_body,
    lease_object,
    parse_time,
    released_body,
)
from runner.app.leases.sharding import GROUP_LABEL, ShardingConfig
from runner.app.leases.sharding import lease_body as shard_lease_body

NOW = datetime(2030, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
ME = "host-a_1111"
OTHER = "host-b_2222"


def record(
    holder: str | None = OTHER,
    renewed_ago: float = 1.0,
    duration: float | None = 15.0,
    transitions: int = 3,
) -> LeaseRecord:
    return LeaseRecord(
        holder=holder,
        duration=duration,
        acquire_time=NOW - timedelta(seconds=100),
        renew_time=NOW - timedelta(seconds=renewed_ago),
        transitions=transitions,
        resource_version="42",
    )


# --- decide ---------------------------------------------------------------------------------


def test_no_lease_is_created() -> None:
    assert decide(None, NOW, ME).action is Action.CREATE


def test_own_lease_is_renewed() -> None:
    assert decide(record(holder=ME), NOW, ME).action is Action.RENEW
    # even if it looks expired: it is ours, nobody else may have written it
    assert decide(record(holder=ME, renewed_ago=60), NOW, ME).action is Action.RENEW


def test_someone_elses_valid_lease_is_waited_for_until_it_expires() -> None:
    decision = decide(record(renewed_ago=5), NOW, ME)
    assert decision.action is Action.WAIT
    assert decide(record(renewed_ago=14.999999), NOW, ME).action is Action.WAIT
    assert decision.holder == OTHER
    assert decision.expires_at == NOW + timedelta(seconds=10)


def test_expired_lease_is_taken() -> None:
    assert decide(record(renewed_ago=15), NOW, ME).action is Action.ACQUIRE  # exactly at expiry
    decision = decide(record(renewed_ago=16), NOW, ME)
    assert decision.action is Action.ACQUIRE and decision.holder == OTHER


def test_released_lease_is_taken_at_once() -> None:
    released = record(holder=None, renewed_ago=0.1, duration=1)
    assert decide(released, NOW, ME).action is Action.ACQUIRE


def test_lease_without_renew_time_or_duration_counts_as_expired() -> None:
    assert decide(record(duration=None), NOW, ME).action is Action.ACQUIRE
    broken = LeaseRecord(OTHER, 15.0, None, None, 0, "1")
    assert decide(broken, NOW, ME).action is Action.ACQUIRE


# --- the Lease written -----------------------------------------------------------------------

CONFIG = ElectionConfig(namespace="ops", name="my-operator", identity=ME)


def test_created_lease() -> None:
    body = lease_body(CONFIG, None, Action.CREATE, NOW)
    assert body["metadata"] == {"name": "my-operator", "namespace": "ops"}
    assert body["spec"] == {
        "holderIdentity": ME,
        "leaseDurationSeconds": 15,
        "acquireTime": "2030-01-02T03:04:05.678901Z",
        "renewTime": "2030-01-02T03:04:05.678901Z",
        "leaseTransitions": 0,
    }


def test_taken_lease_counts_a_transition_and_is_guarded_by_resource_version() -> None:
    body = lease_body(CONFIG, record(renewed_ago=20), Action.ACQUIRE, NOW)
    assert body["metadata"]["resourceVersion"] == "42"
    assert body["spec"]["holderIdentity"] == ME
    assert body["spec"]["leaseTransitions"] == 4
    assert body["spec"]["acquireTime"] == format_time(NOW)


def test_renewal_keeps_acquire_time_and_transitions() -> None:
    current = record(holder=ME)
    body = lease_body(CONFIG, current, Action.RENEW, NOW)
    assert body["spec"]["renewTime"] == format_time(NOW)
    assert body["spec"]["acquireTime"] == format_time(NOW - timedelta(seconds=100))
    assert body["spec"]["leaseTransitions"] == 3


def test_release_leaves_no_holder_and_expires_in_a_second() -> None:
    body = released_body(CONFIG, record(holder=ME), NOW)
    assert "holderIdentity" not in body["spec"]
    assert body["spec"]["leaseDurationSeconds"] == 1
    assert body["spec"]["renewTime"] == format_time(NOW)
    assert body["metadata"]["resourceVersion"] == "42"
    assert decide(LeaseRecord.from_object(body), NOW, OTHER).action is Action.ACQUIRE


def test_nothing_is_written_while_waiting() -> None:
    with pytest.raises(ValueError):
        lease_body(CONFIG, record(), Action.WAIT, NOW)


def test_lease_object_round_trip() -> None:
    body = lease_body(CONFIG, None, Action.CREATE, NOW)
    body["metadata"]["resourceVersion"] = "7"
    parsed = LeaseRecord.from_object(body)
    assert parsed == LeaseRecord(ME, 15.0, NOW, NOW, 0, "7")
    assert parse_time("2030-01-02T03:04:05Z") == NOW.replace(microsecond=0)
    assert parse_time("garbage") is None and parse_time(None) is None


# --- the one builder: the election's Lease and the shards' ---------------------------------

STAMP = "2030-01-02T03:04:05.678901Z"


def test_every_field_and_the_order_of_a_full_lease() -> None:
    body = lease_object(
        "ops",
        "op",
        holder="me",
        duration=14.2,
        renewed=NOW,
        acquired=NOW,
        transitions=2,
        resource_version="9",
        labels={"a": "b"},
    )
    assert body == {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": "op",
            "namespace": "ops",
            "labels": {"a": "b"},
            "resourceVersion": "9",
        },
        "spec": {
            "holderIdentity": "me",
            "leaseDurationSeconds": 15,  # whole seconds, rounded up
            "acquireTime": STAMP,
            "renewTime": STAMP,
            "leaseTransitions": 2,
        },
    }
    assert list(body["spec"]) == [
        "holderIdentity",
        "leaseDurationSeconds",
        "acquireTime",
        "renewTime",
        "leaseTransitions",
    ]


def test_fields_not_given_are_left_out() -> None:
    body = lease_object("ops", "op", holder=None, duration=0.2, renewed=NOW)
    assert body["metadata"] == {"name": "op", "namespace": "ops"}
    assert body["spec"] == {"leaseDurationSeconds": 1, "renewTime": STAMP}


def test_a_shard_lease_is_the_election_lease_with_a_label_and_without_acquisitions() -> None:
    shard = ShardingConfig("ops", "op", "pod-a", 15.0, 10.0, 2.0)
    body = shard_lease_body(shard, NOW, "5")
    assert body["metadata"] == {
        "name": shard.lease_name,
        "namespace": "ops",
        "labels": {GROUP_LABEL: "op"},
        "resourceVersion": "5",
    }
    assert body["spec"] == {
        "holderIdentity": "pod-a",
        "leaseDurationSeconds": 15,
        "renewTime": STAMP,
    }
    election = lease_body(ElectionConfig("ops", "op", "pod-a"), None, Action.CREATE, NOW)
    shared = {k: v for k, v in election["spec"].items() if k in body["spec"]}
    assert shared == body["spec"]


# --- configuration ---------------------------------------------------------------------------


def test_default_id_depends_on_the_groups_only() -> None:
    one = default_election_id(["b.example.com", "a.example.com", "a.example.com"])
    assert one == default_election_id(["a.example.com", "b.example.com"])
    assert one != default_election_id(["a.example.com"])
    assert one.startswith("operator-runner-") and len(one) == len("operator-runner-") + 10
    ElectionConfig(namespace="ns", name=one, identity=ME)  # a valid Lease name


def test_namespace_flag_then_service_account_then_env(tmp_path: Path) -> None:
    sa = tmp_path / "namespace"
    missing = tmp_path / "missing"
    assert election_namespace("flag", {"POD_NAMESPACE": "env"}, sa) == "flag"
    sa.write_text("from-sa\n")
    assert election_namespace(None, {"POD_NAMESPACE": "env"}, sa) == "from-sa"
    assert election_namespace(None, {"POD_NAMESPACE": "env"}, missing) == "env"
    with pytest.raises(ElectionError, match="--leader-election-namespace is required"):
        election_namespace(None, {}, missing)


def test_bad_configs() -> None:
    with pytest.raises(ElectionError, match="not a valid Lease name"):
        ElectionConfig(namespace="ns", name="Bad_Name", identity=ME)
    with pytest.raises(ElectionError, match="longer than the renew deadline"):
        ElectionConfig(namespace="ns", name="x", identity=ME, lease_duration=10)
    with pytest.raises(ElectionError, match="retry period"):
        ElectionConfig(namespace="ns", name="x", identity=ME, renew_deadline=2, retry_period=2)
