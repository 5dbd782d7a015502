"""The two seed operators end to end: Echo (seed 000) and EchoFlask (seed 004).

The real operator process runs the project's own watches.yaml (roles/echo, playbooks/echoflask.yml)
against a real API server; the seeds' sample CRs are applied verbatim from config/samples/.

Pods are simulated by kwok: they get scheduled and turn Running, but nothing really runs, so the
Echo Pod stays Running (on a real cluster `echo` ends and the phase becomes Succeeded).

Tests that need operator-runner's owner references and dependent watches (ownerReferences on
what the roles create, a deleted Pod coming back, status.nodes following a deleted Pod, garbage
collection on CR deletion) say so in their docstring.
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client
from kubernetes.client.exceptions import ApiException

from . import kit
from .conftest import Cluster
from .kit import CrKind, completion, condition, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
WATCHES = REPO / "watches.yaml"

ECHO = CrKind("app.my.domain", "v1", "echoes", "Echo")
FLASK = CrKind("swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask")
FLASK_LABELS = "app=echoflask,echoflask_cr={}"
DEFAULT_IMAGE = "takeyan/flask:0.0.3"
# How soon status.nodes must follow a change of the Pods (the brief of the seed operators), on
# the warm executor; a plain run costs ten times its CPU (bench/README.md), so the plain path is
# given four times as long: these tests check what it does, the warm path's tests how soon.
NODES_DEADLINE = 30


def deadline(env: Env) -> float:
    return NODES_DEADLINE if env.executor == "warm" else 4 * NODES_DEADLINE


class Env(kit.Env):
    """The project's operators (watches.yaml) watching one namespace."""

    def nodes_match_pods(self, name: str, size: int, image: str | None = None) -> list[str] | None:
        """status.nodes when it lists exactly the `size` Running Pods of EchoFlask `name`."""
        obj = self.get(FLASK, name)
        pods = self.live_pods(FLASK_LABELS.format(name))
        running = sorted(p.metadata.name for p in pods if p.status.phase == "Running")
        if len(pods) != size or len(running) != size:
            return None
        if image and any(p.spec.containers[0].image != image for p in pods):
            return None
        nodes = ((obj or {}).get("status") or {}).get("nodes")
        return nodes if nodes == running else None


def owner_of(meta: client.V1ObjectMeta, cr: dict[str, Any]) -> client.V1OwnerReference | None:
    for ref in meta.owner_references or []:
        if ref.uid == cr["metadata"]["uid"]:
            return ref
    return None


def wait_established(api: client.ApiClient) -> None:
    ext = client.ApiextensionsV1Api(api)

    def established(name: str) -> bool:
        crd = ext.read_custom_resource_definition(name)
        return any(
            c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
        )

    for name in ("echoes.app.my.domain", "echoflasks.swallowlab.com"):
        wait_for(lambda n=name: established(n), timeout=30, what=f"CRD {name} Established")


@pytest.fixture(scope="module")
def crds(cluster: Cluster) -> None:
    """The project's CRDs, as `make install` applies them. They stay installed afterwards:
    deleting a CRD deletes every CR of its kind, also those of others using the same cluster."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    with cluster.api_client() as api:
        wait_established(api)


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster,
    crds: None,
    tmp_path_factory: pytest.TempPathFactory,
    request: pytest.FixtureRequest,
) -> Iterator[Env]:
    """The project's operators, once with the warm executor and once with plain ansible-runner
    runs: both paths must pass the same tests."""
    tmp = tmp_path_factory.mktemp("operators")
    with cluster.api_client() as api, temporary_namespace(cluster, "ops") as namespace:
        environment = Env(cluster, api, namespace, tmp, watches=WATCHES)
        try:
            environment.start(args=(f"--executor={request.param}",))
            yield environment
        finally:
            environment.stop()


# -- Echo ------------------------------------------------------------------------------------


def test_echo_sample_runs_its_command_in_a_pod(env: Env) -> None:
    env.apply_sample("app_v1_echo.yaml")
    env.wait_condition(ECHO, "echo-sample")
    pod = env.pod("echo-sample")
    assert pod is not None
    assert pod.metadata.labels.get("app") == "echo-sample"
    assert pod.spec.restart_policy == "OnFailure"
    [container] = pod.spec.containers
    assert (container.name, container.image) == ("busybox", "busybox")
    assert container.command == ["echo", "hello", "world!"]
    assert container.args is None

    obj = wait_for(
        lambda: (o := env.get(ECHO, "echo-sample")) and o["status"].get("phase") == "Running" and o,
        timeout=deadline(env),
        what="status.phase Running",
    )
    successful = condition(obj, "Successful")
    assert successful and successful["reason"] == "Successful"
    table = env.cluster.kubectl("get", "echo", "-n", env.ns)
    assert table.split()[:4] == ["NAME", "COMMAND", "PHASE", "AGE"]
    assert "echo hello world!" in table and "Running" in table
    assert "echo-sample" in env.cluster.kubectl("get", "ech", "-n", env.ns, "-o", "name")


def test_echo_pod_is_controlled_by_the_echo(env: Env) -> None:
    """Needs operator-runner's owner references (the roles write none)."""
    obj = env.wait_condition(ECHO, "echo-sample")
    pod = env.pod("echo-sample")
    assert pod is not None
    ref = owner_of(pod.metadata, obj)
    assert ref is not None, f"no ownerReference to the Echo: {pod.metadata.owner_references}"
    assert (ref.api_version, ref.kind, ref.name) == ("app.my.domain/v1", "Echo", "echo-sample")
    assert ref.controller is True


