"""Metrics: what the controllers report, what a scrape shows, and the health probes."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from aiohttp.test_utils import TestClient, TestServer
from fake_api import FakeClock
from prometheus_client import generate_latest

from runner import __version__
from runner.ansible.results import TaskResult
from runner.app.serving.crmetrics import controller_name
from runner.app.serving.health import Health
from runner.app.serving.metrics import PrometheusMetrics, gvk_label
from runner.control.controller import Controller
from runner.control.metrics import Requeue, Result, WorkerStats
from runner.control.queue import WorkQueue
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile.interface import Outcome
from runner.reconcile.reconciler import Reconciler
from runner.watches import GVK, Watch


def scrape(metrics: PrometheusMetrics) -> str:
    return generate_latest(metrics.registry).decode()


def value(text: str, series: str) -> float:
    for line in text.splitlines():
        if line.startswith(series + " "):
            return float(line.rsplit(" ", 1)[1])
    raise AssertionError(f"{series} not in:\n{text}")


def test_reconcile_counters_histograms_and_operator_sdk_names() -> None:
    m = PrometheusMetrics(process_metrics=False)
    m.track("Echo", "swallowlab.com", "v1", lambda: WorkerStats(0, 0, 0, 1))
    m.observe_reconcile("Echo", "swallowlab.com", "v1", "success", 2.5, 0, "requeue_after")
    m.observe_reconcile("Echo", "swallowlab.com", "v1", "success", 0.5, 0)
    m.observe_reconcile("Echo", "swallowlab.com", "v1", "failure", 1.0, 2)
    m.observe_reconcile("Echo", "swallowlab.com", "v1", "error", 0.1, 0, panic=True)
    text = scrape(m)
    labels = 'group="swallowlab.com",kind="Echo"'
    assert value(text, f'operator_runner_reconciles_total{{{labels},result="success"}}') == 2
    assert value(text, f'operator_runner_reconciles_total{{{labels},result="failure"}}') == 1
    assert value(text, f'operator_runner_reconciles_total{{{labels},result="error"}}') == 1
    assert value(text, f"operator_runner_failed_tasks_total{{{labels}}}") == 2
    assert value(text, f"operator_runner_reconcile_duration_seconds_count{{{labels}}}") == 4
    assert value(text, f"operator_runner_reconcile_duration_seconds_sum{{{labels}}}") == 4.1
    gvk = "swallowlab.com/v1, Kind=Echo"
    assert gvk_label("swallowlab.com", "v1", "Echo") == gvk
    assert value(text, f'ansible_operator_reconcile_result{{GVK="{gvk}",result="succeeded"}}') == 2
    assert value(text, f'ansible_operator_reconcile_result{{GVK="{gvk}",result="failed"}}') == 2
    assert value(text, f'ansible_operator_reconciles_count{{GVK="{gvk}"}}') == 4
    # controller-runtime's, under operator-sdk's controller name
    assert controller_name("Echo", "v1") == "echo-v1-controller"
    ctl = 'controller="echo-v1-controller"'
    for result, count in (("success", 1), ("requeue_after", 1), ("error", 2), ("requeue", 0)):
        series = f'controller_runtime_reconcile_total{{{ctl},result="{result}"}}'
        assert value(text, series) == count, series
    assert value(text, f"controller_runtime_reconcile_errors_total{{{ctl}}}") == 2
    assert value(text, f"controller_runtime_reconcile_panics_total{{{ctl}}}") == 1
    assert value(text, f"controller_runtime_terminal_reconcile_errors_total{{{ctl}}}") == 0
    assert value(text, f"controller_runtime_reconcile_time_seconds_count{{{ctl}}}") == 4
    queue = 'controller="echo-v1-controller",name="echo-v1-controller"'
    assert value(text, f"workqueue_work_duration_seconds_count{{{queue}}}") == 4
    build = [line for line in text.splitlines() if line.startswith("operator_runner_build_info{")]
    assert len(build) == 1 and build[0].endswith(" 1.0")
    for key in ("version", "python", "ansible_core", "ansible_runner", "kopf"):
        assert f'{key}="' in build[0]
    assert value(text, f'ansible_operator_build_info{{commit="",version="{__version__}"}}') == 1


def test_controller_gauges_are_read_at_scrape_time_and_series_start_at_zero() -> None:
    m = PrometheusMetrics(process_metrics=False)
    stats = WorkerStats(
        queue_depth=3, queue_scheduled=7, busy_workers=1, workers=4, running=(2.0, 5.5)
    )
    m.track("Echo", "swallowlab.com", "v1alpha1", lambda: stats)
    text = scrape(m)
    labels = 'group="swallowlab.com",kind="Echo"'
    ctl = 'controller="echo-v1alpha1-controller"'
    queue = 'controller="echo-v1alpha1-controller",name="echo-v1alpha1-controller"'
    assert value(text, f"workqueue_depth{{{queue}}}") == 3
    assert value(text, f"operator_runner_queue_scheduled{{{labels}}}") == 7
    assert value(text, f"controller_runtime_active_workers{{{ctl}}}") == 1
    assert value(text, f"controller_runtime_max_concurrent_reconciles{{{ctl}}}") == 4
    assert value(text, f"workqueue_unfinished_work_seconds{{{queue}}}") == 7.5
    assert value(text, f"workqueue_longest_running_processor_seconds{{{queue}}}") == 5.5
    assert value(text, f'operator_runner_reconciles_total{{{labels},result="error"}}') == 0
    for family in ("workqueue_adds_total", "workqueue_retries_total"):
        assert value(text, f"{family}{{{queue}}}") == 0
    assert value(text, f'controller_runtime_reconcile_total{{{ctl},result="success"}}') == 0
    stats = WorkerStats(queue_depth=0, queue_scheduled=0, busy_workers=0, workers=4)
    text = scrape(m)
    assert value(text, f"workqueue_depth{{{queue}}}") == 0
    assert value(text, f"workqueue_longest_running_processor_seconds{{{queue}}}") == 0
    for gone in ("operator_runner_queue_depth", "operator_runner_busy_workers"):
        assert gone not in text  # covered by controller-runtime's series


def test_a_backlog_shows_in_the_workqueue_metrics() -> None:
    m = PrometheusMetrics(process_metrics=False)
    stats = WorkerStats(
        queue_depth=40, queue_scheduled=20, busy_workers=2, workers=2, longest_wait=95.5
    )
    m.track("EchoFlask", "swallowlab.com", "v1alpha1", lambda: stats)
    queue = 'controller="echoflask-v1alpha1-controller",name="echoflask-v1alpha1-controller"'
    assert value(scrape(m), f"workqueue_queue_duration_seconds_count{{{queue}}}") == 0
    for seconds in (0.05, 12.0, 95.5):
        m.observe_queue_wait("EchoFlask", "swallowlab.com", seconds)
    for _ in range(3):
        m.observe_add("EchoFlask", "swallowlab.com")
    m.observe_retry("EchoFlask", "swallowlab.com")
    text = scrape(m)
    assert value(text, f"workqueue_depth{{{queue}}}") == 40
    assert value(text, f"workqueue_queue_duration_seconds_count{{{queue}}}") == 3
    bucket = (
        'controller="echoflask-v1alpha1-controller",le="10.0",name="echoflask-v1alpha1-controller"'
    )
    assert value(text, f"workqueue_queue_duration_seconds_bucket{{{bucket}}}") == 1
    assert value(text, f"workqueue_adds_total{{{queue}}}") == 3
    assert value(text, f"workqueue_retries_total{{{queue}}}") == 1
    labels = 'group="swallowlab.com",kind="EchoFlask"'
    assert value(text, f"operator_runner_queue_longest_wait_seconds{{{labels}}}") == 95.5


def test_rest_client_requests_are_counted_by_code_method_and_host() -> None:
    m = PrometheusMetrics(process_metrics=False)
    m.observe_request("GET", "10.0.0.1:6443", "200")
    m.observe_request("GET", "10.0.0.1:6443", "200")
    m.observe_request("PATCH", "10.0.0.1:6443", "<error>")
    text = scrape(m)
    assert (
        value(text, 'rest_client_requests_total{code="200",host="10.0.0.1:6443",method="GET"}') == 2
    )
    assert (
        value(
            text, 'rest_client_requests_total{code="<error>",host="10.0.0.1:6443",method="PATCH"}'
        )
        == 1
    )


def test_the_controller_reports_how_long_keys_waited() -> None:
    async def go() -> list[float]:
        observed = Observed()
        controller = Controller(cast(Reconciler, FakeReconciler([Outcome()])), 1, metrics=observed)
        controller.start()
        controller.enqueue(
            ObjectRef(Resource("example.com", "v1", "things", "Thing", True), "ns", "t")
        )
        for _ in range(200):
            if observed.calls:
                break
            await asyncio.sleep(0.01)
        await controller.stop(1)
        return observed.waits

    waits = asyncio.run(go())
    assert len(waits) == 1 and 0 <= waits[0] < 1


CREATED = "resource_created_at_seconds"


def created_series(name: str, namespace: str = "ns", kind: str = "Thing") -> str:
    """operator-lib's labels, in prometheus-client's (sorted) order."""
    return (
        f'{CREATED}{{group="example.com",kind="{kind}",name="{name}",namespace="{namespace}",'
        f'version="v1"}}'
    )


def test_resource_created_at_is_set_from_the_watch_events_and_removed_at_deletion() -> None:
    """As operator-lib's InstrumentedEnqueueRequestForObject in ansible-operator's CR watches:
    each selected CR's creationTimestamp (whole seconds) from its events, gone when deleted."""
    metrics = PrometheusMetrics(process_metrics=False)
    watch = Watch(
        GVK("example.com", "v1", "Thing"), role="/r", selector={"matchLabels": {"a": "1"}}
    )
    controller = Controller(cast(Reconciler, FakeReconciler([], watch=watch)), 1, metrics=metrics)
    resource = Resource("example.com", "v1", "things", "Thing", True)
    one, two = ObjectRef(resource, "ns", "one"), ObjectRef(resource, "ns", "two")

    def body(name: str, labels: dict[str, str]) -> dict[str, Any]:
        meta = {"name": name, "namespace": "ns", "labels": labels, "generation": 1}
        return {"metadata": {**meta, "creationTimestamp": "2026-12-03T10:20:30.75Z"}}

    async def go() -> None:
        controller.on_event(one, None, body("one", {"a": "1"}))  # kopf's listing
        controller.on_event(two, "ADDED", body("two", {"a": "2"}))  # not selected
        text = scrape(metrics)
        assert value(text, created_series("one")) == 1796293230.0  # as Go's Time.Unix()
        assert created_series("two") not in text
        controller.on_event(one, "MODIFIED", body("one", {"a": "1"}))
        assert value(scrape(metrics), created_series("one")) == 1796293230.0
        controller.on_event(one, "DELETED", body("one", {"a": "1"}))
        controller.on_event(two, "DELETED", body("two", {"a": "2"}))  # never set: no error
        assert CREATED + "{" not in scrape(metrics)
        assert f"# TYPE {CREATED} gauge" in scrape(metrics)

    asyncio.run(go())


