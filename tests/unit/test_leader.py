"""Leader election: the elector (runner/app/leases/leader.py) and the manager's side of it
(runner/app/manager/leadership.py, with the endpoints and the shutdown), against the fake API on
the fake clock."""

from __future__ import annotations

import asyncio
import itertools
import random
from collections.abc import Callable, Coroutine
from datetime import timedelta
from typing import Any, cast

import fake_api
import pytest
from fake_api import Exchange, FakeApi, FakeClock

from runner.app.leases.leader import LeaderElector
from runner.app.leases.lease import (
    JITTER,
    LEASE_DURATION,
    RENEW_DEADLINE,
    RETRY_PERIOD,
    Action,
    ElectionConfig,
    LeaseRecord,
    lease_body,
)
from runner.app.manager.leadership import Leadership, election_config
from runner.app.manager.shutdown import Shutdown
from runner.app.serving.endpoints import Addresses, Serving
from runner.app.serving.health import Health
from runner.app.serving.metrics import PrometheusMetrics
from runner.app.serving.metricsserver import MetricsSecurity
from runner.kube import client as kube

# --- the elector against the fake API, on the fake clock ---------------------------------------
#
# Each test runs on virtual time (fake_api.run): `await asyncio.sleep(s)` lets s seconds pass at
# once, and every moment below is exact. The durations are the defaults: lease 15 s, renew
# deadline 10 s, retry period 2 s.

LEASE = kube.lease_path("ops", "op")
REFUSED = ConnectionRefusedError("connection refused")
LOOK = RETRY_PERIOD * (1 + JITTER)  # the longest a standby waits between two looks


def elector(
    api: FakeApi, identity: str, jitter: Callable[[], float] | None = None
) -> LeaderElector:
    """An elector for Lease ops/op on `api`, its time `api.clock`'s, its jitter seeded."""
    assert api.clock is not None
    config = ElectionConfig(namespace="ops", name="op", identity=identity)
    return LeaderElector(
        api.client(),
        config,
        now=api.clock.wall,
        clock=api.clock,
        jitter=jitter or random.Random(identity).random,
    )


def current(api: FakeApi) -> LeaseRecord:
    lease = api.get(LEASE)
    assert lease is not None, "no Lease"
    return LeaseRecord.from_object(lease)


def held_by(api: FakeApi, identity: str, lease_duration: float = LEASE_DURATION) -> None:
    """The Lease, as `identity` created it just now (and will never renew it)."""
    assert api.clock is not None
    config = ElectionConfig("ops", "op", identity, lease_duration, lease_duration - 1)
    api.put(LEASE, lease_body(config, None, Action.CREATE, api.clock.wall()))


def lease_requests(api: FakeApi, method: str) -> list[Exchange]:
    return [e for e in api.exchanges if e.request.path == LEASE and e.request.method == method]


def run_leases(test: Callable[[FakeApi], Coroutine[Any, Any, None]]) -> None:
    """Run `test` on virtual time with a fake API whose clock is the loop's."""
    clock = FakeClock()
    fake_api.run(test(FakeApi(clock)), clock)


