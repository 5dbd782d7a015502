"""Leader election: the Lease decision as a pure function, and the elector on a fake API."""

from __future__ import annotations

import asyncio
import copy
import json
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any, cast

import pytest

from runner.app.leader import LeaderElector
from runner.app.lease import (
    Action,
    ElectionConfig,
    ElectionError,
    LeaseRecord,
    decide,
    default_election_id,
    election_namespace,
    format_time,
    lease_body,
    parse_time,
    released_body,
)
from runner.app.production import Production, ProductionConfig
from runner.kube import client as kube
from runner.kube.client import ApiError, KubeClient, Request
from runner.kube.credentials import Credentials
from runner.kube.reachability import Reachability

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


# --- the elector against a fake API server ---------------------------------------------------


class FakeApi:
    """Leases in memory, with resourceVersion checks as the API server does them."""

    def __init__(self) -> None:
        self.leases: dict[str, dict[str, Any]] = {}
        self.version = 0
        self.down = False
        self.requests: list[str] = []

    async def send(self, request: Request, timeout: float = 30.0) -> Any:
        await asyncio.sleep(0)
        self.requests.append(request.method)
        if self.down:
            raise OSError("connection refused")
        path = request.path
        if request.method == "GET":
            if path not in self.leases:
                raise ApiError(404, "Not Found", json.dumps({"message": "not found"}))
            return copy.deepcopy(self.leases[path])
        body = copy.deepcopy(request.body)
        if request.method == "POST":
            path = f"{path}/{body['metadata']['name']}"
            if path in self.leases:
                raise ApiError(409, "Conflict", json.dumps({"message": "already exists"}))
        elif request.method == "PUT":
            stored = self.leases.get(path)
            if stored is None:
                raise ApiError(404, "Not Found", "{}")
            if body["metadata"].get("resourceVersion") != stored["metadata"]["resourceVersion"]:
                raise ApiError(409, "Conflict", json.dumps({"message": "object was modified"}))
        self.version += 1
        body["metadata"]["resourceVersion"] = str(self.version)
        self.leases[path] = body
        return copy.deepcopy(body)

    send_or_none = KubeClient.send_or_none  # the client's own 404 handling, over `send`

    def lease(self, namespace: str = "ops", name: str = "op") -> dict[str, Any]:
        return self.leases[kube.lease_path(namespace, name)]


def elector(api: FakeApi, identity: str, **timing: float) -> LeaderElector:
    config = ElectionConfig(
        namespace="ops",
        name="op",
        identity=identity,
        lease_duration=timing.get("lease_duration", 1.0),  # whole seconds in a Lease
        renew_deadline=timing.get("renew_deadline", 0.4),
        retry_period=timing.get("retry_period", 0.05),
    )
    return LeaderElector(cast(KubeClient, api), config)


def test_exactly_one_of_two_candidates_leads_and_the_other_takes_over_when_it_goes() -> None:
    async def go() -> None:
        api = FakeApi()
        a, b = elector(api, "a"), elector(api, "b")
        tasks = {asyncio.create_task(a.acquire()): a, asyncio.create_task(b.acquire()): b}
        done, pending = await asyncio.wait(tasks, timeout=2, return_when=asyncio.FIRST_COMPLETED)
        assert len(done) == 1
        leader = tasks[done.pop()]
        await asyncio.sleep(0.3)
        assert not any(t.done() for t in pending), "the standby must keep waiting"
        assert api.lease()["spec"]["holderIdentity"] == leader.config.identity
        hold = asyncio.create_task(leader.hold())
        await asyncio.sleep(1.3)  # longer than the lease: renewals keep it
        assert not any(t.done() for t in pending)
        hold.cancel()  # the leader dies: no more renewals, no release
        started = asyncio.get_running_loop().time()
        await asyncio.wait_for(asyncio.gather(*pending), timeout=2)
        took = asyncio.get_running_loop().time() - started
        assert 0.8 < took < 1.4, took  # about one lease duration after the last renewal
        standby = next(e for e in (a, b) if e is not leader)
        assert api.lease()["spec"]["holderIdentity"] == standby.config.identity
        assert api.lease()["spec"]["leaseTransitions"] == 1

    asyncio.run(go())


