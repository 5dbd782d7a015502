"""--sharding: each replica announces itself with a Lease of its own; the live ones share the CRs.

Every replica of one operator (one shard group: the leader election id, by default
`operator-runner-<hash of the watched API groups>`) keeps a Lease `<group>-shard-<hash of its
identity>` in the election namespace, labelled `operator-runner.dev/shard-group=<group>`, and
renews it every retry period. Every retry period it also lists the group's Leases: a Lease is
live while its renewTime keeps changing, as seen by this replica's own clock (client-go's
leader election judges expiry the same way: no trust in other machines' clocks), that is, it
changed less than its leaseDurationSeconds ago. The live holders are handed to
`control/shards.py`, which divides the CRs.

A replica that cannot renew its own Lease within the renew deadline stops every run and exits
(`on_lost`), before the others may consider it gone (the lease duration, which is longer): so a
CR claimed from a replica whose Lease expired is not being run by it. At a clean shutdown the
Lease is deleted once the runs ended, and the others take over at their next look.

Identity: $POD_NAME, else `<hostname>-<pid>`; it is also the value of the CRs' shard label, so
it is made a valid label value.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import os
import re
import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from runner.app.leases.lease import (
    ElectionError,
    default_election_id,
    election_namespace,
    lease_object,
)
from runner.control.shards import LABEL, Relabel
from runner.kube import client as kube
from runner.kube.client import ApiError, KubeClient
from runner.kube.resources import ObjectRef

log = logging.getLogger("runner.sharding")

GROUP_LABEL = "operator-runner.dev/shard-group"
_LABEL_VALUE = re.compile(r"[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?")


def _digest(text: str, size: int = 10) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:size]


def label_value(text: str) -> str:
    """`text` if it is a valid label value, else a readable prefix of it and a hash."""
    if _LABEL_VALUE.fullmatch(text):
        return text
    prefix = re.sub(r"[^-A-Za-z0-9_.]", "-", text)[:50].strip("-_.")
    return f"{prefix}-{_digest(text)}" if prefix else _digest(text, 16)


def shard_identity(environ: Mapping[str, str], pid: int | None = None) -> str:
    pod = environ.get("POD_NAME", "").strip()
    raw = pod or f"{socket.gethostname()}-{os.getpid() if pid is None else pid}"
    return label_value(raw)


@dataclass(frozen=True)
class ShardingConfig:
    namespace: str
    group: str  # the leader election id: replicas of one operator share it
    identity: str
    lease_duration: float
    renew_deadline: float
    retry_period: float

    @property
    def lease_name(self) -> str:
        return f"{self.group}-shard-{_digest(self.identity)}"

    @property
    def selector(self) -> str:
        return f"{GROUP_LABEL}={label_value(self.group)}"


def lease_body(
    config: ShardingConfig, now: datetime, resource_version: str | None
) -> dict[str, Any]:
    """This replica's Lease: its identity, renewed `now`, labelled with its group."""
    return lease_object(
        config.namespace,
        config.lease_name,
        holder=config.identity,
        duration=config.lease_duration,
        renewed=now,
        resource_version=resource_version,
        labels={GROUP_LABEL: label_value(config.group)},
    )


