"""The Lease, without I/O: leader election's configuration, record and decision, and the one
builder of the Lease bodies that leader election and the shards write (`lease_object`).

How the elector (leader.py) and the shards' membership (sharding.py) use them is described there.
"""

from __future__ import annotations

import hashlib
import math
import re
import socket
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from enum import Enum
from pathlib import Path
from typing import Any

from runner.util.timestamps import parse_time

LEASE_DURATION = 15.0
RENEW_DEADLINE = 10.0
RETRY_PERIOD = 2.0
JITTER = 0.2  # a standby looks every retry period * (1 .. 1 + JITTER)
_DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")


class ElectionError(ValueError):
    """Leader election cannot be set up as asked (a configuration error)."""


# --- configuration (pure) -----------------------------------------------------------------


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: float = LEASE_DURATION
    renew_deadline: float = RENEW_DEADLINE
    retry_period: float = RETRY_PERIOD

    def __post_init__(self) -> None:
        if not _DNS_SUBDOMAIN.fullmatch(self.name) or len(self.name) > 253:
            raise ElectionError(
                f"--leader-election-id {self.name!r} is not a valid Lease name (lower case "
                "letters, digits, '-' and '.', starting and ending with a letter or digit)"
            )
        if not self.lease_duration > self.renew_deadline:
            raise ElectionError(
                f"the lease duration ({self.lease_duration:g} s) must be longer than the renew "
                f"deadline ({self.renew_deadline:g} s)"
            )
        if not self.renew_deadline > self.retry_period * (1 + JITTER):
            raise ElectionError(
                f"the renew deadline ({self.renew_deadline:g} s) must be longer than "
                f"{1 + JITTER:g} x the retry period ({self.retry_period:g} s)"
            )

    @property
    def lease(self) -> str:
        return f"{self.namespace}/{self.name}"


def default_election_id(groups: Iterable[str]) -> str:
    """`operator-runner-<hash of the watched API groups>`.

    Replicas of one operator share it; operators of other API groups get other Leases. It
    depends on the groups only, not on kinds or versions, so an upgrade that adds a kind or a
    version keeps the Lease, and old and new pods of a rolling update never lead at once. Set
    `--leader-election-id` explicitly (operator-sdk's scaffold passes the project name) to
    be independent of watches.yaml.
    """
    names = sorted({g or "core" for g in groups})
    digest = hashlib.sha256(",".join(names).encode()).hexdigest()[:10]
    return f"operator-runner-{digest}"


def election_namespace(
    flag: str | None,
    environ: Mapping[str, str],
    service_account_file: Path = SERVICE_ACCOUNT_NAMESPACE,
) -> str:
    """--leader-election-namespace, else the pod's namespace (service account, POD_NAMESPACE)."""
    if flag:
        return flag
    try:
        namespace = service_account_file.read_text(encoding="utf-8").strip()
    except OSError:
        namespace = ""
    if namespace:
        return namespace
    namespace = environ.get("POD_NAMESPACE", "").strip()
    if namespace:
        return namespace
    raise ElectionError(
        "--leader-election-namespace is required with --leader-elect outside a cluster "
        "(in a pod it defaults to the pod's namespace; POD_NAMESPACE works too)"
    )


def new_identity() -> str:
    return f"{socket.gethostname()}_{uuid.uuid4()}"


# --- the decision (pure) ------------------------------------------------------------------


