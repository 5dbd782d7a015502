"""Leader election with a coordination.k8s.io/v1 Lease, as client-go's leaderelection does it.

With `--leader-elect`, several replicas of the operator may run; only the holder of the Lease
watches and reconciles, the others stand by in `acquire()`.

- Identity: `<hostname>_<random uuid>` (controller-runtime's form), unique per process.
- Acquire: the Lease is taken when it does not exist (create), has no holder (released), or
  has expired: `renewTime + leaseDurationSeconds <= now`. Writes are guarded by the Lease's
  resourceVersion, so of two candidates exactly one wins; the other gets 409 and looks again.
  A standby looks every retry period (2 s, with a little jitter), and, when the Lease will
  expire sooner than that, right at its expiry, so a failover takes about one lease duration
  after the leader's last renewal.
- Renew: the leader renews every retry period. A failed or timed-out renewal (each attempt
  gets half the renew deadline at most) is tried again every retry period; only when it could
  not renew for the renew deadline (10 s), or sees another holder, has it lost the Lease: the
  caller stops reconciling at once and exits non-zero (as controller-runtime does), 5 s before
  anyone else may take the Lease (lease duration 15 s). The deadline counts from the moment
  the last successful renewal was sent, so it is never later than the renewTime others see.
- Release: on a clean shutdown, once the runs in progress ended, the leader writes the Lease
  with no holder, `leaseDurationSeconds: 1` and `renewTime` now, so a standby takes over at its
  next look instead of waiting for the lease to expire.

Expiry is judged on the Lease's own renewTime, so the clocks of the replicas matter: a skew
below lease duration - renew deadline (5 s by default) is tolerated; NTP keeps nodes well within
that. (client-go instead times the lease from when a candidate first saw a record, which ignores
skew but makes a restarted lone operator wait a whole lease duration before it starts.)
"""

from __future__ import annotations

import asyncio
import logging
import random
import time
from collections.abc import Callable
from datetime import UTC, datetime

from runner.app.leases.lease import (
    JITTER,
    Action,
    Decision,
    ElectionConfig,
    LeaseRecord,
    decide,
    lease_body,
    released_body,
)
from runner.kube import client as kube
from runner.kube.client import ApiError, KubeClient

log = logging.getLogger("runner.leader")


# --- the elector (I/O) --------------------------------------------------------------------


