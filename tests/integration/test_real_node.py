"""Operators where Pods really run: one cluster with a real node (make cluster NODE=real).

One module-scoped cluster for every test here (kit/realnode.py: hack/cluster.sh up with
NODE=real, kwok Nodes tainted NoSchedule plus one real node, kubelet + containerd + kube-proxy),
always torn down afterwards.

- The seeds: their operators, deployed from their image with `make deploy NODE=real` (the
  seeds' image FROM the base image, deploy/'s read-only root filesystem), converge their sample
  CRs verbatim; the Echo's busybox really prints `hello world!` and ends,
  the EchoFlask app really answers on its NodePort at 127.0.0.1; their admission webhooks,
  deployed (deploy/webhook), refuse an EchoFlask whose Deployment name is taken.
- An operator-sdk project, deployed as operator-sdk's users deploy theirs: tests/integration/
  sdk-operator (operator-sdk's scaffolded Dockerfile with only FROM changed, built FROM the base
  image; `config/` in operator-sdk's kustomize layout, `config/default` with the metrics patch:
  --metrics-secure --metrics-require-rbac; --leader-elect), its image loaded into the real node
  and `kubectl kustomize config/default` applied. Its CRs reach Successful (one with a collection
  that ansible-galaxy installed from requirements.yml, one whose role runs
  kubernetes.core.k8s_exec in a busybox Pod it made, as operator-sdk's e2e operators do);
  /metrics answers over TLS only to a token bound to the metrics-reader ClusterRole, also to curl
  inside the operator's Pod; the last run's output is at operator-sdk's debugging path. Its
  Dockerfile's `dnf update --security --bugfix` and `dnf install -y openssl` ran as root, its
  inventory names /usr/bin/python3: the modules run with it, and openssl makes a key.
- A second one, tests/integration/ubi-operator, whose Dockerfile was written for operator-sdk's
  UBI image (yum remove/update/install git, microdnf install jq, `python3 -m pip install
  jmespath`, collections from git, a profiler ansible.cfg, its own ENTRYPOINT with
  --reconcile-period=0s): deployed the same way, config/manager picking watches-k8s.yaml,
  pointing ANSIBLE_CONFIG at the profiler's configuration and ANSIBLE_INVENTORY at an inventory
  naming /usr/local/bin/python3. Its Fleet runs busybox Pods on the real node and reports them
  with jq and a JMESPath query; the run's output has the profiler's report.
- The last test takes the cluster down with `make cluster-down NODE=real` and checks that the
  host is as it was before the cluster came up (sysctls, iptables, links, mounts, cgroups, paths).

Skipped, with the reason, where the machine cannot host a real node (hack/real-node.sh check:
not root, no usable cgroups, ...), where another real-node cluster is up, or where the node's
binaries and images are not built: they are built before pytest starts, never inside a test
(`make binaries NODE=real node-images`, `python -m tests.integration.kit.images`). With
OPERATOR_RUNNER_REQUIRE_REAL_NODE=1 (for a CI that prepares them) each of these is a failure
instead.
"""

from __future__ import annotations

import base64
import json
import os
import re
import ssl
import subprocess
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client

from .conftest import REPO
from .kit import CrKind, condition, wait_for
from .kit.images import (
    ENTRYPOINT,
    SDK_OPERATOR,
    UBI_OPERATOR,
    sdk_operator_image,
    ubi_operator_image,
)
from .kit.realnode import (
    NODE_NAME,
    RealCluster,
    deploy,
    diff_states,
    host_state,
    load_image,
    ready_pod,
    why_not,
)
from .test_operators import ECHO, FLASK, FLASK_LABELS, Env

SEEDS_NAMESPACE = "operator-runner-system"  # deploy/'s
SEEDS_SELECTOR = "control-plane=controller-manager,app.kubernetes.io/name=operator-runner"

pytestmark = [
    pytest.mark.integration,
    pytest.mark.timeout(900),
    pytest.mark.skipif(why_not() is not None, reason=why_not() or ""),
]