def test_exactly_one_of_two_candidates_leads_and_the_other_takes_over_when_it_goes() -> None:
    async def go(api: FakeApi) -> None:
        a, b = elector(api, "a"), elector(api, "b")
        tasks = {asyncio.create_task(a.acquire()): a, asyncio.create_task(b.acquire()): b}
        done, pending = await asyncio.wait(tasks, timeout=2, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        leader = tasks[done.pop()]
        # both found no Lease and created one: the second create was refused (409) and waits
        assert [e.status for e in api.exchanges if e.request.method == "POST"] == [201, 409]
        await asyncio.sleep(10)
        assert not any(t.done() for t in pending), "the standby must keep waiting"
        assert current(api).holder == leader.config.identity
        hold = asyncio.create_task(leader.hold())
        await asyncio.sleep(30)  # twice the lease duration: renewals keep it
        assert not any(t.done() for t in pending)
        last = current(api)
        assert last.holder == leader.config.identity and last.renew_time is not None
        hold.cancel()  # the leader dies: no more renewals, no release
        await asyncio.wait_for(asyncio.gather(*pending), timeout=LEASE_DURATION + LOOK)
        taken = current(api)
        standby = next(e for e in (a, b) if e is not leader)
        assert taken.holder == standby.config.identity
        assert taken.transitions == 1
        # taken at the Lease's expiry (one lease duration after the last renewal), not before,
        # and at once: the standby's look is set to just after it
        expiry = last.renew_time + timedelta(seconds=LEASE_DURATION)
        assert taken.acquire_time is not None
        assert expiry <= taken.acquire_time <= expiry + timedelta(seconds=0.05)

    run_leases(go)


def test_of_two_candidates_taking_an_expired_lease_one_writes_and_the_other_waits(
    caplog: pytest.LogCaptureFixture,
) -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        held_by(api, "gone")
        await asyncio.sleep(LEASE_DURATION)  # expired now
        b, c = elector(api, "b"), elector(api, "c")
        tasks = {asyncio.create_task(b.acquire()): b, asyncio.create_task(c.acquire()): c}
        done, pending = await asyncio.wait(tasks, timeout=1, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        # both took the same version of the Lease: one write wins, the other is refused (409)
        assert [e.status for e in lease_requests(api, "PUT")] == [200, 409]
        taken = current(api)
        assert taken.holder == tasks[done.pop()].config.identity and taken.transitions == 1
        await asyncio.sleep(10)
        assert not any(t.done() for t in pending), "the loser waits for the winner's Lease"
        for task in pending:
            task.cancel()

    with caplog.at_level("INFO", logger="runner.leader"):
        run_leases(go)
    assert "another candidate wrote Lease ops/op first" in caplog.text


def test_release_hands_over_at_once() -> None:
    async def go(api: FakeApi) -> None:
        a, b = elector(api, "a"), elector(api, "b")
        await a.acquire()
        waiting = asyncio.create_task(b.acquire())
        await asyncio.sleep(5)
        assert not waiting.done()
        assert await a.release()
        assert current(api).holder is None
        await asyncio.wait_for(waiting, timeout=LOOK)  # at its next look, not after 15 s
        assert current(api).holder == "b"
        assert not await a.release(), "a released Lease is not released twice"

    run_leases(go)


def test_release_after_the_lease_moved_on_reads_it_again_and_releases_only_its_own() -> None:
    async def go(api: FakeApi) -> None:
        a = elector(api, "a")
        await a.acquire()
        moved = api.get(LEASE)
        assert moved is not None
        moved["metadata"]["labels"] = {"edited": "by-hand"}  # a new resourceVersion, still a's
        api.put(LEASE, moved)
        assert await a.release()
        assert [e.status for e in lease_requests(api, "PUT")] == [409, 200]
        assert current(api).holder is None

        b = elector(api, "b")
        await b.acquire()
        taken = api.get(LEASE)
        assert taken is not None
        taken["spec"]["holderIdentity"] = "intruder"
        api.put(LEASE, taken)
        assert not await b.release(), "someone else's Lease is not released"
        assert current(api).holder == "intruder"

    run_leases(go)


def test_leader_loses_at_the_renew_deadline_counted_from_its_last_renewal_sent() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        a = elector(api, "a")
        await a.acquire()
        acquired = api.clock()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(5)  # renewed at 2 s and 4 s
        assert not hold.done()
        api.fail(path=LEASE, method="GET", hang=3, times=1)  # the one at 6 s is slow: 3 s
        await asyncio.sleep(5)
        slow = lease_requests(api, "GET")[-1]
        assert slow.at == acquired + 6 and slow.status == 200
        last = current(api)
        assert last.renew_time == api.clock.wall() - timedelta(seconds=1), "written at 9 s"
        api.fail(error=REFUSED)
        reason = await asyncio.wait_for(hold, timeout=30)
        assert "could not renew" in reason
        lost_at = api.clock()
        # the deadline counts from the moment the last good renewal was sent (6 s), so it is
        # never later than the renewTime others see (9 s)
        assert lost_at == slow.at + RENEW_DEADLINE
        assert api.clock.wall() < last.renew_time + timedelta(seconds=RENEW_DEADLINE)
        assert not a.leading

    run_leases(go)


def test_leader_loses_at_its_next_renewal_when_someone_else_holds_the_lease() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        a = elector(api, "a")
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(1)
        lease = api.get(LEASE)
        assert lease is not None
        lease["spec"]["holderIdentity"] = "intruder"
        await api.client().send(kube.replace_lease("ops", "op", lease))
        reason = await asyncio.wait_for(hold, timeout=RETRY_PERIOD)
        assert "held by intruder" in reason
        assert current(api).holder == "intruder", "never taken back"
        assert not a.leading

    run_leases(go)


def test_standby_retries_through_api_errors(caplog: pytest.LogCaptureFixture) -> None:
    async def go(api: FakeApi) -> None:
        down = api.fail(error=REFUSED)
        a = elector(api, "a")
        task = asyncio.create_task(a.acquire())
        await asyncio.sleep(20)
        assert not task.done()
        assert len(lease_requests(api, "GET")) >= 20 / LOOK, "it kept trying"
        api.faults.remove(down)
        await asyncio.wait_for(task, timeout=LOOK)
        assert a.leading

    with caplog.at_level("WARNING", logger="runner.leader"):
        run_leases(go)
    retrying = [r for r in caplog.records if "cannot read or write Lease" in r.getMessage()]
    assert len(retrying) == 1, "said once, not at every retry"


def test_a_standby_looks_every_retry_period_with_up_to_a_fifth_more_of_jitter() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        held_by(api, "other", lease_duration=3600)
        even, jittered = elector(api, "even", jitter=lambda: 0.0), elector(api, "jittered")
        for standby in (even, jittered):
            start = len(api.exchanges)
            task = asyncio.create_task(standby.acquire())
            await asyncio.sleep(100)
            task.cancel()
            looks = [e.at for e in api.exchanges[start:]]
            gaps = [b - a for a, b in itertools.pairwise(looks)]
            assert len(gaps) >= 100 / LOOK - 1
            if standby is even:
                assert {round(g, 9) for g in gaps} == {RETRY_PERIOD}
            else:
                assert all(RETRY_PERIOD < g < LOOK for g in gaps), gaps
                assert max(gaps) - min(gaps) > RETRY_PERIOD * JITTER / 2, "spread out"

    run_leases(go)


def test_a_renewal_that_times_out_once_is_retried_a_retry_period_later() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        a = elector(api, "a")
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(1)
        timeout = api.fail(path=LEASE, error=TimeoutError(), times=1)
        await asyncio.sleep(2 * RENEW_DEADLINE)
        assert not hold.done()
        assert timeout.hits == 1 and timeout not in api.faults, "the timeout happened"
        [failed] = [e for e in lease_requests(api, "GET") if e.status is None]
        after = [e.at for e in lease_requests(api, "PUT") if e.at > failed.at]
        assert after[0] == failed.at + RETRY_PERIOD, "renewed at the next try"
        assert a.leading
        hold.cancel()

    run_leases(go)


def test_a_renewal_that_hangs_past_the_deadline_is_given_up_in_time_to_try_again() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        a = elector(api, "a")
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(1)
        hung = api.fail(path=LEASE, hang=RENEW_DEADLINE + 2, times=1)  # a stuck connection
        await asyncio.sleep(3 * RENEW_DEADLINE)
        assert not hold.done(), "one hung request did not use up the renew deadline"
        assert a.leading and hung.hits == 1
        [stuck] = [e for e in lease_requests(api, "GET") if e.status is None]
        renewals = [e.at for e in lease_requests(api, "PUT") if e.status == 200]
        writes = [e.at for e in api.exchanges if e.status in (200, 201) and e.request.body]
        # given up at half the renew deadline, tried again a retry period later: renewed
        # within the deadline, and the Lease never went unrenewed for its duration
        assert next(t for t in renewals if t > stuck.at) == (
            stuck.at + RENEW_DEADLINE / 2 + RETRY_PERIOD
        )
        assert max(b - a for a, b in itertools.pairwise(writes)) < RENEW_DEADLINE
        hold.cancel()

    run_leases(go)


# --- the manager's side: Leadership, with the endpoints and the shutdown --------------------


class Side:
    """What the manager builds around the elector (runner/app/manager/run.py): the endpoints
    and what they report (serving), the shutdown, the leadership."""

    def __init__(self, leadership: Leadership, serving: Serving, shutdown: Shutdown) -> None:
        self.leadership, self.serving, self.shutdown = leadership, serving, shutdown
        self.health = serving.health

    async def close(self) -> None:
        self.shutdown.stopping()
        await self.shutdown.stopped()
        await self.leadership.close()
        await self.serving.close()


def _on_the_loop(after: float, fn: Callable[[], None]) -> None:
    asyncio.get_running_loop().call_later(after, fn)


async def start(
    api: FakeApi, cancel_runs: Callable[[], None] = lambda: None, leader_elect: bool = True
) -> Side:
    assert api.clock is not None
    health = Health(stale_after=LEASE_DURATION, clock=api.clock)
    addresses = Addresses.parse("127.0.0.1:0", "127.0.0.1:0", "127.0.0.1:0")  # not 5050
    serving = await Serving.start(addresses, MetricsSecurity(), api.client(), health)
    shutdown = Shutdown(health, cancel_runs)
    shutdown.deadline = _on_the_loop  # the fake clock's time, not a thread's
    elect = None
    if leader_elect:
        config = ElectionConfig(namespace="ops", name="op", identity="me")
        elect = LeaderElector(
            api.client(), config, on_standby=health.standby, now=api.clock.wall, clock=api.clock
        )
    return Side(Leadership(elect, shutdown, health, serving.set_leader), serving, shutdown)


def test_without_leader_election_it_leads_at_once() -> None:
    async def go(api: FakeApi) -> None:
        side = await start(api, leader_elect=False)
        assert await side.leadership.lead()
        assert side.health.readiness() == (False, "starting the watches")
        side.health.kopf_ready.set()
        assert side.health.readiness() == (True, "ok")
        side.shutdown.stopping()
        assert not side.health.readiness()[0]
        await side.close()
        assert side.shutdown.exit_code == 0
        assert api.exchanges == [], "no Lease"

    run_leases(go)


def test_stopped_while_standing_by_it_never_leads() -> None:
    async def go(api: FakeApi) -> None:
        await elector(api, "other").acquire()
        side = await start(api)
        leading = asyncio.create_task(side.leadership.lead())
        await asyncio.sleep(5)
        assert not leading.done()
        ready, detail = side.health.readiness()
        assert ready and "held by other" in detail, "a standby is ready"
        side.shutdown.stop_flag.set()  # what SIGTERM does
        assert await asyncio.wait_for(leading, 1) is False
        await side.close()
        assert current(api).holder == "other"

    run_leases(go)


def test_a_standby_that_cannot_read_the_lease_for_its_duration_is_not_ready() -> None:
    async def go(api: FakeApi) -> None:
        held_by(api, "other", lease_duration=3600)
        side = await start(api)
        leading = asyncio.create_task(side.leadership.lead())
        await asyncio.sleep(5)
        assert side.health.readiness() == (True, "standby: Lease ops/op is held by other")
        down = api.fail(error=REFUSED)
        await asyncio.sleep(LEASE_DURATION - LOOK)
        assert side.health.readiness()[0], "not stale before the lease duration"
        await asyncio.sleep(LOOK + 1)
        ready, detail = side.health.readiness()
        assert not ready and "the Lease could not be read for" in detail, detail
        api.faults.remove(down)
        await asyncio.sleep(LOOK)
        assert side.health.readiness()[0], "ready again once it reads the Lease"
        assert not leading.done()
        side.shutdown.stop_flag.set()
        assert await asyncio.wait_for(leading, 1) is False
        await side.close()

    run_leases(go)


def test_a_leader_that_loses_the_lease_stops_everything_and_exits_1() -> None:
    async def go(api: FakeApi) -> None:
        assert api.clock is not None
        clock = api.clock
        cancelled: list[bool] = []
        side = await start(api, lambda: cancelled.append(True))
        exits: list[tuple[float, float]] = []
        assert await side.leadership.lead()
        acquired = clock()
        side.shutdown.hard_exit = lambda margin: exits.append((margin, clock()))
        assert not side.shutdown.stop_flag.is_set()
        await asyncio.sleep(1)
        api.fail(error=REFUSED)
        await asyncio.wait_for(side.shutdown.stop_flag.wait(), RENEW_DEADLINE)
        lost = clock()
        assert lost == acquired + RENEW_DEADLINE
        assert side.shutdown.exit_code == 1
        assert cancelled == [True]
        assert side.health.readiness() == (False, "leader election lost: exiting")
        await asyncio.sleep(LEASE_DURATION)
        # ended for sure if an orderly exit takes too long: 1 s before others may take over
        margin = LEASE_DURATION - RENEW_DEADLINE - 1
        assert exits == [(margin, lost + margin)]
        await side.close()

    run_leases(go)


def test_the_lease_is_released_on_close_and_the_gauge_follows() -> None:
    async def go(api: FakeApi) -> None:
        side = await start(api)
        registry = cast(PrometheusMetrics, side.serving.metrics).registry

        def gauge() -> float | None:
            return registry.get_sample_value("leader_election_master_status", {"name": "op"})

        assert await side.leadership.lead()
        assert current(api).holder == "me"
        assert gauge() == 1
        await side.close()
        assert current(api).holder is None
        assert gauge() == 0

    run_leases(go)


def test_flag_errors_are_one_message() -> None:
    with pytest.raises(SystemExit, match="--metrics-bind-address: bind address '8080'"):
        Addresses.parse("8080", "0", "0")
    with pytest.raises(SystemExit, match="--leader-election-namespace is required"):
        election_config("op", None, (15.0, 10.0, 2.0), ["x.example.com"], {})