class Liveness:
    """Which Leases are live, judged by when this process saw their renewTime change (pure)."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._seen: dict[str, tuple[str, float]] = {}  # lease name -> (renewTime, seen at)

    def live(self, leases: list[Mapping[str, Any]]) -> dict[str, str]:
        """Lease name -> holder of each live Lease among `leases` (a list of the group's)."""
        now = self._clock()
        live: dict[str, str] = {}
        names = set()
        for lease in leases:
            name = str((lease.get("metadata") or {}).get("name") or "")
            spec = lease.get("spec") or {}
            holder, renewed = spec.get("holderIdentity"), str(spec.get("renewTime") or "")
            names.add(name)
            previous = self._seen.get(name)
            if previous is None or previous[0] != renewed:
                self._seen[name] = (renewed, now)
            seen_at = self._seen[name][1]
            duration = float(spec.get("leaseDurationSeconds") or 0)
            if holder and now - seen_at < duration:
                live[name] = str(holder)
        for gone in set(self._seen) - names:
            del self._seen[gone]
        return live


class Membership:
    """Keeps this replica's Lease and tells `on_members` who is live (and when the Leases were
    listed) after every look; `on_lost` when the Lease
    could not be renewed in time (the caller stops every run and exits)."""

    def __init__(
        self,
        client: KubeClient,
        config: ShardingConfig,
        on_members: Callable[[frozenset[str], float], None],
        on_lost: Callable[[str], None],
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.client = client
        self.config = config
        self._on_members = on_members
        self._on_lost = on_lost
        self._clock = clock
        self._now = now
        self._liveness = Liveness(clock)
        self._resource_version: str | None = None
        self._renewed_at: float | None = None
        self._members: frozenset[str] | None = None
        self._task: asyncio.Task[None] | None = None

    async def join(self) -> None:
        """Write our Lease and read the group once (errors are the caller's: start-up fails)."""
        await self._renew()
        await self._look()
        self._task = asyncio.create_task(self._loop(), name="sharding-membership")

    async def _renew(self) -> None:
        ns, name = self.config.namespace, self.config.lease_name
        body = lease_body(self.config, self._now(), self._resource_version)
        try:
            if self._resource_version is None:
                written = await self._create_or_replace(body)
            else:
                written = await self.client.send(kube.replace_lease(ns, name, body), timeout=5)
        except ApiError as err:
            if err.conflict or err.not_found:  # removed or changed by hand: write it afresh
                self._resource_version = None
            raise
        self._resource_version = str(written["metadata"]["resourceVersion"])
        self._renewed_at = self._clock()

    async def _create_or_replace(self, body: dict[str, Any]) -> Any:
        ns, name = self.config.namespace, self.config.lease_name
        try:
            return await self.client.send(kube.create_lease(ns, body), timeout=5)
        except ApiError as err:
            if not err.conflict:
                raise
        current = await self.client.send(kube.get_lease(ns, name), timeout=5)  # ours, restarted
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return await self.client.send(kube.replace_lease(ns, name, body), timeout=5)

    async def _look(self) -> None:
        listed_at = self._clock()
        listing = await self.client.send(
            kube.list_leases(self.config.namespace, self.config.selector), timeout=5
        )
        live = self._liveness.live(listing.get("items") or [])
        members = frozenset(live.values()) | {self.config.identity}
        if members != self._members:
            log.info("shards: %d live: %s", len(members), ", ".join(sorted(members)))
            self._members = members
        self._on_members(members, listed_at)  # every look: claims may wait for a newer one

    async def _loop(self) -> None:
        period = self.config.retry_period
        while True:
            await asyncio.sleep(period)  # a schedule: renew and look every retry period
            try:
                await self._renew()
                await self._look()
            except (ApiError, OSError) as err:
                silent = self._clock() - (self._renewed_at or 0.0)
                if silent >= self.config.renew_deadline:
                    self._on_lost(
                        f"could not renew the shard Lease {self.config.lease_name} for "
                        f"{silent:.0f} s ({err})"
                    )
                    return
                log.warning("shard Lease: %s (retrying)", err)

    async def stop(self) -> None:
        """Stop renewing our Lease (it expires by itself)."""
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def leave(self) -> None:
        """Stop renewing and delete our Lease (after the runs ended): the others take over.
        Nothing to delete when it was never written (a join refused)."""
        await self.stop()
        if self._renewed_at is None:
            return
        try:
            await self.client.send_or_none(
                kube.delete_lease(self.config.namespace, self.config.lease_name), timeout=5
            )
            log.info("shard Lease %s deleted: the others take over", self.config.lease_name)
        except (ApiError, OSError) as err:
            log.warning("could not delete the shard Lease (it expires by itself): %s", err)


def sharding_config(
    election_id: str | None,
    election_namespace_flag: str | None,
    durations: tuple[float, float, float],
    groups: list[str],
    environ: Mapping[str, str],
) -> ShardingConfig:
    """The shard group of this operator: the leader election's id, namespace and durations
    (`--leader-election-*`), this replica's identity. A bad set-up exits with one message."""
    lease_duration, renew_deadline, retry_period = durations
    try:
        namespace = election_namespace(election_namespace_flag, environ)
    except ElectionError as err:
        message = str(err).replace("with --leader-elect", "with --sharding")
        raise SystemExit(f"operator-runner: {message}") from None
    if not lease_duration > renew_deadline > retry_period:
        raise SystemExit(
            "operator-runner: --sharding needs lease duration > renew deadline > retry period, "
            f"not {lease_duration:g} s, {renew_deadline:g} s, {retry_period:g} s"
        )
    return ShardingConfig(
        namespace=namespace,
        group=election_id or default_election_id(groups),
        identity=shard_identity(environ),
        lease_duration=lease_duration,
        renew_deadline=renew_deadline,
        retry_period=retry_period,
    )


def relabeller(client: KubeClient, attempts: int = 5) -> Relabel:
    """How shards write a CR's shard label: a compare-and-swap on its value (read the CR, then
    patch it with that read's resourceVersion; a 409 reads again)."""

    async def relabel(ref: ObjectRef, expected: str, holder: str) -> str | None:
        for _ in range(attempts):
            obj = await client.get_or_none(ref)
            if obj is None:
                return None
            meta = obj.get("metadata") or {}
            if str((meta.get("labels") or {}).get(LABEL) or "") != expected:
                return None
            request = kube.set_label(ref, LABEL, holder, str(meta.get("resourceVersion") or ""))
            try:
                written = await client.send(request, 10)
            except ApiError as err:
                if err.conflict:
                    continue  # the CR changed meanwhile (its status, ...): read it again
                if err.not_found:
                    return None
                raise
            return str(written["metadata"]["resourceVersion"])
        return None

    return relabel