def test_leader_gauge() -> None:
    m = PrometheusMetrics(process_metrics=False)
    m.set_leader("my-operator", True)
    assert value(scrape(m), 'leader_election_master_status{name="my-operator"}') == 1
    m.set_leader("my-operator", False)
    assert value(scrape(m), 'leader_election_master_status{name="my-operator"}') == 0


def test_process_metrics_are_included() -> None:
    assert "process_cpu_seconds_total" in scrape(PrometheusMetrics())


def test_queue_depth_counts_due_keys_only() -> None:
    clock = FakeClock(100.0)
    q: WorkQueue[str] = WorkQueue(clock)
    q.add("due")
    q.add("later", delay=60)
    assert (q.due(), len(q)) == (1, 2)
    clock.now += 60
    assert q.due() == 2


# --- the controller reports every reconcile --------------------------------------------------


@dataclass
class Observed:
    calls: list[tuple[str, str, str, Result, float, int]] = field(default_factory=list)
    waits: list[float] = field(default_factory=list)
    requeues: list[Requeue] = field(default_factory=list)
    panics: list[bool] = field(default_factory=list)
    tasks: list[tuple[str, str, list[str]]] = field(default_factory=list)
    adds: int = 0
    retries: int = 0

    def observe_reconcile(
        self,
        kind: str,
        group: str,
        version: str,
        result: Result,
        seconds: float,
        failed_tasks: int,
        requeue: Requeue = "",
        panic: bool = False,
    ) -> None:
        self.calls.append((kind, group, version, result, seconds, failed_tasks))
        self.requeues.append(requeue)
        self.panics.append(panic)

    def observe_tasks(self, kind: str, group: str, tasks: Sequence[TaskResult]) -> None:
        self.tasks.append((kind, group, [t.label for t in tasks]))

    def observe_queue_wait(self, kind: str, group: str, seconds: float) -> None:
        self.waits.append(seconds)

    def observe_add(self, kind: str, group: str) -> None:
        self.adds += 1

    def observe_retry(self, kind: str, group: str) -> None:
        self.retries += 1

    def observe_resource(
        self, kind: str, group: str, version: str, ref: ObjectRef, created: float | None
    ) -> None:
        pass


