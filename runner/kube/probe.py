"""While the API server is unreachable, ask it for /version every second: "back" is said (by
`runner.kube.reachability`) as soon as it answers, even if nothing else of ours needs the API
then."""

from __future__ import annotations

import asyncio
import contextlib

from runner.kube.client import KubeClient, Request
from runner.kube.reachability import API, Reachability


class Prober:
    """While the server is unreachable, ask it for /version every `every` s until it answers."""

    def __init__(
        self, client: KubeClient, reachability: Reachability = API, every: float = 1.0
    ) -> None:
        self.client = client
        self.reachability = reachability
        self.every = every
        self._task: asyncio.Task[None] | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def start(self) -> None:
        """From now on an outage starts the probe (call on the event loop)."""
        self._loop = asyncio.get_running_loop()
        self.reachability.on_unreachable = self._wake
        if not self.reachability.reachable:
            self._probe_soon()

    def _wake(self) -> None:  # any thread
        if self._loop is not None and not self._loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop is closing
                self._loop.call_soon_threadsafe(self._probe_soon)

    def _probe_soon(self) -> None:
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._probe(), name="api-probe")

    async def _probe(self) -> None:
        while not self.reachability.reachable:
            await asyncio.sleep(self.every)
            with contextlib.suppress(Exception):  # the client reports the outcome itself
                await self.client.send(Request("GET", "/version"), timeout=self.every * 2)

    async def stop(self) -> None:
        self.reachability.on_unreachable = None
        if self._task is not None:
            self._task.cancel()
            await asyncio.gather(self._task, return_exceptions=True)