def format_time(moment: datetime) -> str:
    """A Kubernetes MicroTime: RFC 3339 in UTC with microseconds."""
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@dataclass(frozen=True)
class LeaseRecord:
    """What a Lease says (its spec), plus its resourceVersion."""

    holder: str | None
    duration: float | None
    acquire_time: datetime | None
    renew_time: datetime | None
    transitions: int
    resource_version: str

    @classmethod
    def from_object(cls, lease: Mapping[str, Any]) -> LeaseRecord:
        spec = lease.get("spec") or {}
        duration = spec.get("leaseDurationSeconds")
        return cls(
            holder=spec.get("holderIdentity") or None,
            duration=float(duration) if isinstance(duration, (int, float)) else None,
            acquire_time=parse_time(spec.get("acquireTime")),
            renew_time=parse_time(spec.get("renewTime")),
            transitions=int(spec.get("leaseTransitions") or 0),
            resource_version=str((lease.get("metadata") or {}).get("resourceVersion") or ""),
        )

    def expires_at(self) -> datetime | None:
        if self.renew_time is None or self.duration is None:
            return None
        return self.renew_time + timedelta(seconds=self.duration)


class Action(Enum):
    CREATE = "create"  # no Lease yet
    ACQUIRE = "acquire"  # free (no holder) or expired: take it
    RENEW = "renew"  # ours: renew it
    WAIT = "wait"  # someone else holds it and it has not expired


@dataclass(frozen=True)
class Decision:
    action: Action
    holder: str | None = None
    expires_at: datetime | None = None  # when WAIT: the earliest moment to take it


def decide(lease: LeaseRecord | None, now: datetime, identity: str) -> Decision:
    """What a candidate `identity` does with the Lease as it is at `now`."""
    if lease is None:
        return Decision(Action.CREATE)
    if lease.holder == identity:
        return Decision(Action.RENEW, holder=identity)
    if lease.holder is None:
        return Decision(Action.ACQUIRE)
    expires = lease.expires_at()
    if expires is None or now >= expires:
        return Decision(Action.ACQUIRE, holder=lease.holder)
    return Decision(Action.WAIT, holder=lease.holder, expires_at=expires)


def lease_object(
    namespace: str,
    name: str,
    *,
    holder: str | None,
    duration: float,
    renewed: datetime,
    acquired: datetime | None = None,
    transitions: int | None = None,
    resource_version: str | None = None,
    labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A coordination.k8s.io/v1 Lease to write: the one builder of leader election's Lease and
    of the shards' Leases. A `resource_version` makes the write fail with 409 if the Lease moved
    on; fields given as None are left out."""
    metadata: dict[str, Any] = {"name": name, "namespace": namespace}
    if labels:
        metadata["labels"] = dict(labels)
    if resource_version:
        metadata["resourceVersion"] = resource_version
    spec: dict[str, Any] = {}
    if holder:
        spec["holderIdentity"] = holder
    spec["leaseDurationSeconds"] = max(1, math.ceil(duration))
    if acquired is not None:
        spec["acquireTime"] = format_time(acquired)
    spec["renewTime"] = format_time(renewed)
    if transitions is not None:
        spec["leaseTransitions"] = transitions
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": metadata,
        "spec": spec,
    }


def lease_body(
    config: ElectionConfig, current: LeaseRecord | None, action: Action, now: datetime
) -> dict[str, Any]:
    """The Lease to write for CREATE, ACQUIRE or RENEW, guarded by `current`'s resourceVersion."""
    if action is Action.WAIT:
        raise ValueError("nothing to write while waiting")
    if action is Action.RENEW and current is not None:
        acquired = current.acquire_time or now
        transitions = current.transitions
    else:
        acquired = now
        transitions = 0 if current is None else current.transitions + 1
    return lease_object(
        config.namespace,
        config.name,
        holder=config.identity,
        duration=config.lease_duration,
        renewed=now,
        acquired=acquired,
        transitions=transitions,
        resource_version=None if current is None else current.resource_version,
    )


def released_body(config: ElectionConfig, current: LeaseRecord, now: datetime) -> dict[str, Any]:
    """The Lease given up: no holder, expiring in 1 s from now (client-go's release)."""
    return lease_object(
        config.namespace,
        config.name,
        holder=None,
        duration=1,
        renewed=now,
        acquired=now,
        transitions=current.transitions,
        resource_version=current.resource_version,
    )