@dataclass
class FakeReconciler:
    outcomes: list[Outcome | Exception]
    watch: Any = field(
        default_factory=lambda: type("W", (), {"gvk": GVK("example.com", "v1", "Thing")})()
    )

    async def reconcile(self, ref: ObjectRef) -> Outcome:
        await asyncio.sleep(0.01)
        outcome = self.outcomes.pop(0)
        if isinstance(outcome, Exception):
            raise outcome
        return outcome


def test_controller_reports_result_duration_and_failed_tasks() -> None:
    failed_task = TaskResult("web", "Make it", "/r/tasks/main.yml:3", "fail", "failed", 0.2, "t")

    async def go() -> Observed:
        observed = Observed()
        reconciler = FakeReconciler(
            [
                Outcome(requeue_after=600.0, periodic=True),
                Outcome(failed=True, failed_tasks=2, tasks=[failed_task]),
                Outcome(failed=True, errored=True),
                RuntimeError("boom"),
            ]
        )
        controller = Controller(cast(Reconciler, reconciler), 1, metrics=observed)
        controller.start()
        resource = Resource("example.com", "v1", "things", "Thing", True)
        for i in range(4):
            controller.enqueue(ObjectRef(resource, "ns", f"t{i}"))
        for _ in range(200):
            if len(observed.calls) == 4:
                break
            await asyncio.sleep(0.01)
        await controller.stop(1)
        return observed

    observed = asyncio.run(go())
    calls = observed.calls
    assert observed.requeues == ["requeue_after", "", "", ""]
    assert observed.panics == [False, False, False, True], "only the unexpected exception"
    assert observed.adds == 4 + 4 and observed.retries == 3  # 4 keys, then 4 requeues
    assert [(c[3], c[5]) for c in calls] == [
        ("success", 0),
        ("failure", 2),
        ("error", 0),
        ("error", 0),
    ]
    assert all(c[:3] == ("Thing", "example.com", "v1") for c in calls)
    assert all(c[4] >= 0.01 for c in calls), "the duration covers the reconcile"
    assert observed.tasks == [("Thing", "example.com", ["t"])], "a run's tasks, once"


