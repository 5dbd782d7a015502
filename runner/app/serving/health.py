"""Health probes on `--health-probe-bind-address`: `/healthz` and `/readyz`.

`/healthz` (liveness) answers 200 whenever the event loop runs: the handler itself runs on the
loop the watches, the queue and the workers share, so a wedged loop fails the probe.

`/readyz` (readiness) answers 200 when this process is doing, or is ready to do, its job:

- without leader election: once kopf has started (its `ready_flag`, raised after its start-up
  when the watch streams are being spawned), until shutdown begins;
- with leader election, the leader: the same, once it holds the Lease;
- with leader election, a standby: while it campaigns for the Lease and its last read of the
  Lease succeeded within one lease duration. A standby is ready, as in controller-runtime
  (whose readiness does not depend on leadership): it can take over the moment the leader goes,
  and a rolling update of a Deployment with two replicas needs both of them Ready to go on.

Both answer 503 with the reason otherwise (starting, stopping, leadership lost, the API server
out of reach of a standby).

Pieces that must work for this process to be useful add a check (`add_check`): `/readyz` is 200
only when each says so too. The webhooks add theirs (webhooks.py: the server answers TLS with a
certificate the API server trusts, its registrations are written); a standby serves webhooks
too, so its readiness includes them.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from enum import Enum

from aiohttp import web

Check = Callable[[], Awaitable[tuple[bool, str]]]


class Role(Enum):
    STARTING = "starting"
    STANDBY = "standby"
    LEADING = "leading"
    STOPPING = "stopping"
    LOST = "lost"


class Health:
    """What the probes report; the manager and the elector update it."""

    def __init__(
        self, *, stale_after: float = 15.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self.role = Role.STARTING
        self.kopf_ready = asyncio.Event()  # passed to kopf.operator(ready_flag=...)
        self.stale_after = stale_after
        self.standby_detail = ""
        self._clock = clock
        self._lease_read_at: float | None = None
        self._checks: list[Check] = []

    def add_check(self, check: Check) -> None:
        """`/readyz` is ready only when `check` says so too (its detail otherwise)."""
        self._checks.append(check)

    async def ready(self) -> tuple[bool, str]:
        """`readiness`, then each added check."""
        ready, detail = self.readiness()
        if not ready:
            return ready, detail
        for check in self._checks:
            ok, why = await check()
            if not ok:
                return False, why
        return ready, detail

    def standby(self, detail: str) -> None:
        """A standby read the Lease just now (someone else holds it)."""
        self.role = Role.STANDBY
        self.standby_detail = detail
        self._lease_read_at = self._clock()

    def leading(self) -> None:
        self.role = Role.LEADING

    def stopping(self) -> None:
        if self.role is not Role.LOST:
            self.role = Role.STOPPING

    def lost(self) -> None:
        self.role = Role.LOST

    def readiness(self) -> tuple[bool, str]:
        role = self.role
        if role is Role.LEADING:
            if self.kopf_ready.is_set():
                return True, "ok"
            return False, "starting the watches"
        if role is Role.STANDBY:
            assert self._lease_read_at is not None
            age = self._clock() - self._lease_read_at
            if age > self.stale_after:
                return False, f"standby: the Lease could not be read for {age:.0f} s"
            return True, f"standby: {self.standby_detail}"
        if role is Role.STARTING:
            return False, "starting"
        if role is Role.STOPPING:
            return False, "stopping"
        return False, "leader election lost: exiting"

    def app(self) -> web.Application:
        async def healthz(_: web.Request) -> web.Response:
            return web.Response(text="ok\n")

        async def readyz(_: web.Request) -> web.Response:
            ready, detail = await self.ready()
            return web.Response(status=200 if ready else 503, text=detail + "\n")

        app = web.Application()
        app.router.add_get("/healthz", healthz)
        app.router.add_get("/readyz", readyz)
        return app
