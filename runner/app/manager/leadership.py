"""When this process may reconcile: at once, or, with `--leader-elect`, once it holds the Lease.

The manager's use of it, in order:

    leadership = Leadership(elector, shutdown, health, serving.set_leader)
    if not await leadership.lead():   # SIGTERM while standing by: nothing ran, exit 0
        ...
    <kopf's cleanup>: await leadership.release_at_cleanup()
    finally: ...; await leadership.close()

`lead` returns at once without leader election; with it, once this process holds the Lease
(runner/app/leases/leader.py), and it keeps renewing it in the background while the runs in
progress finish after SIGTERM: the Lease is released only once nothing of ours runs any more, in
kopf's cleanup phase (`release_at_cleanup`), or at the latest in `close`. A Lease lost (not
renewed within the renew deadline, or taken over) stops everything (`Shutdown.lose`) before
anyone else may take it.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable, Iterable, Mapping

from runner.app.leases.leader import LeaderElector
from runner.app.leases.lease import (
    ElectionConfig,
    ElectionError,
    default_election_id,
    election_namespace,
    new_identity,
)
from runner.app.manager.shutdown import Shutdown
from runner.app.serving.health import Health

log = logging.getLogger("runner.production")


def election_config(
    election_id: str | None,
    election_namespace_flag: str | None,
    durations: tuple[float, float, float],
    groups: Iterable[str],
    environ: Mapping[str, str],
) -> ElectionConfig:
    """The Lease of `--leader-elect`: `--leader-election-id` (else one named after the watched
    API groups) in `--leader-election-namespace`; a bad set-up exits with one message."""
    lease_duration, renew_deadline, retry_period = durations
    try:
        return ElectionConfig(
            namespace=election_namespace(election_namespace_flag, environ),
            name=election_id or default_election_id(groups),
            identity=new_identity(),
            lease_duration=lease_duration,
            renew_deadline=renew_deadline,
            retry_period=retry_period,
        )
    except ElectionError as err:
        raise SystemExit(f"operator-runner: {err}") from None


class Leadership:
    """Leader election as the manager sees it: lead, keep leading, give the Lease up."""

    def __init__(
        self,
        elector: LeaderElector | None,
        shutdown: Shutdown,
        health: Health,
        set_leader: Callable[[str, bool], None] = lambda lease, leading: None,
    ) -> None:
        self.elector = elector  # None: no leader election
        self._shutdown = shutdown
        self._health = health
        self._set_leader = set_leader  # the leader_election_master_status gauge
        self._hold: asyncio.Task[None] | None = None

    async def lead(self) -> bool:
        """True once this process may reconcile; False when it was stopped before that."""
        stop_flag = self._shutdown.stop_flag
        elector = self.elector
        if elector is None:
            self._health.leading()
            return not stop_flag.is_set()
        self._leading(False)
        acquire = asyncio.create_task(elector.acquire(), name="leader-election-acquire")
        stopped = asyncio.create_task(stop_flag.wait(), name="leader-election-stop")
        await asyncio.wait({acquire, stopped}, return_when=asyncio.FIRST_COMPLETED)
        for task in (acquire, stopped):
            if not task.done():
                task.cancel()
        await asyncio.gather(acquire, stopped, return_exceptions=True)
        if stop_flag.is_set():
            log.info("stopped while standing by")
            await elector.release()
            return False
        acquire.result()  # re-raise what went wrong (a bug: API errors are retried)
        self._health.leading()
        self._leading(True)
        self._hold = asyncio.create_task(self._keep(elector), name="leader-election-renew")
        return True

    async def _keep(self, elector: LeaderElector) -> None:
        reason = await elector.hold()
        config = elector.config
        self._leading(False)
        self._shutdown.lose(
            f"leader election lost: {reason}", config.lease_duration - config.renew_deadline
        )

    def _leading(self, leading: bool) -> None:
        if self.elector is not None:
            self._set_leader(self.elector.config.name, leading)

    async def release_at_cleanup(self) -> None:
        """In kopf's cleanup: once no run of ours goes on and none can start, give the Lease up.

        kopf runs cleanup handlers once its watches stopped, but only then waits up to 5 s for
        the tasks spawned meanwhile (dependent watches, ...) before it returns; releasing the
        Lease here spares the standby that wait. Never raises: `close` releases as a fallback.
        """
        try:
            self._health.stopping()
            elector = self.elector
            if self._shutdown.exit_code or elector is None or not elector.leading:
                return
            log.info("stopping: the Lease is released once the running reconciles ended")
            await self._shutdown.drained()
            await self._stop_renewing()
            await elector.release()
            self._leading(False)
        except Exception:  # never fail kopf's cleanup
            log.exception("releasing the Lease at shutdown failed")

    async def _stop_renewing(self) -> None:
        if self._hold is not None:
            self._hold.cancel()
            await asyncio.gather(self._hold, return_exceptions=True)

    async def close(self) -> None:
        """After the controllers stopped: stop renewing, release the Lease (on a clean exit)."""
        await self._stop_renewing()
        if self.elector is not None and self._shutdown.exit_code == 0:
            await self.elector.release()
            self._leading(False)
