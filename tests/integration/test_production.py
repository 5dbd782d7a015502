"""Production features against the real cluster: /metrics, /healthz, /readyz, leader election.

The operators run `watches-production.yaml` (group prod.operator-runner.dev, the `basic` and
`broken` roles of the test project) in a namespace of this module; metrics and probes are served
on free ports of 127.0.0.1.
"""

from __future__ import annotations

import re
import signal
import socket
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from kubernetes import client

from runner import __version__

from .conftest import Cluster
from .kit import (
    PROJECT,
    Env,
    RunningOperator,
    crd,
    install_crd,
    line_at,
    logged,
    logged_at,
    operator,
    or_none,
    temporary_namespace,
    wait_for,
    wait_logged,
)

pytestmark = pytest.mark.integration

GROUP = "prod.operator-runner.dev"
KINDS = ("Basic", "Broken")
WATCHES = PROJECT / "watches-production.yaml"
FAILOVER_TARGET = 20.0  # seconds, with the default lease duration of 15 s


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def http_get(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode()
    except OSError:
        return 0, ""


def metric(text: str, family: str, **labels: str) -> float | None:
    """The value of the series of `family` whose labels include `labels` (the first one)."""
    for line in text.splitlines():
        if not line.startswith(family + "{") and not line.startswith(family + " "):
            continue
        series, _, value = line.rpartition(" ")
        found = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', series))
        if all(found.get(k) == v for k, v in labels.items()):
            return float(value)
    return None


class Endpoints:
    def __init__(self) -> None:
        self.metrics_port = free_port()
        self.health_port = free_port()

    @property
    def args(self) -> tuple[str, ...]:
        return (
            f"--metrics-bind-address=127.0.0.1:{self.metrics_port}",
            f"--health-probe-bind-address=127.0.0.1:{self.health_port}",
        )

    def metrics(self) -> str:
        status, text = http_get(f"http://127.0.0.1:{self.metrics_port}/metrics")
        assert status == 200, status
        return text

    def probe(self, path: str) -> tuple[int, str]:
        return http_get(f"http://127.0.0.1:{self.health_port}{path}")


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("production")
    with cluster.api_client() as api:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        try:
            with temporary_namespace(cluster, "prod") as namespace:
                yield Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        finally:
            for kind in KINDS:
                or_none(
                    client.ApiextensionsV1Api(api).delete_custom_resource_definition,
                    f"{kind.lower()}s.{GROUP}",
                )


def reconcile_lines(op: RunningOperator) -> list[dict[str, Any]]:
    """Log lines about a CR of ours: the sign that this process reconciled something."""
    return [line for line in op.log_lines() if line.get("kind") in KINDS]


def first_run_seconds(op: RunningOperator, name: str) -> float:
    """How long the first Ansible run of CR `name` took, as logged."""
    for line in op.log_lines():
        found = re.match(r"ran reconcile in ([\d.]+) s", str(line.get("msg", "")))
        if found and line.get("name") == name:
            return float(found.group(1))
    raise AssertionError(f"no run of {name} logged")


def stop(op: RunningOperator) -> int:
    if op.proc.poll() is None:
        op.proc.send_signal(signal.SIGTERM)
    try:
        return op.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        op.proc.kill()
        return op.proc.wait()


# --- metrics and probes ----------------------------------------------------------------------


def test_metrics_and_probes(env: Env) -> None:
    ends = Endpoints()
    tmp = env.tmp / "metrics"
    tmp.mkdir()
    with operator(env.cluster, tmp, watches=WATCHES, namespaces=[env.ns], args=ends.args) as op:
        wait_for(lambda: ends.probe("/healthz")[0] == 200, timeout=30, what="/healthz 200")
        assert ends.probe("/healthz") == (200, "ok\n")
        wait_for(lambda: ends.probe("/readyz")[0] == 200, timeout=30, what="/readyz 200")

        before = ends.metrics()
        labels = {"kind": "Basic", "group": GROUP}
        ctl = {"controller": "basic-v1-controller"}  # operator-sdk's controller name
        assert metric(before, "controller_runtime_max_concurrent_reconciles", **ctl) == 4
        assert metric(before, "ansible_operator_build_info", version=__version__) == 1
        assert metric(before, "operator_runner_reconciles_total", **labels, result="success") == 0
        assert metric(before, "operator_runner_build_info", version=__version__) == 1, before

        env.create("Basic", "ok", {"message": "hello"})
        env.wait_condition("Basic", "ok", "Successful", timeout=90, op=op)
        env.create("Basic", "bad", {"fail": True, "failReason": "metrics"})
        env.wait_condition("Basic", "bad", "Failure", timeout=90, op=op)
        env.create("Broken", "broken", {})
        env.wait_condition("Broken", "broken", "Failure", timeout=90, op=op)

        def counted() -> str | None:
            text = ends.metrics()
            wanted = [
                metric(text, "operator_runner_reconciles_total", **labels, result="success"),
                metric(text, "operator_runner_reconciles_total", **labels, result="failure"),
                metric(
                    text,
                    "operator_runner_reconciles_total",
                    kind="Broken",
                    group=GROUP,
                    result="error",
                ),
            ]
            return text if all(v and v >= 1 for v in wanted) else None

        text = wait_for(counted, timeout=30, what="reconcile counters")
        assert (metric(text, "operator_runner_failed_tasks_total", **labels) or 0) >= 1
        count = metric(text, "operator_runner_reconcile_duration_seconds_count", **labels)
        total = metric(text, "operator_runner_reconcile_duration_seconds_sum", **labels)
        assert count and count >= 2 and total
        # the first reconcile of "ok" was the first success, so it is in the histogram: whole
        # reconciles take longer than their Ansible runs (operator-sdk's histogram does not)
        ansible = first_run_seconds(op, "ok")
        assert ansible > 0.5, "the run was logged with its duration"
        assert total > ansible, f"the histogram covers the Ansible run: {total} <= {ansible}"
        # operator-sdk's names: controller-runtime's and client-go's, with their labels
        assert metric(text, "controller_runtime_active_workers", **ctl) is not None
        assert (metric(text, "controller_runtime_reconcile_total", **ctl, result="error") or 0) >= 1
        success = metric(text, "controller_runtime_reconcile_total", **ctl, result="success") or 0
        periodic = metric(text, "controller_runtime_reconcile_total", **ctl, result="requeue_after")
        assert success + (periodic or 0) >= 1
        assert (metric(text, "controller_runtime_reconcile_errors_total", **ctl) or 0) >= 1
        assert (metric(text, "controller_runtime_reconcile_time_seconds_count", **ctl) or 0) >= 2
        queue = {"name": "basic-v1-controller", "controller": "basic-v1-controller"}
        assert (metric(text, "workqueue_adds_total", **queue) or 0) >= 2
        assert (metric(text, "workqueue_retries_total", **queue) or 0) >= 1
        for family in (
            "workqueue_depth",
            "workqueue_queue_duration_seconds_count",
            "workqueue_work_duration_seconds_count",
            "workqueue_unfinished_work_seconds",
            "workqueue_longest_running_processor_seconds",
        ):
            assert metric(text, family, **queue) is not None, family
        host = urllib.parse.urlsplit(env.api.configuration.host).netloc
        patched = metric(text, "rest_client_requests_total", method="PATCH", code="200", host=host)
        assert (patched or 0) >= 2, text  # the status writes
        gvk = f"{GROUP}/v1, Kind=Basic"
        assert (
            metric(text, "ansible_operator_reconcile_result", GVK=gvk, result="succeeded") or 0
        ) >= 1
        assert (
            metric(text, "ansible_operator_reconcile_result", GVK=gvk, result="failed") or 0
        ) >= 1
        assert (metric(text, "ansible_operator_reconciles_count", GVK=gvk) or 0) >= 2
        assert "process_cpu_seconds_total" in text
        assert metric(text, "leader_election_master_status") is None  # no leader election
        # operator-lib's resource_created_at_seconds, as ansible-operator's CR watches keep it
        ok = env.get("Basic", "ok")
        assert ok is not None
        created = datetime.fromisoformat(ok["metadata"]["creationTimestamp"]).timestamp()
        series = {"namespace": env.ns, "group": GROUP, "version": "v1", "kind": "Basic"}
        assert metric(text, "resource_created_at_seconds", name="ok", **series) == created
        assert metric(text, "resource_created_at_seconds", name="bad", **series) is not None
        for kind, name in (("Basic", "bad"), ("Broken", "broken")):  # no retries in later tests
            env.custom.delete_namespaced_custom_object(
                GROUP, "v1", env.ns, kind.lower() + "s", name
            )
        wait_for(
            lambda: (
                metric(ends.metrics(), "resource_created_at_seconds", name="bad", **series) is None
            ),
            timeout=60,
            what="the deleted CR's resource_created_at_seconds gone",
        )
        assert metric(ends.metrics(), "resource_created_at_seconds", name="ok", **series)


def test_bad_bind_address_is_one_clear_error(env: Env) -> None:
    ends = Endpoints()
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        op = env.launch(
            "taken",
            f"--metrics-bind-address=127.0.0.1:{port}",
            f"--health-probe-bind-address=127.0.0.1:{ends.health_port}",
            max_concurrent=2,
        )
        code = op.exit_code(timeout=60)
    assert code != 0
    assert f"cannot serve metrics on 127.0.0.1:{port}" in op.log_text()


# --- leader election -------------------------------------------------------------------------


def candidate(env: Env, label: str, lease: str) -> tuple[RunningOperator, Endpoints]:
    ends = Endpoints()
    op = env.launch(
        label,
        "--leader-elect",
        f"--leader-election-id={lease}",
        f"--leader-election-namespace={env.ns}",
        *ends.args,
        max_concurrent=2,
    )
    return op, ends


def leader_status(ends: Endpoints, lease: str) -> float | None:
    return metric(ends.metrics(), "leader_election_master_status", name=lease)


def test_one_leader_reconciles_and_the_standby_takes_over_after_sigkill(env: Env) -> None:
    lease = f"prod-kill-{uuid.uuid4().hex[:6]}"
    a, a_ends = candidate(env, "kill-a", lease)
    b: RunningOperator | None = None
    try:
        wait_logged(a, "became the leader", timeout=60)
        b, b_ends = candidate(env, "kill-b", lease)
        wait_logged(b, "standing by, waiting for Lease", timeout=60)
        wait_for(lambda: b_ends.probe("/readyz")[0] == 200, timeout=30, what="standby ready")
        assert "standby" in b_ends.probe("/readyz")[1]
        wait_for(lambda: a_ends.probe("/readyz")[0] == 200, timeout=30, what="leader ready")

        env.create("Basic", "ha", {"message": "one"})
        env.wait_condition("Basic", "ha", "Successful", timeout=90, op=a)
        assert [line for line in reconcile_lines(a) if line.get("name") == "ha"]
        assert reconcile_lines(b) == [], "the standby reconciles nothing"
        assert leader_status(a_ends, lease) == 1
        assert leader_status(b_ends, lease) == 0
        holder = env.lease(lease).spec.holder_identity
        assert logged(b, f"held by {holder}"), "the standby names the leader it waits for"

        killed = time.monotonic()
        a.proc.send_signal(signal.SIGKILL)
        a.proc.wait(timeout=10)
        wait_logged(b, "became the leader", timeout=FAILOVER_TARGET + 10)
        failover = time.monotonic() - killed
        print(f"\nfailover after SIGKILL of the leader: {failover:.1f} s")
        assert failover < FAILOVER_TARGET, f"failover took {failover:.1f} s"
        assert env.lease(lease).spec.holder_identity != holder

        env.patch_spec("Basic", "ha", {"message": "two"})
        env.wait_condition("Basic", "ha", "Successful", timeout=90, op=b)
        assert [line for line in reconcile_lines(b) if line.get("name") == "ha"]
        wait_for(lambda: leader_status(b_ends, lease) == 1, timeout=10, what="b leads")
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
        if b is not None:
            assert stop(b) == 0, b.log_text()[-3000:]


def test_sigterm_releases_the_lease_and_the_standby_takes_over_at_once(env: Env) -> None:
    lease = f"prod-term-{uuid.uuid4().hex[:6]}"
    a, _ = candidate(env, "term-a", lease)
    b: RunningOperator | None = None
    try:
        wait_logged(a, "became the leader", timeout=60)
        b, _ = candidate(env, "term-b", lease)
        wait_logged(b, "standing by, waiting for Lease", timeout=60)
        a_identity = env.lease(lease).spec.holder_identity

        stopped = time.monotonic()
        a.proc.send_signal(signal.SIGTERM)
        wait_logged(b, "became the leader", timeout=45)
        takeover = time.monotonic() - stopped
        assert a.proc.wait(timeout=60) == 0, a.log_text()[-3000:]
        exited = time.monotonic() - stopped
        assert env.lease(lease).spec.holder_identity not in (None, a_identity)
        released = logged_at(a, "released Lease")
        assert released, "released, not left to expire"
        took_over = logged_at(b, "became the leader")
        assert took_over
        handover = (took_over - released).total_seconds()
        print(
            f"\ntakeover after SIGTERM of the leader: {takeover:.1f} s, of which "
            f"{handover:.1f} s from the release (the old leader waited for its runs in progress, "
            f"and exited after {exited:.1f} s)"
        )
        assert 0 <= handover < 2 * 1.2 + 2, "the standby takes a released Lease at its next look"
        # a's runs ended before the release, b's began after its takeover: never both at once
        a_runs = [line_at(line) for line in reconcile_lines(a)]
        b_runs = [line_at(line) for line in reconcile_lines(b)]
        assert not a_runs or max(a_runs) <= released
        assert not b_runs or min(b_runs) >= took_over
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
        if b is not None:
            assert stop(b) == 0, b.log_text()[-3000:]


def test_sigterm_while_standing_by_exits_cleanly(env: Env) -> None:
    lease = f"prod-idle-{uuid.uuid4().hex[:6]}"
    a, _ = candidate(env, "idle-a", lease)
    b, _ = candidate(env, "idle-b", lease)
    try:
        wait_for(
            lambda: logged(a, "became the leader") or logged(b, "became the leader"),
            timeout=60,
            what="a leader",
        )
        standby = b if logged(a, "became the leader") else a
        wait_logged(standby, "standing by, waiting for Lease", timeout=30)
        assert stop(standby) == 0, standby.log_text()[-3000:]
        assert reconcile_lines(standby) == []
        assert not logged(standby, "released Lease")
    finally:
        for op in (a, b):
            if op.proc.poll() is None:
                assert stop(op) == 0, op.log_text()[-3000:]


def test_a_leader_that_loses_the_lease_stops_and_exits_non_zero(env: Env) -> None:
    lease = f"prod-lost-{uuid.uuid4().hex[:6]}"
    a, _ = candidate(env, "lost-a", lease)
    try:
        wait_logged(a, "became the leader", timeout=60)
        current = env.lease(lease)
        current.spec.holder_identity = "intruder"
        current.spec.renew_time = datetime.now(UTC)
        env.coordination.replace_namespaced_lease(lease, env.ns, current)
        taken = time.monotonic()
        code = a.proc.wait(timeout=30)
        gone = time.monotonic() - taken
        print(f"\nthe old leader exited {gone:.1f} s after its Lease was taken")
        assert code == 1, a.log_text()[-3000:]
        assert logged(a, "leader election lost")
        assert gone < 10
        assert env.lease(lease).spec.holder_identity == "intruder", "not released, not taken back"
    finally:
        if a.proc.poll() is None:
            a.proc.kill()