@pytest.fixture(scope="module")
def env(real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    """The seeds' operators deployed from their image as the README says (`make deploy
    NODE=real`: the seeds' image of `make image`, FROM the base image, loaded into the real node;
    the CRDs and deploy/ applied; it returns once the webhooks answer through their Service, so
    the samples' first apply is not refused), and a namespace for their samples."""
    environ = {**os.environ, "KUBECONFIG": str(real_cluster.kubeconfig)}
    deployed = subprocess.run(
        [
            "make",
            "--no-print-directory",
            "deploy",
            "NODE=real",
            f"CLUSTER_NAME={real_cluster.name}",
        ],
        cwd=REPO,
        env=environ,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert deployed.returncode == 0, deployed.stdout[-2000:] + deployed.stderr[-3000:]
    ready_pod(real_cluster, SEEDS_NAMESPACE, SEEDS_SELECTOR)
    namespace = f"real-{uuid.uuid4().hex[:8]}"
    real_cluster.kubectl("create", "namespace", namespace)
    with real_cluster.api_client() as api:
        yield Env(real_cluster, api, namespace, tmp_path_factory.mktemp("real-node"))


# -- the seeds ---------------------------------------------------------------------------------


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


def test_seeds_operator_answers_probes_and_metrics_inside_its_pod(
    env: Env, real_cluster: RealCluster
) -> None:
    """`make deploy NODE=real`'s operator, asked from inside its Pod as its probes and Prometheus
    ask: /healthz and /readyz on the health port; /metrics over TLS only with a token bound to
    deploy/'s metrics-reader ClusterRole (401 without one), counting the seeds' reconciles (the
    tests above) and naming the image's ansible-core line."""
    pod = ready_pod(real_cluster, SEEDS_NAMESPACE, SEEDS_SELECTOR)["metadata"]["name"]

    def in_pod(*command: str) -> str:
        return real_cluster.kubectl(
            "exec", "-n", SEEDS_NAMESPACE, pod, "-c", "manager", "--", *command
        )

    code = ("curl", "-sS", "-o", "/dev/null", "-w", "%{http_code}")
    for probe in ("/healthz", "/readyz"):
        assert in_pod(*code, f"http://localhost:6789{probe}") == "200", probe
    real_cluster.kubectl("create", "serviceaccount", "metrics-reader", "-n", env.ns)
    real_cluster.kubectl(
        "create",
        "clusterrolebinding",
        f"{env.ns}-metrics-reader",
        "--clusterrole=operator-runner-metrics-reader",
        f"--serviceaccount={env.ns}:metrics-reader",
    )
    token = real_cluster.kubectl("create", "token", "metrics-reader", "-n", env.ns).strip()
    url = "https://localhost:8443/metrics"
    body = in_pod("curl", "-sS", "-k", "-H", f"Authorization: Bearer {token}", url)
    for gvk in ("app.my.domain/v1, Kind=Echo", "swallowlab.com/v1alpha1, Kind=EchoFlask"):
        assert f'ansible_operator_reconcile_result{{GVK="{gvk}",result="succeeded"}}' in body, gvk
    line = (
        os.environ.get("ANSIBLE_CORE")
        or subprocess.run(
            [str(REPO / "hack" / "lines.sh"), "default"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    assert re.search(rf'operator_runner_build_info{{[^}}]*ansible_core="{re.escape(line)}\.', body)
    assert in_pod(*code, "-k", url) == "401"


def test_the_deployed_webhooks_refuse_a_taken_name(env: Env) -> None:
    """deploy/webhook: the API server calls the operator's Pod through the webhook Service, with
    the caBundle the operator wrote into the configurations (its CA kept in a Secret, under
    deploy/'s least-privilege RBAC): an EchoFlask whose Deployment name is someone else's is
    refused at `kubectl apply`, with the role's message."""
    admission = client.AdmissionregistrationV1Api(env.api)
    config = admission.read_validating_webhook_configuration("operator-runner-webhooks")
    assert all(w.client_config.ca_bundle for w in config.webhooks)
    secret = env.core.read_namespaced_secret("operator-runner-webhooks-cert", SEEDS_NAMESPACE)
    assert set(secret.data) >= {"ca.crt", "tls.crt", "tls.key", "ca-bundle.crt"}
    env.cluster.kubectl(
        "create", "deployment", "refused-echoflask-deployment", "-n", env.ns, "--image=busybox"
    )
    flask = {
        "apiVersion": "swallowlab.com/v1alpha1",
        "kind": "EchoFlask",
        "metadata": {"name": "refused-echoflask", "namespace": env.ns},
        "spec": {"size": 1},
    }
    refused = subprocess.run(
        [str(env.cluster.bin_dir / "kubectl"), "--kubeconfig", str(env.cluster.kubeconfig),
         "apply", "-f", "-"],
        input=json.dumps(flask), capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert refused.returncode != 0
    assert (
        'admission webhook "validate.echoflask.swallowlab.com" denied the request: Deployment '
        f"refused-echoflask-deployment already exists in namespace {env.ns} and is not owned "
        "by this EchoFlask"
    ) in refused.stderr, refused.stderr
    assert env.get(FLASK, "refused-echoflask") is None
    env.cluster.kubectl("delete", "deployment", "refused-echoflask-deployment", "-n", env.ns)


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


def test_molecule_kind_scenario_on_this_cluster(real_cluster: RealCluster) -> None:
    """`make molecule NODE=real` (the scenario `kind`: the operator deployed from its image with
    `make install deploy NODE=real`, the seeds' samples, the shared checks plus `kubectl logs`
    and the NodePort answer; idempotence; cleanup) on this module's cluster: MOLECULE_CLUSTER
    names it, and a cluster that was up before the scenario is left up by its destroy."""
    proc = subprocess.run(
        ["make", "--no-print-directory", "molecule", "NODE=real"],
        cwd=REPO,
        env={**os.environ, "MOLECULE_CLUSTER": real_cluster.name},
        capture_output=True,
        text=True,
        timeout=840,
    )
    output = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)  # molecule's colours
    assert proc.returncode == 0, output[-12000:]
    assert "was up before the scenario: left up" in output, output[-3000:]
    nodes = json.loads(real_cluster.kubectl("get", "nodes", "-o", "json"))["items"]
    assert NODE_NAME in {n["metadata"]["name"] for n in nodes}


# -- an operator-sdk project, from its image FROM the base image, deployed with kustomize -------

SDK_NAMESPACE = "sdk-operator-system"  # config/default's namespace
SDK_SELECTOR = "control-plane=controller-manager,app.kubernetes.io/name=sdk-operator"
SDK_METRICS_SERVICE = "sdk-operator-controller-manager-metrics-service"
GREETING = CrKind("demo.sdk.example.com", "v1alpha1", "greetings", "Greeting")
POD_EXEC = CrKind("demo.sdk.example.com", "v1alpha1", "podexecs", "PodExec")


@dataclass
class SdkOperator:
    """An operator-sdk project (tests/integration/sdk-operator, ubi-operator) deployed
    (`kubectl kustomize config/default`, image set), its Pod on the real node, and a namespace
    for its CRs (sdk-operator's with two ServiceAccounts: one bound to the metrics-reader
    ClusterRole, one not)."""

    cluster: RealCluster
    env: Env
    image: str
    pod: str
    project: Path = SDK_OPERATOR
    namespace: str = SDK_NAMESPACE  # the operator's, config/default's

    def exec(self, *command: str, check: bool = True) -> str:
        return self.cluster.kubectl(
            "exec", "-n", self.namespace, self.pod, "-c", "manager", "--", *command, check=check
        )

    def token(self, account: str) -> str:
        return self.cluster.kubectl("create", "token", account, "-n", self.env.ns).strip()

    def apply_sample(self, filename: str) -> None:
        sample = self.project / "config" / "samples" / filename
        self.cluster.kubectl("apply", "-n", self.env.ns, "-f", str(sample))

    def successful(self, kind: CrKind, name: str, timeout: float = 180) -> dict[str, Any]:
        """The CR once `Successful` is True; on timeout, the operator's log in the failure."""

        def probe() -> dict[str, Any] | None:
            obj = self.env.get(kind, name)
            done = condition(obj or {}, "Successful")
            return obj if obj and done and done["status"] == "True" else None

        try:
            return wait_for(probe, timeout=timeout, what=f"{kind.kind} {name} Successful")
        except AssertionError as err:
            logs = self.cluster.kubectl(
                "logs", "-n", self.namespace, self.pod, "-c", "manager", "--tail=60", check=False
            )
            raise AssertionError(f"{err}\nthe operator's log:\n{logs}") from None


@pytest.fixture(scope="module")
def sdk(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SdkOperator]:
    image = sdk_operator_image()  # built before pytest (make test); here: its cached name
    load_image(image)
    deploy(real_cluster, SDK_OPERATOR / "config" / "default", image)
    pod = ready_pod(real_cluster, SDK_NAMESPACE, SDK_SELECTOR)
    namespace = f"sdk-{uuid.uuid4().hex[:8]}"
    real_cluster.kubectl("create", "namespace", namespace)
    for account in ("metrics-reader", "no-metrics"):
        real_cluster.kubectl("create", "serviceaccount", account, "-n", namespace)
    real_cluster.kubectl(
        "create",
        "clusterrolebinding",
        f"{namespace}-metrics-reader",
        "--clusterrole=sdk-operator-metrics-reader",
        f"--serviceaccount={namespace}:metrics-reader",
    )
    with real_cluster.api_client() as api:
        env = Env(real_cluster, api, namespace, tmp_path_factory.mktemp("sdk-operator"))
        yield SdkOperator(real_cluster, env, image, pod["metadata"]["name"])


def https_get(url: str, token: str | None) -> tuple[int, str]:
    """GET over TLS (the operator's certificate is self-signed: not verified), optionally with a
    bearer token; (status, body), or (0, why) when no answer came."""
    request = urllib.request.Request(url)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    try:
        with urllib.request.urlopen(
            request, timeout=10, context=ssl._create_unverified_context()
        ) as reply:
            return reply.status, reply.read().decode()
    except urllib.error.HTTPError as err:
        return err.code, err.read().decode(errors="replace")
    except OSError as err:
        return 0, str(err)


def test_sdk_operator_runs_from_its_image_with_operator_sdks_entrypoint(sdk: SdkOperator) -> None:
    pod = json.loads(sdk.cluster.kubectl("get", "pod", "-n", SDK_NAMESPACE, sdk.pod, "-o", "json"))
    assert pod["spec"]["nodeName"] == NODE_NAME
    assert pod["spec"]["containers"][0]["image"] == sdk.image
    # PID 1 is /tini, running the base image's ENTRYPOINT with config/default's args.
    argv = sdk.exec("cat", "/proc/1/cmdline").split("\0")[:-1]
    assert argv[:5] == ENTRYPOINT, argv
    assert {"--metrics-secure", "--metrics-require-rbac", "--leader-elect"} <= set(argv[5:])
    assert sdk.exec("id", "-u").strip() == "1001"
    assert sdk.exec("sh", "-c", "echo $HOME; pwd").split() == ["/opt/ansible", "/opt/ansible"]


def test_sdk_operator_greeting_is_successful(sdk: SdkOperator) -> None:
    """The Greeting role calls sdktest.tools, which ansible-galaxy installed from
    requirements.yml in the project's image."""
    sdk.apply_sample("demo_v1alpha1_greeting.yaml")
    greeting = sdk.successful(GREETING, "greeting-sample")
    assert greeting["status"]["message"] == "Hello, operator-sdk!"
    # its inventory's Python ran the modules; openssl (dnf install -y openssl) made the key
    assert greeting["status"]["moduleInterpreter"] == "/usr/bin/python3"
    key = sdk.env.core.read_namespaced_secret("greeting-sample-key", sdk.env.ns)
    assert len(base64.b64decode(base64.b64decode(key.data["key"]))) == 32


def test_the_last_run_is_at_operator_sdks_debugging_path(sdk: SdkOperator) -> None:
    sdk.successful(GREETING, "greeting-sample")
    path = (
        "/tmp/ansible-operator/runner/demo.sdk.example.com/v1alpha1/Greeting/"
        f"{sdk.env.ns}/greeting-sample/artifacts/latest/stdout"
    )
    stdout = sdk.exec("cat", path)
    assert "Greet with sdktest.tools" in stdout and "PLAY RECAP" in stdout, stdout[-2000:]


def test_metrics_over_tls_only_for_a_token_bound_to_metrics_reader(sdk: SdkOperator) -> None:
    service = sdk.env.core.read_namespaced_service(SDK_METRICS_SERVICE, SDK_NAMESPACE)
    url = f"https://{service.spec.cluster_ip}:8443/metrics"
    reader = sdk.token("metrics-reader")
    replies: list[tuple[int, str]] = []

    def answered() -> tuple[int, str] | None:
        replies.append(https_get(url, reader))
        return replies[-1] if replies[-1][0] == 200 else None

    try:
        _, body = wait_for(answered, timeout=60, what=f"200 from {url}")
    except AssertionError as err:
        raise AssertionError(f"{err}; the last answer: {replies[-1]}") from None
    assert "# TYPE" in body
    assert https_get(url, None)[0] == 401
    assert https_get(url, sdk.token("no-metrics"))[0] == 403


def test_pod_exec_records_the_output_of_k8s_exec_in_a_busybox_pod(sdk: SdkOperator) -> None:
    """As operator-sdk's e2e test operators do: the role starts a busybox Pod, runs a command in
    it with kubernetes.core.k8s_exec, and records what it printed in the CR's status."""
    sdk.apply_sample("demo_v1alpha1_podexec.yaml")
    obj = sdk.successful(POD_EXEC, "podexec-sample", timeout=240)
    assert obj["status"]["execOutput"] == "hello world"
    busybox = sdk.env.pod("podexec-sample-busybox")
    assert busybox is not None and busybox.spec.node_name == NODE_NAME


def test_metrics_from_inside_the_operators_pod(sdk: SdkOperator) -> None:
    """As operator-sdk's e2e test does: exec into the operator's Pod and curl its /metrics."""
    token = sdk.token("metrics-reader")
    url = "https://localhost:8443/metrics"
    body = sdk.exec("curl", "-sS", "-k", "-H", f"Authorization: Bearer {token}", url)
    assert "controller_runtime_reconcile_total" in body, body[-2000:]
    code = sdk.exec("curl", "-sS", "-k", "-o", "/dev/null", "-w", "%{http_code}", url)
    assert code == "401"


# -- a project whose Dockerfile was written for operator-sdk's UBI image -----------------------

UBI_NAMESPACE = "ubi-operator-system"
UBI_SELECTOR = "control-plane=controller-manager,app.kubernetes.io/name=ubi-operator"
FLEET = CrKind("demo.ubi.example.com", "v1alpha1", "fleets", "Fleet")


@pytest.fixture(scope="module")
def ubi(
    real_cluster: RealCluster, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[SdkOperator]:
    image = ubi_operator_image()  # built before pytest (make test); here: its cached name
    load_image(image)
    deploy(real_cluster, UBI_OPERATOR / "config" / "default", image)
    pod = ready_pod(real_cluster, UBI_NAMESPACE, UBI_SELECTOR)
    namespace = f"ubi-{uuid.uuid4().hex[:8]}"
    real_cluster.kubectl("create", "namespace", namespace)
    with real_cluster.api_client() as api:
        env = Env(real_cluster, api, namespace, tmp_path_factory.mktemp("ubi-operator"))
        yield SdkOperator(
            real_cluster, env, image, pod["metadata"]["name"], UBI_OPERATOR, UBI_NAMESPACE
        )


def test_ubi_operator_runs_its_own_entrypoint_with_the_watches_file_config_picks(
    ubi: SdkOperator,
) -> None:
    argv = ubi.exec("cat", "/proc/1/cmdline").split("\0")[:-1]
    assert argv[:6] == [*ENTRYPOINT, "--reconcile-period=0s"], argv
    assert "--watches-file=./watches-k8s.yaml" in argv[6:]  # config/manager's, the last one wins
    assert ubi.exec("id", "-u").strip() == "1001"


def test_ubi_operator_fleet_runs_busybox_pods_and_reports_them(ubi: SdkOperator) -> None:
    """The role's Deployment runs on the real node; the status counts the running Pods with jq
    (microdnf install jq), lists them with a JMESPath query (python3 -m pip install jmespath),
    says which watches file's vars it ran with and which Python ran the modules (the inventory's
    /usr/local/bin/python3)."""
    ubi.apply_sample("demo_v1alpha1_fleet.yaml")
    fleet = ubi.successful(FLEET, "fleet-sample", timeout=300)
    status = fleet["status"]
    assert status["platform"] == "kubernetes"  # watches-k8s.yaml's vars
    assert status["moduleInterpreter"] == "/usr/local/bin/python3"
    pods = ubi.env.live_pods("app.kubernetes.io/instance=fleet-sample")
    assert sorted(p.metadata.name for p in pods if p.status.phase == "Running") == status["pods"]
    assert int(status["running"]) == 2 and len(status["pods"]) == 2
    assert status["nodes"] == [NODE_NAME]


def test_ubi_operator_runs_with_the_profilers_configuration(ubi: SdkOperator) -> None:
    """ANSIBLE_CONFIG names ${HOME}/ansible-profiler.cfg, the Dockerfile's copy of
    /etc/ansible/ansible.cfg with `callbacks_enabled = profile_tasks`: the run's output has
    ansible.posix's profile_tasks lines (the collection ansible-galaxy installed from git)."""
    ubi.successful(FLEET, "fleet-sample", timeout=300)
    path = (
        "/tmp/ansible-operator/runner/demo.ubi.example.com/v1alpha1/Fleet/"
        f"{ubi.env.ns}/fleet-sample/artifacts/latest/stdout"
    )
    stdout = ubi.exec("cat", path)
    # a task's line: "<date> (0:00:00.123)       0:00:01.234 ****", and the recap's rule
    assert re.search(r"\(\d+:\d\d:\d\d\.\d+\)\s+\d+:\d\d:\d\d\.\d+ \*+", stdout), stdout[-3000:]
    assert "=" * 79 in stdout, stdout[-3000:]


def test_cluster_down_restores_the_host(real_cluster: RealCluster) -> None:
    """`make cluster-down NODE=real` leaves the host as it was before the cluster came up."""
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
