"""Sharding: replicas of one operator divide its CRs among themselves.

Which replica owns a CR is decided by rendezvous (highest random weight) hashing of the CR's
namespace/name over the live replicas (app/leases/sharding.py keeps that list from their Leases).
Every replica computes the same answer from the same list, so no replica has to be the
sharder; when a replica joins or leaves, only the CRs it gains or loses move.

Who *holds* a CR is written on the CR, in the label `LABEL` (`kubectl get -L` shows the split),
and that label is what makes handover safe: a replica runs a CR only while the label names it
*and* the hashing assigns it the CR. The label changes hands in two ways only:

- **handover**: the holder, once it is no longer assigned the CR and no run of it is going on,
  takes it out of its queue and writes the new owner's name;
- **claim**: the assigned replica writes its own name when the label is empty or names a
  replica that is not live (its Lease expired: a replica that cannot renew its Lease in time
  stops every run and exits before it expires, app/leases/sharding.py). "Not live" is judged on
  a list of the Leases read *after* the label was seen: a replica that just joined (and was
  handed the CR by a replica that already knows it) has written its Lease before it could hold
  anything, so that list shows it, and it is not taken for dead by a replica that has not seen
  it yet.

Both writes are a compare-and-swap of the label: they succeed only if the label still names
the holder they were decided on (read, then written with that read's resourceVersion), so of two
replicas that decide at once (their lists of replicas differ for a moment), one wins and the
other sees the result.
So a CR never has two runs at once across replicas. The new holder runs the CR as soon as it
holds it (in the event lane): its dependents' watches and its resync start there.

This module decides and keeps the state; writing the label is the `relabel` callable's (the
app builds it on the kube client). No other I/O.
"""

from __future__ import annotations

import asyncio
import hashlib
import logging
import math
import time
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from runner.control.queue import Lane
from runner.kube.resources import ObjectRef
from runner.util.logs import cr_fields

log = logging.getLogger("runner.shards")

LABEL = "operator-runner.dev/shard"

#: relabel(ref, expected, holder): set the label to `holder` if it still says `expected` ("": no
#: label); the CR's new resourceVersion, or None when the label says otherwise or the CR is gone.
Relabel = Callable[[ObjectRef, str, str], Awaitable[str | None]]

RETRY_AFTER = 2.0  # seconds: a label write that failed (the API away) is tried again


