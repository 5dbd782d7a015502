"""operator_sdk.util.k8s_status and requeue_after, run by real ansible-playbook on the cluster.

Each test writes a small playbook whose tasks register their results (errors ignored) and dump
them to JSON files, then asserts on those results and on the CR read back from the API server.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from runner.ansible.collections_path import BUNDLED_COLLECTIONS

from .conftest import Cluster
from .kit import crd, wait_for

# `lines`: what an ansible-core line can change; make test runs these on every line.
pytestmark = [pytest.mark.integration, pytest.mark.lines]

REPO = Path(__file__).resolve().parents[2]
COLLECTIONS = BUNDLED_COLLECTIONS
BIN = Path(sys.executable).parent
VERSION = "v1"
OLD_TIME = "2020-01-02T03:04:05Z"
RFC3339_Z = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
CR_ENV = ("API_VERSION", "KIND", "PLURAL", "NAME", "NAMESPACE")


@dataclass(frozen=True)
class Crds:
    group: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{VERSION}"


@dataclass(frozen=True)
class Widget:
    """A CR (kind Widget, with a status subresource) in its own namespace."""

    cluster: Cluster
    api_version: str
    namespace: str
    name: str = "w1"
    kind: str = "Widget"
    plural: str = "widgets"

    @property
    def resource(self) -> str:
        return f"{self.plural}.{self.api_version.split('/')[0]}"

    @property
    def ref(self) -> dict[str, str]:
        return {
            "api_version": self.api_version,
            "kind": self.kind,
            "name": self.name,
            "namespace": self.namespace,
        }

    def status(self) -> dict[str, Any]:
        out = self.cluster.kubectl("get", self.resource, self.name, "-n", self.namespace, "-ojson")
        status: dict[str, Any] = json.loads(out).get("status") or {}
        return status

    def set_status(self, status: dict[str, Any]) -> None:
        self.cluster.kubectl(
            "patch",
            self.resource,
            self.name,
            "-n",
            self.namespace,
            "--subresource=status",
            "--type=merge",
            "-p",
            json.dumps({"status": status}),
        )


def _served(cluster: Cluster, group: str, plurals: set[str]) -> bool:
    with cluster.api_client() as api:
        try:
            found = client.CustomObjectsApi(api).get_api_resources(group, VERSION)
        except ApiException:
            return False
    return plurals <= {r.name for r in found.resources}


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> Iterator[Crds]:
    group = f"t{uuid.uuid4().hex[:8]}.status.operator-runner.test"
    defs = [
        crd(group, "Widget", status_subresource=True),
        crd(group, "Gadget", status_subresource=False),
    ]
    names = [d["metadata"]["name"] for d in defs]
    try:
        cluster.kubectl(
            "apply",
            "-f",
            "-",
            input=json.dumps({"kind": "List", "items": defs, "apiVersion": "v1"}),
        )
        cluster.kubectl(
            "wait", "--for=condition=Established", "--timeout=60s", *[f"crd/{n}" for n in names]
        )
        wait_for(
            lambda: _served(cluster, group, {"widgets", "gadgets"}),
            timeout=60,
            what=f"discovery of {group}/{VERSION}",
        )
        yield Crds(group)
    finally:
        cluster.kubectl("delete", "crd", *names, "--ignore-not-found", "--wait=false", check=False)


def _create(cluster: Cluster, api_version: str, kind: str, name: str, namespace: str) -> None:
    obj = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"size": 1},
    }
    cluster.kubectl("create", "-f", "-", input=json.dumps(obj))


@pytest.fixture
def widget(cluster: Cluster, crds: Crds, namespace: str) -> Widget:
    w = Widget(cluster, crds.api_version, namespace)
    _create(cluster, w.api_version, w.kind, w.name, namespace)
    return w


def _env(cluster: Cluster, tmp_path: Path, extra: dict[str, str] | None) -> dict[str, str]:
    own = ("OPERATOR_RUNNER_CR_", "K8S_AUTH_", "ANSIBLE_")
    env = {k: v for k, v in os.environ.items() if not k.startswith(own)}
    env.update(
        KUBECONFIG=str(cluster.kubeconfig),
        ANSIBLE_COLLECTIONS_PATH=str(COLLECTIONS),
        ANSIBLE_HOME=str(tmp_path / "ansible-home"),
        ANSIBLE_LOCAL_TEMP=str(tmp_path / "ansible-tmp"),
        ANSIBLE_NOCOLOR="1",
    )
    env.update(extra or {})
    return env


def run_tasks(
    cluster: Cluster,
    tmp_path: Path,
    tasks: list[dict[str, Any]],
    env: dict[str, str] | None = None,
) -> list[dict[str, Any]]:
    """Run `tasks` in one real ansible-playbook run; return each task's registered result."""
    out = tmp_path / f"out-{uuid.uuid4().hex[:6]}"
    out.mkdir()
    play_tasks: list[dict[str, Any]] = []
    for i, task in enumerate(tasks):
        play_tasks.append({"name": f"task {i}", **task, "register": f"r{i}", "ignore_errors": True})
        play_tasks.append(
            {
                "ansible.builtin.copy": {
                    "content": f"{{{{ r{i} | to_json }}}}",
                    "dest": str(out / f"{i}.json"),
                }
            }
        )
    playbook = out / "playbook.yml"
    playbook.write_text(
        yaml.safe_dump([{"hosts": "localhost", "gather_facts": False, "tasks": play_tasks}])
    )
    inventory = out / "inventory"
    inventory.write_text(
        f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
    )
    proc = subprocess.run(
        [str(BIN / "ansible-playbook"), "-i", str(inventory), str(playbook)],
        env=_env(cluster, tmp_path, env),
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, f"ansible-playbook failed:\n{proc.stdout}\n{proc.stderr}"
    return [json.loads((out / f"{i}.json").read_text()) for i in range(len(tasks))]


def status_task(**args: Any) -> dict[str, Any]:
    return {"operator_sdk.util.k8s_status": args}


def _is_recent(timestamp: str) -> bool:
    assert RFC3339_Z.match(timestamp), timestamp
    when = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return abs(datetime.now(UTC) - when) < timedelta(minutes=5)


def _condition(status: dict[str, Any], ctype: str) -> dict[str, Any]:
    found = [c for c in status.get("conditions", []) if c.get("type") == ctype]
    assert len(found) == 1, status
    return dict(found[0])


def test_status_keys_are_merged_and_other_keys_kept(
    cluster: Cluster, widget: Widget, tmp_path: Path
) -> None:
    widget.set_status({"keep": "me", "nested": {"a": 1, "b": 2}, "items": [1, 2], "gone": 1})
    update = {"phase": "Running", "nested": {"b": 3}, "items": [3], "gone": None}

    first, again = run_tasks(cluster, tmp_path, [status_task(**widget.ref, status=update)] * 2)

    expected = {"keep": "me", "nested": {"a": 1, "b": 3}, "items": [3], "phase": "Running"}
    assert first["changed"] is True, first
    assert first["result"]["status"] == expected
    assert again["changed"] is False, again
    assert widget.status() == expected


def test_conditions_merge_by_type_and_transition_time_follows_status(
    cluster: Cluster, widget: Widget, tmp_path: Path
) -> None:
    other = {
        "type": "Other",
        "status": "True",
        "reason": "Untouched",
        "lastTransitionTime": OLD_TIME,
    }
    widget.set_status({"conditions": [other]})
    ready = {"type": "Ready", "status": "True", "reason": "AllGood", "message": "fine"}

    added, same = run_tasks(cluster, tmp_path, [status_task(**widget.ref, conditions=[ready])] * 2)

    assert added["changed"] is True, added
    assert same["changed"] is False, same
    status = widget.status()
    assert [c["type"] for c in status["conditions"]] == ["Other", "Ready"]
    assert _condition(status, "Other") == other
    first = _condition(status, "Ready")
    assert _is_recent(first.pop("lastTransitionTime"))
    assert first == ready

    widget.set_status({"conditions": [other, {**ready, "lastTransitionTime": OLD_TIME}]})
    reworded = {**ready, "message": "still fine", "observedGeneration": 1}
    flipped = {"type": "Ready", "status": "False", "reason": "Broken", "message": "down"}

    kept, changed = run_tasks(
        cluster,
        tmp_path,
        [
            status_task(**widget.ref, conditions=[reworded]),
            status_task(**widget.ref, conditions=[flipped]),
        ],
    )

    assert kept["changed"] is True, kept
    assert _condition(kept["result"]["status"], "Ready") == {
        **reworded,
        "lastTransitionTime": OLD_TIME,
    }
    assert changed["changed"] is True, changed
    ready_now = _condition(widget.status(), "Ready")
    assert ready_now["lastTransitionTime"] != OLD_TIME
    assert _is_recent(ready_now.pop("lastTransitionTime"))
    assert ready_now == flipped
    assert _condition(widget.status(), "Other") == other


def test_invalid_conditions_fail_with_clear_messages(
    cluster: Cluster, widget: Widget, tmp_path: Path
) -> None:
    bad = [
        {"type": "Ready", "status": "True", "reason": "not camel case"},
        {"type": "Ready", "status": "Maybe"},
        {"status": "True"},
        {"type": "Ready", "status": "True", "lastTransitionTime": "yesterday"},
    ]

    results = run_tasks(cluster, tmp_path, [status_task(**widget.ref, conditions=[c]) for c in bad])

    assert all(r.get("failed") for r in results), results
    messages = [r["msg"] for r in results]
    assert "condition 'Ready': `reason` must be a CamelCase word" in messages[0]
    assert "'not camel case'" in messages[0]
    assert "`status` must be one of True, False, Unknown; got 'Maybe'" in messages[1]
    assert "conditions[0]: `type` is required" in messages[2]
    assert "`lastTransitionTime` must be an RFC 3339 time" in messages[3]
    assert widget.status() == {}


@pytest.mark.parametrize("with_plural", [True, False], ids=["env-plural", "discovery"])
def test_target_defaults_to_the_reconciled_cr_from_the_environment(
    cluster: Cluster, widget: Widget, tmp_path: Path, with_plural: bool
) -> None:
    env = {
        "OPERATOR_RUNNER_CR_API_VERSION": widget.api_version,
        "OPERATOR_RUNNER_CR_KIND": widget.kind,
        "OPERATOR_RUNNER_CR_PLURAL": widget.plural if with_plural else "",
        "OPERATOR_RUNNER_CR_NAME": widget.name,
        "OPERATOR_RUNNER_CR_NAMESPACE": widget.namespace,
    }
    ready = {"type": "Ready", "status": "True", "reason": "Reconciled"}

    (result,) = run_tasks(
        cluster,
        tmp_path,
        [status_task(status={"fromEnv": True}, conditions=[ready])],
        env=env,
    )

    assert result["changed"] is True, result
    status = widget.status()
    assert status["fromEnv"] is True
    assert _condition(status, "Ready")["reason"] == "Reconciled"


def test_without_target_parameters_or_environment_it_fails_clearly(
    cluster: Cluster, tmp_path: Path
) -> None:
    (result,) = run_tasks(cluster, tmp_path, [status_task(status={"a": 1})])

    assert result.get("failed"), result
    assert "OPERATOR_RUNNER_CR_KIND is not in the environment" in result["msg"]


def test_crd_without_status_subresource_or_missing_cr_fails_clearly(
    cluster: Cluster, crds: Crds, namespace: str, tmp_path: Path
) -> None:
    _create(cluster, crds.api_version, "Gadget", "g1", namespace)
    ref = {"api_version": crds.api_version, "kind": "Gadget", "namespace": namespace}

    no_subresource, missing = run_tasks(
        cluster,
        tmp_path,
        [
            status_task(**ref, name="g1", status={"a": 1}),
            status_task(**ref, name="nope", status={"a": 1}),
        ],
    )

    assert no_subresource.get("failed"), no_subresource
    assert "has no status subresource" in no_subresource["msg"]
    assert "add `subresources: {status: {}}` to the CRD" in no_subresource["msg"]
    assert missing.get("failed"), missing
    assert (
        f"Gadget 'nope' ({crds.api_version}) in namespace {namespace} not found" in (missing["msg"])
    )


def test_check_mode_reports_the_change_without_making_it(
    cluster: Cluster, widget: Widget, tmp_path: Path
) -> None:
    widget.set_status({"keep": "me"})

    (result,) = run_tasks(
        cluster,
        tmp_path,
        [{**status_task(**widget.ref, status={"phase": "New"}), "check_mode": True}],
    )

    assert result["changed"] is True, result
    assert result["result"]["status"] == {"keep": "me", "phase": "New"}
    assert widget.status() == {"keep": "me"}


def test_force_replaces_the_whole_status(cluster: Cluster, widget: Widget, tmp_path: Path) -> None:
    ready = {"type": "Ready", "status": "True", "lastTransitionTime": OLD_TIME}
    widget.set_status({"keep": "me", "nested": {"a": 1}, "conditions": [ready]})
    ready_again = {"type": "Ready", "status": "True"}

    (result,) = run_tasks(
        cluster,
        tmp_path,
        [status_task(**widget.ref, status={"only": "this"}, conditions=[ready_again], force=True)],
    )

    assert result["changed"] is True, result
    assert widget.status() == {"only": "this", "conditions": [ready]}


def test_requeue_after_returns_the_period_and_rejects_garbage(
    cluster: Cluster, tmp_path: Path
) -> None:
    tasks = [
        {"operator_sdk.util.requeue_after": {"period": "1h30m"}},
        {"operator_sdk.util.requeue_after": {"time": "250ms"}},
        {"operator_sdk.util.requeue_after": {"period": "abc"}},
        {"operator_sdk.util.requeue_after": {"period": "-5s"}},
    ]

    hours, millis, garbage, negative = run_tasks(cluster, tmp_path, tasks)

    assert hours["period"] == "1h30m" and hours["period_seconds"] == 5400.0, hours
    assert hours["changed"] is False
    assert millis["period"] == "250ms" and millis["period_seconds"] == pytest.approx(0.25)
    assert garbage.get("failed"), garbage
    assert "invalid period 'abc'" in garbage["msg"]
    assert negative.get("failed"), negative
    assert "must not be negative" in negative["msg"]


@pytest.mark.parametrize("module", ["k8s_status", "requeue_after"])
def test_ansible_doc_reads_the_documentation(module: str) -> None:
    proc = subprocess.run(
        [str(BIN / "ansible-doc"), "--json", f"operator_sdk.util.{module}"],
        env={**os.environ, "ANSIBLE_COLLECTIONS_PATH": str(COLLECTIONS)},
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)[f"operator_sdk.util.{module}"]["doc"]
    assert doc["options"], doc