def test_release_hands_over_at_once() -> None:
    async def go() -> None:
        api = FakeApi()
        a, b = elector(api, "a", lease_duration=30, renew_deadline=20), elector(api, "b")
        await a.acquire()
        waiting = asyncio.create_task(b.acquire())
        await asyncio.sleep(0.2)
        assert not waiting.done()
        assert await a.release()
        assert api.lease()["spec"].get("holderIdentity") is None
        await asyncio.wait_for(waiting, timeout=0.5)  # not 30 s
        assert api.lease()["spec"]["holderIdentity"] == "b"
        assert not await a.release(), "a released Lease is not released twice"

    asyncio.run(go())


def test_leader_loses_when_it_cannot_renew_within_the_deadline() -> None:
    async def go() -> None:
        api = FakeApi()
        a = elector(api, "a")
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(0.2)
        assert not hold.done()
        api.down = True
        started = asyncio.get_running_loop().time()
        reason = await asyncio.wait_for(hold, timeout=2)
        took = asyncio.get_running_loop().time() - started
        assert "could not renew" in reason
        assert took < 0.45, took  # within the renew deadline of the last renewal
        assert not a.leading

    asyncio.run(go())


def test_leader_loses_at_once_when_someone_else_holds_the_lease() -> None:
    async def go() -> None:
        api = FakeApi()
        a = elector(api, "a", lease_duration=30, renew_deadline=20)
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        lease = api.lease()
        lease["spec"]["holderIdentity"] = "intruder"
        lease["metadata"]["resourceVersion"] = "999"
        reason = await asyncio.wait_for(hold, timeout=1)
        assert "held by intruder" in reason
        assert api.lease()["spec"]["holderIdentity"] == "intruder", "never taken back"

    asyncio.run(go())


def test_standby_retries_through_api_errors() -> None:
    async def go() -> None:
        api = FakeApi()
        api.down = True
        a = elector(api, "a")
        task = asyncio.create_task(a.acquire())
        await asyncio.sleep(0.2)
        assert not task.done()
        api.down = False
        await asyncio.wait_for(task, timeout=1)
        assert a.leading

    asyncio.run(go())


# --- the manager's side: Production ---------------------------------------------------------


def production_config(**overrides: Any) -> ProductionConfig:
    settings: dict[str, Any] = {
        "metrics_bind_address": "127.0.0.1:0",
        "health_probe_bind_address": "127.0.0.1:0",
        "role_metrics_bind_address": "127.0.0.1:0",  # not 5050: an operator may run here
        "leader_elect": True,
        "leader_election_id": "op",
        "leader_election_namespace": "ops",
        "lease_duration": 1.0,
        "renew_deadline": 0.4,
        "retry_period": 0.05,
        **overrides,
    }
    return ProductionConfig(**settings)


def test_production_without_leader_election_leads_at_once() -> None:
    async def go() -> None:
        config = production_config(leader_elect=False)
        production = await Production.start(config, cast(KubeClient, FakeApi()), [], lambda: None)
        assert await production.lead()
        assert production.health.readiness() == (False, "starting the watches")
        production.ready_flag.set()
        assert production.health.readiness() == (True, "ok")
        production.stopping()
        assert not production.health.readiness()[0]
        await production.close()
        assert production.exit_code == 0

    asyncio.run(go())


def test_production_stopped_while_standing_by_never_leads() -> None:
    async def go() -> None:
        api = FakeApi()
        await elector(api, "other", lease_duration=30, renew_deadline=20).acquire()
        config = production_config(lease_duration=30, renew_deadline=20)
        production = await Production.start(config, cast(KubeClient, api), [], lambda: None)
        leading = asyncio.create_task(production.lead())
        await asyncio.sleep(0.2)
        assert not leading.done()
        ready, detail = production.health.readiness()
        assert ready and "held by other" in detail, "a standby is ready"
        production.stop_flag.set()  # what SIGTERM does
        assert await asyncio.wait_for(leading, 1) is False
        await production.close()
        assert api.lease()["spec"]["holderIdentity"] == "other"

    asyncio.run(go())


def test_production_that_loses_the_lease_stops_everything_and_exits_1() -> None:
    async def go() -> None:
        api = FakeApi()
        cancelled: list[bool] = []
        exits: list[float] = []
        production = await Production.start(
            production_config(), cast(KubeClient, api), [], lambda: cancelled.append(True)
        )
        production.hard_exit = exits.append
        assert await production.lead()
        assert not production.stop_flag.is_set()
        api.down = True
        await asyncio.wait_for(production.stop_flag.wait(), 2)
        assert production.exit_code == 1
        assert cancelled == [True]
        assert production.health.readiness() == (False, "leader election lost: exiting")
        await asyncio.sleep(1.1)
        assert exits == [1.0], "ended for sure if an orderly exit takes too long"
        await production.close()

    asyncio.run(go())