def weight(member: str, key: str) -> int:
    digest = hashlib.blake2b(f"{member}\0{key}".encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big")


def rendezvous(key: str, members: Iterable[str]) -> str | None:
    """The member with the highest weight for `key` (None when there is none)."""
    return max(members, key=lambda m: (weight(m, key), m), default=None)


def shard_key(ref: ObjectRef) -> str:
    return f"{ref.namespace or ''}/{ref.name}"


class Queued(Protocol):
    """What shards need of a controller: its queue and whether a key is running."""

    def running(self, ref: ObjectRef) -> bool: ...

    def forget(self, ref: ObjectRef) -> None: ...

    def enqueue(self, ref: ObjectRef, delay: float = 0.0, lane: Lane = Lane.EVENT) -> None: ...


@dataclass
class _Held:
    holder: str  # the label's value ("" when the CR has none)
    resource_version: str
    controller: Queued
    seen_at: float  # when this label value was seen (the clock's time)


class Shards:
    """One per operator process, shared by its controllers."""

    def __init__(
        self, me: str, relabel: Relabel, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.me = me
        self.members: frozenset[str] = frozenset()  # live replicas, us included once we are
        self._relabel = relabel
        self._clock = clock
        self._listed_at = -math.inf  # when the Leases behind `members` were listed
        self._crs: dict[ObjectRef, _Held] = {}
        self._pending: set[ObjectRef] = set()  # claims that wait for a newer list of Leases
        self._writing: set[ObjectRef] = set()
        self._tasks: set[asyncio.Task[None]] = set()

    # -- what the controllers ask -----------------------------------------------------------

    def owner(self, ref: ObjectRef) -> str | None:
        """The replica the hashing assigns `ref` to."""
        return rendezvous(shard_key(ref), self.members)

    def may_run(self, ref: ObjectRef) -> bool:
        """True while we hold `ref` (the label names us) and are assigned it."""
        held = self._crs.get(ref)
        return held is not None and held.holder == self.me and self.owner(ref) == self.me

    def holder(self, ref: ObjectRef) -> str | None:
        held = self._crs.get(ref)
        return None if held is None else held.holder

    def observe(
        self, controller: Queued, ref: ObjectRef, event_type: str | None, body: Mapping[str, Any]
    ) -> None:
        """A watch event of a CR (any CR, held by us or not)."""
        if event_type == "DELETED":
            self._crs.pop(ref, None)
            self._pending.discard(ref)
            return
        meta = body.get("metadata") or {}
        holder = str((meta.get("labels") or {}).get(LABEL) or "")
        rv = str(meta.get("resourceVersion") or "")
        previous = self._crs.get(ref)
        seen_at = self._clock()
        if previous is not None and previous.holder == holder:
            seen_at = previous.seen_at
        self._crs[ref] = _Held(holder, rv, controller, seen_at)
        if previous is not None and previous.holder != self.me and holder == self.me:
            controller.enqueue(ref)  # handed over to us: run it now (its dependents' watches)
        self.settle(ref)

    def set_members(self, members: Iterable[str], listed_at: float | None = None) -> None:
        """The live replicas, from a list of the Leases begun at `listed_at` (default: now):
        claim and hand over what moved, and the claims that waited for a newer list."""
        self._listed_at = self._clock() if listed_at is None else listed_at
        members = frozenset(members)
        if members != self.members:
            self.members = members
            waiting = list(self._crs)
        else:
            waiting = list(self._pending)
        self._pending.clear()
        for ref in waiting:
            self.settle(ref)

    # -- claims and handovers ---------------------------------------------------------------

    def settle(self, ref: ObjectRef) -> None:
        """Claim `ref` or hand it over if it is ours to do now (after its run, if one goes on)."""
        held = self._crs.get(ref)
        if held is None or ref in self._writing:
            return
        owner = self.owner(ref)
        if owner is None:
            return
        if owner == self.me and held.holder != self.me and held.holder not in self.members:
            if held.holder and held.seen_at >= self._listed_at:
                self._pending.add(ref)  # is its holder gone, or new? the next list tells
                return
            self._write(ref, held, self.me, "claimed" if held.holder else "took")
        elif owner != self.me and held.holder == self.me and not held.controller.running(ref):
            held.controller.forget(ref)
            self._write(ref, held, owner, "handed over")

    def _write(self, ref: ObjectRef, held: _Held, holder: str, verb: str) -> None:
        self._writing.add(ref)
        task = asyncio.get_running_loop().create_task(
            self._relabel_and_record(ref, held, holder, verb), name=f"shard-{verb}"
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _relabel_and_record(
        self, ref: ObjectRef, held: _Held, holder: str, verb: str
    ) -> None:
        fields = cr_fields(ref.resource.kind, ref.namespace, ref.name)
        try:
            rv = await self._relabel(ref, held.holder, holder)
        except Exception as err:  # the API is away: try again in a moment
            log.warning("could not write the shard label: %s", err, extra=fields)
            asyncio.get_running_loop().call_later(RETRY_AFTER, self.settle, ref)
            return
        finally:
            self._writing.discard(ref)
        current = self._crs.get(ref)
        if rv is None or current is None:
            return  # someone else changed the label first (or the CR is gone): its event follows
        if current.resource_version == held.resource_version:  # else a newer event is recorded
            current.holder, current.resource_version = holder, rv
            current.seen_at = self._clock()
        log.info("%s %s (shard %s)", verb, shard_key(ref), holder, extra=fields)
        if holder == self.me:
            held.controller.enqueue(ref)
        self.settle(ref)

    def held_by_us(self) -> int:
        return sum(1 for held in self._crs.values() if held.holder == self.me)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
