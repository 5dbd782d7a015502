"""Per task, on the warm executor and on the plain one: the per-task metrics on a running
operator's /metrics after real runs of real roles (runner/app/serving/taskmetrics.py), and the
failing task named, with its role and file:line, in the Failure condition and its Event."""

from __future__ import annotations

import re
import socket
import urllib.request
from collections import defaultdict
from collections.abc import Iterator

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, condition, crd, install_crd, logged, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

GROUP = "tasks.operator-runner.dev"
WATCHES = PROJECT / "watches-taskmetrics.yaml"
KINDS = ("Timed", "Basic")
RESULTS = "operator_runner_task_results_total"
DURATION = "operator_runner_task_duration_seconds"
GREET = "Greet {{ ansible_operator_meta.name }}"  # as written in roles/timed/tasks/main.yml
FAIL = "Fail when the spec asks for it"
Series = dict[tuple[str, frozenset[tuple[str, str]]], float]


class Env(kit.Env):
    metrics_port = 0


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("taskmetrics")
    with cluster.api_client() as api, temporary_namespace(cluster, "tasks") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        environment.metrics_port = free_port()
        try:
            environment.start(
                args=(
                    f"--executor={request.param}",
                    f"--metrics-bind-address=127.0.0.1:{environment.metrics_port}",
                )
            )
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


def scrape(env: Env) -> Series:
    """Every series of /metrics: (name, labels) -> value."""
    url = f"http://127.0.0.1:{env.metrics_port}/metrics"
    with urllib.request.urlopen(url, timeout=5) as response:
        text = response.read().decode()
    found: Series = {}
    for line in text.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        series, _, value = line.rpartition(" ")
        name, _, labels = series.partition("{")
        pairs = re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', labels)
        found[(name, frozenset(pairs))] = float(value)
    return found


def value(series: Series, name: str, **labels: str) -> float:
    return series.get((name, frozenset(labels.items())), 0.0)


def test_task_results_and_durations_by_role_and_task(env: Env) -> None:
    for name in ("one", "two"):
        env.create("Timed", name, {})
    env.create("Timed", "bad", {"fail": True})
    env.create("Basic", "b", {"message": "hello"})
    for name in ("one", "two"):
        env.wait_condition("Timed", name, timeout=90)
    env.wait_condition("Timed", "bad", "Failure", timeout=90)
    env.wait_condition("Basic", "b", timeout=90)
    if env.executor == "warm":  # the runs were warm ones, not the plain path's fallback
        assert logged(env.op, "executor: warm (fork server)"), env.op.log_text()[-3000:]
        assert not logged(env.op, "runs take the plain path"), env.op.log_text()[-3000:]

    timed = {"kind": "Timed", "group": GROUP, "role": "timed"}
    greet = {**timed, "task": GREET}

    def counted() -> Series | None:
        series = scrape(env)
        done = value(series, RESULTS, **timed, task=FAIL, result="failed") >= 1
        done = done and value(series, RESULTS, **greet, result="ok") >= 3
        done = done and value(series, DURATION + "_count", **greet) >= 3
        basic = {"kind": "Basic", "group": GROUP, "role": "basic"}
        record = {**basic, "task": "Record the variables the run got"}
        return series if done and value(series, RESULTS, **record, result="changed") >= 1 else None

    series = wait_for(counted, timeout=30, what="the task series of the runs")
    # the name as written, never as Ansible templated it for each CR
    labels = {dict(labels).get("task") for (name, labels) in series if name == RESULTS}
    assert GREET in labels and not {"Greet one", "Greet two", "Greet bad"} & labels, labels
    assert value(series, RESULTS, **timed, task="ansible.builtin.set_fact", result="ok") >= 3
    assert value(series, RESULTS, **timed, task=FAIL, result="skipped") >= 2
    # each task result was timed once: the histogram counts what the counter counts
    results: dict[frozenset[tuple[str, str]], float] = defaultdict(float)
    for (name, labels), count in series.items():
        if name == RESULTS:
            results[frozenset((k, v) for k, v in labels if k != "result")] += count
    durations = {labels: n for (name, labels), n in series.items() if name == DURATION + "_count"}
    assert durations == dict(results)
    assert value(series, DURATION + "_bucket", **greet, le="+Inf") == value(
        series, DURATION + "_count", **greet
    )
    assert 0 < value(series, DURATION + "_sum", **greet) < 60


def test_the_failing_task_is_named_in_the_condition_and_the_event(env: Env) -> None:
    env.create("Timed", "named", {"fail": True})
    obj = env.wait_condition("Timed", "named", "Failure", timeout=90)
    want = f"{FAIL} (role timed, tasks/main.yml:12): asked to fail"
    assert (condition(obj, "Failure") or {}).get("message") == want
    events = wait_for(
        lambda: [e.message for e in env.events("named") if e.reason == "ReconcileFailed"],
        timeout=30,
        what="the ReconcileFailed Event",
    )
    assert events[0] == want
    described = env.cluster.kubectl("describe", f"timeds.{GROUP}", "named", "-n", env.ns)
    print(described)  # what a user sees (pytest -rP shows it)
    lines = [line for line in described.splitlines() if want in line]
    assert len(lines) == 2, described  # the Failure condition's Message, the Event's