def test_controller_without_metrics_needs_nothing() -> None:
    controller = Controller(cast(Reconciler, FakeReconciler([])), 1)
    controller._observe(Outcome(), 0.1)


# --- health probes ---------------------------------------------------------------------------


def test_readiness_without_leader_election() -> None:
    async def go() -> None:
        health = Health()
        assert health.readiness() == (False, "starting")
        health.leading()
        assert health.readiness() == (False, "starting the watches")
        health.kopf_ready.set()
        assert health.readiness() == (True, "ok")
        health.stopping()
        assert health.readiness() == (False, "stopping")

    asyncio.run(go())


def test_readiness_of_a_standby_and_of_a_lost_leader() -> None:
    async def go() -> None:
        clock = FakeClock(0.0)
        health = Health(stale_after=15, clock=clock)
        health.standby("Lease ops/op is held by b")
        assert health.readiness() == (True, "standby: Lease ops/op is held by b")
        clock.now += 16
        ready, detail = health.readiness()
        assert not ready and "could not be read for 16 s" in detail
        health.standby("Lease ops/op is held by b")
        assert health.readiness()[0]
        health.leading()
        health.kopf_ready.set()
        assert health.readiness()[0]
        health.lost()
        health.stopping()  # a lost leader stays lost
        assert health.readiness() == (False, "leader election lost: exiting")

    asyncio.run(go())


def test_added_checks_must_pass_too() -> None:
    async def go() -> None:
        health = Health()
        answer = (False, "webhook server: TLS to 127.0.0.1:9443 as x: refused")

        async def webhooks() -> tuple[bool, str]:
            return answer

        health.add_check(webhooks)
        health.leading()
        health.kopf_ready.set()
        assert await health.ready() == answer
        answer = (True, "webhooks serve")
        assert await health.ready() == (True, "ok")
        health.stopping()
        assert await health.ready() == (False, "stopping")

    asyncio.run(go())


def test_probe_endpoints() -> None:
    async def go() -> None:
        health = Health()
        async with TestClient(TestServer(health.app())) as client:
            response = await client.get("/healthz")
            assert response.status == 200 and (await response.text()) == "ok\n"
            response = await client.get("/readyz")
            assert response.status == 503 and "starting" in await response.text()
            health.leading()
            health.kopf_ready.set()
            response = await client.get("/readyz")
            assert response.status == 200

    asyncio.run(go())


def test_metrics_endpoint() -> None:
    async def go() -> None:
        m = PrometheusMetrics(process_metrics=False)
        m.observe_reconcile("Echo", "swallowlab.com", "v1", "success", 1.0, 0)
        async with TestClient(TestServer(m.app())) as client:
            response = await client.get("/metrics")
            assert response.status == 200
            assert "operator_runner_reconciles_total" in await response.text()

    asyncio.run(go())