class LeaderElector:
    """Campaigns for, holds and releases one Lease through `KubeClient`."""

    def __init__(
        self,
        client: KubeClient,
        config: ElectionConfig,
        *,
        on_standby: Callable[[str], None] = lambda detail: None,
        now: Callable[[], datetime] = lambda: datetime.now(UTC),
        clock: Callable[[], float] = time.monotonic,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.client = client
        self.config = config
        self._on_standby = on_standby
        self._now = now
        self._clock = clock
        self._jitter = jitter  # 0 <= jitter() < 1
        self._record: LeaseRecord | None = None  # the last Lease we read or wrote
        self.leading = False

    # -- one attempt ------------------------------------------------------------------------

    async def _read(self, timeout: float) -> LeaseRecord | None:
        lease = await self.client.send_or_none(
            kube.get_lease(self.config.namespace, self.config.name), timeout=timeout
        )
        return None if lease is None else LeaseRecord.from_object(lease)

    async def try_acquire_or_renew(self, timeout: float, *, renew_only: bool = False) -> Decision:
        """One look at the Lease, and a write when it is ours to take or renew.

        Returns the decision; when it is not WAIT, the write succeeded and we hold the Lease.
        A write that lost a race (409) counts as WAIT: someone else wrote first. With
        `renew_only` (the leader renewing), a Lease that is not ours any more is never taken.
        """
        current = await self._read(timeout)
        now = self._now()
        decision = decide(current, now, self.config.identity)
        if renew_only and decision.action is not Action.RENEW:
            holder = current.holder if current is not None else None
            return Decision(Action.WAIT, holder=holder)
        if decision.action is Action.WAIT:
            self._record = current
            return decision
        body = lease_body(self.config, current, decision.action, now)
        ns, name = self.config.namespace, self.config.name
        request = (
            kube.create_lease(ns, body)
            if decision.action is Action.CREATE
            else kube.replace_lease(ns, name, body)
        )
        try:
            written = await self.client.send(request, timeout=timeout)
        except ApiError as err:
            if err.conflict:
                log.info(
                    "leader election: another candidate wrote Lease %s first", self.config.lease
                )
                return Decision(Action.WAIT, holder=decision.holder)
            raise
        self._record = LeaseRecord.from_object(written)
        return decision

    # -- campaigning ------------------------------------------------------------------------

    async def acquire(self) -> None:
        """Return once we hold the Lease (wait as a standby meanwhile)."""
        config = self.config
        log.info("leader election: campaigning for Lease %s as %s", config.lease, config.identity)
        last_holder: str | None = None
        last_error = ""
        while True:
            try:
                decision = await asyncio.wait_for(
                    self.try_acquire_or_renew(config.renew_deadline), config.renew_deadline
                )
            except (ApiError, OSError, TimeoutError) as err:
                message = str(err) or type(err).__name__
                if message != last_error:
                    log.warning(
                        "leader election: cannot read or write Lease %s: %s (retrying)",
                        config.lease,
                        message,
                    )
                    last_error = message
                await asyncio.sleep(self._retry_delay())
                continue
            last_error = ""
            if decision.action is not Action.WAIT:
                self.leading = True
                log.info(
                    "leader election: became the leader (Lease %s, %s%s)",
                    config.lease,
                    decision.action.value,
                    f", taken over from {decision.holder}" if decision.holder else "",
                )
                return
            holder = decision.holder or "(nobody)"
            self._on_standby(f"Lease {config.lease} is held by {holder}")
            if holder != last_holder:
                log.info(
                    "leader election: standing by, waiting for Lease %s held by %s",
                    config.lease,
                    holder,
                )
                last_holder = holder
            await asyncio.sleep(self._wait_delay(decision))

    def _retry_delay(self) -> float:
        return self.config.retry_period * (1 + self._jitter() * JITTER)

    def _wait_delay(self, decision: Decision) -> float:
        """Until the next look: a retry period, or sooner when the Lease expires sooner."""
        delay = self._retry_delay()
        if decision.expires_at is not None:
            until_expiry = (decision.expires_at - self._now()).total_seconds() + 0.05
            delay = min(delay, max(until_expiry, 0.05))
        return delay

    # -- holding ----------------------------------------------------------------------------

    async def hold(self) -> str:
        """Renew until the Lease is lost; return why. Cancel the task to stop renewing."""
        config = self.config
        last_ok = self._clock()  # acquired just now: the write was sent before this
        while True:
            remaining = last_ok + config.renew_deadline - self._clock()
            await asyncio.sleep(max(0.0, min(config.retry_period, remaining)))
            remaining = last_ok + config.renew_deadline - self._clock()
            if remaining <= 0:
                return self._lose(
                    f"could not renew Lease {config.lease} for {config.renew_deadline:g} s"
                )
            sent = self._clock()
            # one attempt may take half the deadline at most: a request that hangs (a transient
            # timeout) leaves time to try again while the Lease is still ours
            attempt = min(remaining, config.renew_deadline / 2)
            try:
                decision = await asyncio.wait_for(
                    self.try_acquire_or_renew(attempt, renew_only=True), attempt
                )
            except (ApiError, OSError, TimeoutError) as err:
                log.warning(
                    "leader election: renewing Lease %s failed: %s (%.1f s left)",
                    config.lease,
                    str(err) or type(err).__name__,
                    max(0.0, last_ok + config.renew_deadline - self._clock()),
                )
                continue
            if decision.action is Action.WAIT:
                return self._lose(
                    f"Lease {config.lease} is held by {decision.holder or 'someone else'} now"
                )
            last_ok = sent

    def _lose(self, reason: str) -> str:
        self.leading = False
        return reason

    async def release(self, timeout: float = 5.0) -> bool:
        """Give the Lease up (when we hold it) so a standby takes over at once."""
        if not self.leading or self._record is None:
            return False
        self.leading = False
        config = self.config
        record: LeaseRecord | None = self._record
        try:
            for _ in range(2):
                assert record is not None
                body = released_body(config, record, self._now())
                try:
                    await self.client.send(
                        kube.replace_lease(config.namespace, config.name, body), timeout=timeout
                    )
                except ApiError as err:
                    if not err.conflict:
                        raise
                    record = await self._read(timeout)  # 409: it moved on; still ours?
                    if record is None or record.holder != config.identity:
                        return False
                    continue
                log.info("leader election: released Lease %s", config.lease)
                return True
        except (ApiError, OSError) as err:
            log.warning("leader election: releasing Lease %s failed: %s", config.lease, err)
        return False