# -- EchoFlask -------------------------------------------------------------------------------


def test_echoflask_sample_makes_deployment_service_and_status(env: Env) -> None:
    env.apply_sample("swallowlab_v1alpha1_echoflask.yaml")
    obj = env.wait_condition(FLASK, "example-echoflask")
    assert obj["spec"] == {"size": 3, "image": DEFAULT_IMAGE}, "the CRD defaults spec.image"
    labels = {"app": "echoflask", "echoflask_cr": "example-echoflask"}

    deployment = env.deployment("example-echoflask-deployment")
    assert deployment is not None
    assert deployment.spec.replicas == 3
    assert deployment.metadata.labels == labels
    assert deployment.spec.selector.match_labels == labels
    assert deployment.spec.template.metadata.labels == labels
    [container] = deployment.spec.template.spec.containers
    assert (container.name, container.image) == ("echoflask", DEFAULT_IMAGE)
    assert [(p.container_port, p.protocol) for p in container.ports] == [(5000, "TCP")]

    service = env.service("example-echoflask-svc")
    assert service is not None
    assert service.spec.type == "NodePort"
    assert service.spec.selector == labels
    [port] = service.spec.ports
    assert (port.port, port.target_port, port.protocol) == (5000, 5000, "TCP")
    assert port.node_port

    wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 3),
        timeout=deadline(env),
        what="status.nodes to list the 3 Running Pods",
    )
    wait_for(
        lambda: env.get(FLASK, "example-echoflask")["status"].get("readyReplicas") == 3,  # type: ignore[index]
        timeout=deadline(env),
        what="status.readyReplicas 3",
    )
    # `kubectl get echoflask` reads v1alpha1, the seed's (stored, preferred: v1alpha0 sorts
    # below it); v1alpha0 is converted by the operator (another test's operator, gone, may hold
    # the CRD's conversion until ours looks again)
    table = env.cluster.kubectl("get", "echoflask", "-n", env.ns)
    assert table.split()[:4] == ["NAME", "SIZE", "READY", "AGE"]
    assert table.splitlines()[1].split()[:3] == ["example-echoflask", "3", "3"]
    table = wait_for(
        lambda: env.cluster.kubectl(
            "get", "echoflasks.v1alpha0.swallowlab.com", "-n", env.ns, check=False
        ),
        timeout=30,
        what="kubectl get echoflasks.v1alpha0 (converted by the operator)",
    )
    assert table.split()[:4] == ["NAME", "REPLICAS", "READY", "AGE"]
    assert table.splitlines()[1].split()[:3] == ["example-echoflask", "3", "3"]
    assert "example-echoflask" in env.cluster.kubectl("get", "ef", "-n", env.ns, "-o", "name")


def test_the_echoflask_sample_reads_the_same_in_both_versions(env: Env) -> None:
    """v1alpha1 (the seed's, stored, watched) and v1alpha0 (`replicas` for `size`): one object."""
    env.apply_sample("swallowlab_v1alpha1_echoflask.yaml")
    wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 3),
        timeout=NODES_DEADLINE,
        what="status.nodes to list the 3 Running Pods",
    )

    def read(version: str) -> dict[str, Any]:
        text = wait_for(
            lambda: env.cluster.kubectl(
                "get",
                f"echoflasks.{version}.swallowlab.com",
                "example-echoflask",
                "-n",
                env.ns,
                "-o",
                "json",
                check=False,
            ),
            timeout=30,
            what=f"the EchoFlask sample in {version}",
        )
        obj: dict[str, Any] = json.loads(text)
        return obj

    alpha, beta = read("v1alpha1"), read("v1alpha0")
    assert alpha["apiVersion"] == "swallowlab.com/v1alpha1" and alpha["spec"]["size"] == 3
    assert beta["apiVersion"] == "swallowlab.com/v1alpha0"
    assert beta["spec"] == {"replicas": 3, "image": DEFAULT_IMAGE}
    assert beta["status"]["nodes"] == alpha["status"]["nodes"]
    assert beta["metadata"]["uid"] == alpha["metadata"]["uid"]