def test_production_releases_the_lease_on_close() -> None:
    async def go() -> None:
        api = FakeApi()
        config = production_config(lease_duration=30, renew_deadline=20)
        production = await Production.start(config, cast(KubeClient, api), [], lambda: None)
        assert await production.lead()
        assert api.lease()["spec"]["holderIdentity"] == production.elector.config.identity  # type: ignore[union-attr]
        await production.close()
        assert api.lease()["spec"].get("holderIdentity") is None

    asyncio.run(go())


def test_production_flag_errors_are_one_message() -> None:
    async def go() -> None:
        api = cast(KubeClient, FakeApi())
        with pytest.raises(SystemExit, match="--metrics-bind-address: bind address '8080'"):
            await Production.start(production_config(metrics_bind_address="8080"), api, [], print)
        with pytest.raises(SystemExit, match="--leader-election-namespace is required"):
            config = production_config(leader_election_namespace=None)
            await Production.start(config, api, [], print, environ={})

    asyncio.run(go())


# --- a transient timeout does not end leadership ------------------------------------------


class FakeTransport:
    """The transport under a real KubeClient, answering from a FakeApi; the next `timeouts`
    requests time out: asyncio's TimeoutError after `hang` seconds or the request's timeout,
    whichever is shorter, as aiohttp gives it when a slow API server overruns the timeout."""

    def __init__(self, api: FakeApi, host: str) -> None:
        self.api = api
        self.host = host
        self.timeouts = 0
        self.hang = 0.0  # seconds the next timed-out request takes

    async def __call__(
        self, method: str, url: str, body: str | None, headers: Any, timeout: float
    ) -> tuple[int, str, str]:
        if self.timeouts:
            self.timeouts -= 1
            await asyncio.sleep(min(self.hang, timeout))
            raise TimeoutError
        request = Request(method, url.removeprefix(self.host), body=json.loads(body or "null"))
        try:
            answer = await self.api.send(request)
        except ApiError as err:
            return err.status, err.reason, err.body
        return 200, "OK", json.dumps(answer)


def real_client(api: FakeApi) -> tuple[KubeClient, FakeTransport]:
    host = "https://api.invalid"
    transport = FakeTransport(api, host)
    client = KubeClient(Credentials(server=host, insecure=True), Reachability(), transport)
    return client, transport


def test_a_renewal_that_times_out_once_is_retried_and_leadership_goes_on() -> None:
    async def go() -> None:
        api = FakeApi()
        client, transport = real_client(api)
        config = ElectionConfig(
            namespace="ops",
            name="op",
            identity="a",
            lease_duration=1.0,
            renew_deadline=0.4,
            retry_period=0.05,
        )
        a = LeaderElector(client, config)
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(0.2)
        transport.timeouts = 1
        renewed = api.lease()["spec"]["renewTime"]
        await asyncio.sleep(0.8)  # twice the renew deadline
        assert not hold.done(), hold.result() if hold.done() and not hold.exception() else hold
        assert transport.timeouts == 0, "the timeout happened"
        assert api.lease()["spec"]["renewTime"] != renewed, "renewed after the timeout"
        assert a.leading
        hold.cancel()

    asyncio.run(go())


def test_a_renewal_that_hangs_leaves_time_to_try_again() -> None:
    async def go() -> None:
        api = FakeApi()
        client, transport = real_client(api)
        config = ElectionConfig(
            namespace="ops",
            name="op",
            identity="a",
            lease_duration=3.0,
            renew_deadline=1.0,
            retry_period=0.05,
        )
        a = LeaderElector(client, config)
        await a.acquire()
        hold = asyncio.create_task(a.hold())
        await asyncio.sleep(0.1)
        # longer than the deadline: given up at half of it
        transport.timeouts, transport.hang = 1, 1.2
        await asyncio.sleep(1.5)
        assert not hold.done(), "one hung request did not use up the renew deadline"
        assert a.leading
        hold.cancel()

    asyncio.run(go())
