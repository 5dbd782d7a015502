"""The seeds' operators where Pods really run: a cluster with a real node (make cluster NODE=real).

A module-scoped cluster of its own (hack/cluster.sh up with NODE=real: kwok Nodes tainted
NoSchedule plus one real node, kubelet + containerd + kube-proxy, hack/real-node.sh), always
torn down afterwards. The real operator process (`operator-runner run` with the project's
watches.yaml) converges the seeds' sample CRs verbatim; the Echo's busybox really prints
`hello world!` and ends, the EchoFlask app really answers on its NodePort at 127.0.0.1.
The last test takes the cluster down with `make cluster-down NODE=real` and checks that the host
is as it was before the cluster came up (sysctls, iptables, links, mounts, cgroups, paths).

Skipped, with the reason, where the machine cannot host a real node (hack/real-node.sh check:
not root, no usable cgroups, ...), where another real-node cluster is up, or where the node's
binaries and images are not built: they are built before pytest starts, never inside a test
(`make binaries NODE=real node-images`). With OPERATOR_RUNNER_REQUIRE_REAL_NODE=1 (for a CI
that prepares them) each of these is a failure instead.
"""

from __future__ import annotations

import json
import subprocess
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
from kubernetes import client

from .conftest import REPO
from .kit import wait_for
from .kit.realnode import NODE_NAME, RealCluster, diff_states, host_state, why_not
from .test_operators import ECHO, FLASK, FLASK_LABELS, WATCHES, Env, wait_established

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(why_not() is not None, reason=why_not() or ""),
]


@pytest.fixture(scope="module")
def env(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    real_cluster.kubectl("apply", "-f", str(REPO / "crds"))
    namespace = f"real-{uuid.uuid4().hex[:8]}"
    tmp = tmp_path_factory.mktemp("real-node")
    with real_cluster.api_client() as api:
        wait_established(api)
        real_cluster.kubectl("create", "namespace", namespace)
        environment = Env(real_cluster, api, namespace, tmp, watches=WATCHES)
        try:
            environment.start()
            yield environment
        finally:
            environment.stop()


# -- the tests -------------------------------------------------------------------------------


def test_kwok_nodes_are_tainted_and_the_real_node_is_ready(real_cluster: RealCluster) -> None:
    nodes = json.loads(real_cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    by_name = {n["metadata"]["name"]: n for n in nodes}
    assert NODE_NAME in by_name, sorted(by_name)
    real = by_name.pop(NODE_NAME)
    ready = [c for c in real["status"]["conditions"] if c["type"] == "Ready"]
    assert ready and ready[0]["status"] == "True"
    assert "kwok.x-k8s.io/node" not in (real["metadata"].get("annotations") or {})
    assert not real["spec"].get("taints")
    assert by_name, "no kwok Nodes beside the real one"
    for fake in by_name.values():
        taints = {(t["key"], t.get("value"), t["effect"]) for t in fake["spec"].get("taints", [])}
        assert ("kwok.x-k8s.io/node", "fake", "NoSchedule") in taints, fake["metadata"]["name"]


def test_echo_sample_runs_on_the_real_node(env: Env) -> None:
    """Seed 000: `kubectl logs echo-sample` prints `hello world!`; the Echo's status.phase
    follows its Pod to Succeeded."""
    env.apply_sample("app_v1_echo.yaml")

    def succeeded() -> client.V1Pod | None:
        pod = env.pod("echo-sample")
        return pod if pod and pod.status.phase == "Succeeded" else None

    pod = wait_for(succeeded, timeout=120, what="Pod echo-sample Succeeded")
    assert pod.spec.node_name == NODE_NAME
    logs = env.cluster.kubectl("logs", "-n", env.ns, "echo-sample")
    assert "hello world!" in logs

    def phase() -> bool:
        obj = env.get(ECHO, "echo-sample")
        return ((obj or {}).get("status") or {}).get("phase") == "Succeeded"

    wait_for(phase, timeout=90, what="Echo echo-sample status.phase Succeeded")


def _echo_api(port: int) -> dict[str, Any] | None:
    url = f"http://127.0.0.1:{port}/api/echo?Hello=World!"
    try:
        with urllib.request.urlopen(url, timeout=5) as reply:
            body: dict[str, Any] = json.load(reply)
            return body
    except OSError:
        return None


def test_echoflask_sample_answers_on_its_node_port(env: Env) -> None:
    """Seed 004: three Pods of the app Running on the real node; GET /api/echo on the NodePort
    at 127.0.0.1 answers JSON naming a Pod that status.nodes lists."""
    env.apply_sample("swallowlab_v1alpha1_echoflask.yaml")
    nodes = wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 3),
        timeout=180,
        what="3 Running Pods of example-echoflask listed in status.nodes",
    )
    pods = env.live_pods(FLASK_LABELS.format("example-echoflask"))
    assert {p.spec.node_name for p in pods} == {NODE_NAME}
    service = env.service("example-echoflask-svc")
    assert service is not None and service.spec.type == "NodePort"
    port = service.spec.ports[0].node_port
    body = wait_for(lambda: _echo_api(port), timeout=60, what=f"an answer on NodePort {port}")
    assert set(body) == {"api", "nodename", "pod_ip", "podname", "query_string", "timestamp"}
    assert body["api"] == "echo"
    assert body["query_string"] == ["Hello=World!"]
    assert body["nodename"] == NODE_NAME
    assert body["podname"] in nodes
    served_by = next(p for p in pods if p.metadata.name == body["podname"])
    assert body["pod_ip"] == served_by.status.pod_ip


def test_echoflask_scales_3_5_3(env: Env) -> None:
    for size in (5, 3):
        env.patch_spec(FLASK, "example-echoflask", {"size": size})

        def matched(size: int = size) -> list[str] | None:
            return env.nodes_match_pods("example-echoflask", size)

        nodes = wait_for(
            matched,
            timeout=180,
            what=f"{size} Running Pods listed in status.nodes",
        )
        assert len(nodes) == size
        pods = env.live_pods(FLASK_LABELS.format("example-echoflask"))
        assert {p.spec.node_name for p in pods} == {NODE_NAME}


def test_deleting_the_crs_collects_everything(env: Env) -> None:
    env.delete(ECHO, "echo-sample")
    env.delete(FLASK, "example-echoflask")

    def all_gone() -> bool:
        pods = env.core.list_namespaced_pod(env.ns).items
        return (
            not pods
            and env.deployment("example-echoflask-deployment") is None
            and env.service("example-echoflask-svc") is None
            and env.get(ECHO, "echo-sample") is None
            and env.get(FLASK, "example-echoflask") is None
        )

    wait_for(all_gone, timeout=120, what="the CRs and everything they made to be deleted")


def test_cluster_down_restores_the_host(real_cluster: RealCluster, env: Env) -> None:
    """`make cluster-down NODE=real` leaves the host as it was before the cluster came up."""
    env.stop()  # the operator talks to this cluster: stop it first
    subprocess.run(
        [
            "make",
            "--no-print-directory",
            "cluster-down",
            "NODE=real",
            f"CLUSTER_NAME={real_cluster.name}",
        ],
        cwd=REPO,
        check=True,
        timeout=600,
    )
    changes = diff_states(real_cluster.host_before, host_state())
    assert not changes, json.dumps(changes, indent=1)