def test_echoflask_objects_are_controlled_by_the_echoflask(env: Env) -> None:
    """Needs operator-runner's owner references (the roles write none)."""
    obj = env.wait_condition(FLASK, "example-echoflask")
    for what in (
        env.deployment("example-echoflask-deployment"),
        env.service("example-echoflask-svc"),
    ):
        assert what is not None
        ref = owner_of(what.metadata, obj)
        assert ref is not None, f"{what.kind} has no ownerReference to the EchoFlask"
        assert (ref.api_version, ref.kind) == ("swallowlab.com/v1alpha1", "EchoFlask")
        assert ref.controller is True


# -- changes ---------------------------------------------------------------------------------


def test_reconciling_again_changes_nothing(env: Env) -> None:
    """A restarted operator reconciles every CR once more: the roles report changed=0."""
    wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 3),
        timeout=60,
        what="the EchoFlask sample to settle",
    )
    before = {
        crd: completion(condition(env.wait_condition(crd, name), "Successful"))
        for crd, name in ((ECHO, "echo-sample"), (FLASK, "example-echoflask"))
    }
    # A run started before the restart may have been a requeue; wait for the runs after it.
    env.restart()
    for crd, name in ((ECHO, "echo-sample"), (FLASK, "example-echoflask")):
        obj = env.wait_condition(crd, name, after=before[crd])
        result = condition(obj, "Successful")["ansibleResult"]  # type: ignore[index]
        assert result["changed"] == 0, f"{crd[2]}/{name} changed on a second run: {result}"
        assert result["failures"] == 0


def test_changed_command_replaces_the_pod(env: Env) -> None:
    old = env.pod("echo-sample")
    assert old is not None
    env.patch_spec(ECHO, "echo-sample", {"command": "echo  good bye"})
    env.wait_condition(ECHO, "echo-sample")

    def replaced() -> client.V1Pod | None:
        pod = env.pod("echo-sample")
        return pod if pod and pod.metadata.uid != old.metadata.uid else None

    pod = wait_for(replaced, timeout=deadline(env), what="a new echo-sample Pod")
    assert pod.spec.containers[0].command == ["echo", "good", "bye"]
    assert pod.metadata.labels.get("app") == "echo-sample"
    wait_for(
        lambda: env.get(ECHO, "echo-sample")["status"].get("phase") == "Running",  # type: ignore[index]
        timeout=deadline(env),
        what="status.phase Running again",
    )


def test_deleted_echo_pod_comes_back(env: Env) -> None:
    """Needs operator-runner's dependent watches (a deleted owned Pod reconciles its owner)."""
    old = env.pod("echo-sample")
    assert old is not None
    env.core.delete_namespaced_pod("echo-sample", env.ns)

    def back() -> client.V1Pod | None:
        pod = env.pod("echo-sample")
        if pod and pod.metadata.uid != old.metadata.uid and not pod.metadata.deletion_timestamp:
            return pod
        return None

    pod = wait_for(
        back, timeout=deadline(env), what="the deleted echo-sample Pod to be created again"
    )
    assert pod.spec.containers[0].command == old.spec.containers[0].command


def test_scaling_to_five_updates_deployment_and_nodes_in_time(env: Env) -> None:
    service = env.service("example-echoflask-svc")
    assert service is not None
    node_port = service.spec.ports[0].node_port

    started = time.monotonic()
    env.patch_spec(FLASK, "example-echoflask", {"size": 5})
    nodes = wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 5),
        timeout=deadline(env),
        what="status.nodes to list the 5 Running Pods",
    )
    print(f"status.nodes matched 5 Pods {time.monotonic() - started:.1f} s after the edit")
    assert len(set(nodes)) == 5
    deployment = env.deployment("example-echoflask-deployment")
    assert deployment is not None and deployment.spec.replicas == 5
    env.wait_condition(FLASK, "example-echoflask")
    service = env.service("example-echoflask-svc")
    assert service is not None
    assert service.spec.ports[0].node_port == node_port, "the node port must not change"
    wait_for(
        lambda: env.get(FLASK, "example-echoflask")["status"].get("readyReplicas") == 5,  # type: ignore[index]
        timeout=deadline(env),
        what="status.readyReplicas 5",
    )


def test_deleted_pod_leaves_status_nodes_in_time(env: Env) -> None:
    """Needs operator-runner's dependent watches: nothing else reconciles the EchoFlask when one
    of its Pods goes away (the ReplicaSet replaces it)."""
    wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 5),
        timeout=deadline(env),
        what="5 Pods listed before the deletion",
    )
    victim = env.live_pods(FLASK_LABELS.format("example-echoflask"))[0].metadata.name
    env.core.delete_namespaced_pod(victim, env.ns)
    nodes = wait_for(
        lambda: (n := env.nodes_match_pods("example-echoflask", 5)) and victim not in n and n,
        timeout=deadline(env),
        what=f"status.nodes without the deleted Pod {victim}",
    )
    assert len(nodes) == 5


def test_image_change_rolls_the_deployment(env: Env) -> None:
    before = {p.metadata.name for p in env.live_pods(FLASK_LABELS.format("example-echoflask"))}
    env.patch_spec(FLASK, "example-echoflask", {"image": "takeyan/flask:0.0.2"})
    nodes = wait_for(
        lambda: env.nodes_match_pods("example-echoflask", 5, image="takeyan/flask:0.0.2"),
        timeout=90,
        what="the rollout to takeyan/flask:0.0.2 and status.nodes to follow it",
    )
    assert not before & set(nodes), "every Pod was replaced"
    env.wait_condition(FLASK, "example-echoflask")


# -- bad input -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("crd", "spec", "field"),
    [
        (FLASK, {"size": -1}, "spec.size"),
        (FLASK, {"size": "abc"}, "spec.size"),
        (FLASK, {"size": 101}, "spec.size"),
        (FLASK, {}, "spec.size"),
        (ECHO, {"command": ""}, "spec.command"),
        (ECHO, {"command": "   "}, "spec.command"),
        (ECHO, {}, "spec.command"),
    ],
    ids=[
        "size-negative",
        "size-text",
        "size-too-big",
        "size-missing",
        "command-empty",
        "command-spaces",
        "command-missing",
    ],
)
def test_schema_refuses_bad_specs(env: Env, crd: CrKind, spec: dict[str, Any], field: str) -> None:
    with pytest.raises(ApiException) as refused:
        env.create(crd, f"refused-{uuid.uuid4().hex[:6]}", spec)
    assert refused.value.status == 422
    assert f"{field}:" in refused.value.body, refused.value.body


def test_bad_image_fails_clearly_while_others_converge(env: Env) -> None:
    env.create(FLASK, "bad-image", {"size": 1, "image": "Bad Image!"})
    env.create(FLASK, "neighbour", {"size": 2})
    obj = env.wait_condition(FLASK, "bad-image", "Failure")
    message = condition(obj, "Failure")["message"]  # type: ignore[index]
    assert 'spec.image "Bad Image!" is not a valid image reference' in message
    assert DEFAULT_IMAGE in message, "the message says what to use instead"
    assert condition(obj, "Successful")["status"] == "False"  # type: ignore[index]
    warnings = wait_for(
        lambda: [e for e in env.events("bad-image") if e.type == "Warning"],
        timeout=30,
        what="a Warning Event on bad-image",
    )
    assert 'spec.image "Bad Image!" is not a valid image reference' in warnings[0].message
    assert env.deployment("bad-image-deployment") is None, "nothing is made from a bad spec"

    env.wait_condition(FLASK, "neighbour")
    wait_for(
        lambda: env.nodes_match_pods("neighbour", 2),
        timeout=deadline(env),
        what="the neighbour EchoFlask to converge",
    )
    env.patch_spec(FLASK, "bad-image", {"image": DEFAULT_IMAGE})
    env.wait_condition(FLASK, "bad-image")
    wait_for(
        lambda: env.nodes_match_pods("bad-image", 1),
        timeout=deadline(env),
        what="the fixed EchoFlask to converge",
    )


# -- deletion --------------------------------------------------------------------------------


def test_deleting_the_crs_deletes_what_they_made(env: Env) -> None:
    """Needs operator-runner's owner references: the garbage collector deletes what the CRs own."""
    env.create(ECHO, "gc-echo", {"command": "sleep 60"})
    env.create(FLASK, "gc-flask", {"size": 2})
    env.wait_condition(ECHO, "gc-echo")
    env.wait_condition(FLASK, "gc-flask")
    assert env.pod("gc-echo") is not None
    assert env.deployment("gc-flask-deployment") is not None
    assert env.service("gc-flask-svc") is not None

    env.delete(ECHO, "gc-echo")
    env.delete(FLASK, "gc-flask")
    wait_for(
        lambda: env.get(ECHO, "gc-echo") is None and env.get(FLASK, "gc-flask") is None,
        timeout=30,
        what="the CRs to be deleted",
    )
    wait_for(
        lambda: (
            env.pod("gc-echo") is None
            and env.deployment("gc-flask-deployment") is None
            and env.service("gc-flask-svc") is None
            and not env.live_pods(FLASK_LABELS.format("gc-flask"))
        ),
        timeout=60,
        what="the Pod, Deployment, Service and app Pods to be garbage-collected",
    )
