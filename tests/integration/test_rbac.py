"""deploy/'s RBAC is enough, and only just: the operator runs as deploy/'s ServiceAccount.

deploy/rbac (Namespace, ServiceAccount, ClusterRole + binding, leader-election Role + binding)
is applied under a unique name suffix and namespace (a kustomize overlay), so the test leaves a
`make deploy` on the same cluster alone. The real operator process
(tests/integration/kit/operator.py) then runs the project's watches.yaml with a kubeconfig that
holds a token of that ServiceAccount (TokenRequest API, `kubectl create token`), with leader
election on: every request of the runner, kopf and the roles (through the runner's proxy) is
made as the ServiceAccount.

- With deploy/'s rules the seed samples converge (Successful), the dependents exist with owner
  references, the Lease is held, nothing is refused, and a CRD installed after the operator
  started is served (kopf's watch of CustomResourceDefinitions).
- With the `services` rule taken out, EchoFlask fails visibly: a `Failure` condition and a
  Warning Event that name the forbidden verb and resource; Echo, which needs no Service, still
  converges.
- The whole of deploy/ (with the Deployment) is admitted in its namespace, which enforces the
  restricted Pod Security Standard.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from .conftest import Cluster
from .kit import condition, crd, install_crd, launch, operator, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

REPO = Path(__file__).resolve().parents[2]
RBAC = REPO / "deploy" / "rbac"
SAMPLES = REPO / "config" / "samples"
ECHO = ("app.my.domain", "v1", "echoes", "echo-sample")
FLASK = ("swallowlab.com", "v1alpha1", "echoflasks", "example-echoflask")
SERVICE_ACCOUNT = "operator-runner-controller-manager"
CLUSTER_ROLE = "operator-runner-manager-role"
CONVERGE = 180


@dataclass(frozen=True)
class Identity:
    """deploy/rbac applied under `suffix` in `namespace`, and a kubeconfig that is its SA."""

    namespace: str
    suffix: str
    kubeconfig: Path
    cluster_role: dict[str, Any]


def render_rbac(cluster: Cluster, tmp: Path, namespace: str, suffix: str) -> list[dict[str, Any]]:
    """deploy/rbac through a kustomize overlay: other namespace, unique names."""
    overlay = tmp / f"overlay{suffix}"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "namespace": namespace,
                "nameSuffix": suffix,
                "resources": [os.path.relpath(RBAC, overlay)],
            }
        )
    )
    return [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(overlay))) if d]


def service_account_kubeconfig(cluster: Cluster, namespace: str, name: str, path: Path) -> None:
    """A kubeconfig with the admin one's server and CA, and a token of the ServiceAccount."""
    admin = json.loads(
        cluster.kubectl("config", "view", "--raw", "--flatten", "--minify", "-o", "json")
    )
    token = cluster.kubectl("create", "token", name, "-n", namespace, "--duration=2h").strip()
    server = admin["clusters"][0]["cluster"]
    cluster_entry = {
        k: v for k, v in server.items() if k in ("server", "certificate-authority-data")
    }
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": cluster_entry}],
                "users": [
                    {"name": f"system:serviceaccount:{namespace}:{name}", "user": {"token": token}}
                ],
                "contexts": [
                    {
                        "name": "sa",
                        "context": {
                            "cluster": "c",
                            "user": f"system:serviceaccount:{namespace}:{name}",
                            "namespace": namespace,
                        },
                    }
                ],
                "current-context": "sa",
            }
        )
    )
    path.chmod(0o600)


@pytest.fixture
def apply_identity(cluster: Cluster, tmp_path: Path) -> Iterator[Any]:
    """Apply deploy/rbac (optionally edited) under a fresh name; delete it all afterwards."""
    created: list[list[dict[str, Any]]] = []

    def apply(edit: Any = None, kind: str = "ClusterRole") -> Identity:
        """`edit` changes the rendered manager ClusterRole (or the `kind` named: Role); the
        metrics ClusterRoles are left alone."""
        suffix = f"-t{uuid.uuid4().hex[:6]}"
        namespace = f"ort-rbac{suffix}"
        docs = render_rbac(cluster, tmp_path, namespace, suffix)
        if edit is not None:
            for doc in docs:
                if doc["kind"] == kind and "-metrics-" not in doc["metadata"]["name"]:
                    edit(doc)
        created.append(docs)
        cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
        kubeconfig = tmp_path / f"kubeconfig{suffix}"
        service_account_kubeconfig(cluster, namespace, SERVICE_ACCOUNT + suffix, kubeconfig)
        role = next(
            d
            for d in docs
            if d["kind"] == "ClusterRole" and "-metrics-" not in d["metadata"]["name"]
        )
        return Identity(namespace, suffix, kubeconfig, role)

    yield apply
    for docs in created:
        cluster.kubectl(
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
            input=yaml.safe_dump_all(docs),
        )


@pytest.fixture
def apps_namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace for the sample CRs (not the operator's: the ClusterRole must do)."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    for name in ("echoes.app.my.domain", "echoflasks.swallowlab.com"):
        cluster.kubectl("wait", "--for=condition=Established", "--timeout=60s", f"crd/{name}")
    with temporary_namespace(cluster, "ort-rbac-apps") as name:
        yield name


def get_cr(api: client.ApiClient, what: tuple[str, str, str, str], ns: str) -> dict[str, Any]:
    group, version, plural, name = what
    obj: dict[str, Any] = client.CustomObjectsApi(api).get_namespaced_custom_object(
        group, version, ns, plural, name
    )
    return obj


def converged(
    api: client.ApiClient, what: tuple[str, str, str, str], ns: str
) -> dict[str, Any] | None:
    obj = get_cr(api, what, ns)
    ok = condition(obj, "Successful")
    gen = obj["metadata"]["generation"]
    if ok and ok["status"] == "True" and ok.get("observedGeneration") == gen:
        return obj
    return None


def owned_by(obj: Any, owner: dict[str, Any]) -> bool:
    refs = obj.metadata.owner_references or []
    return any(r.uid == owner["metadata"]["uid"] and r.controller for r in refs)


def operator_env(identity: Identity) -> dict[str, str]:
    return {"KUBECONFIG": str(identity.kubeconfig)}


def operator_args(identity: Identity) -> tuple[str, ...]:
    return (
        # watches.yaml's webhooks would be registered as make run's URLs, which deploy/ does not
        # allow (it keeps deploy/webhook's by name): test_deploy_webhook_rbac_is_enough
        "--webhook-bind-address=0",
        "--leader-elect",
        f"--leader-election-namespace={identity.namespace}",
        f"--leader-election-id=operator-runner{identity.suffix}",
    )


def project_with_a_late_kind(tmp: Path, group: str) -> Path:
    """The project's watches.yaml, roles and playbooks, plus a kind `Late` of `group` whose CRD
    is installed only after the operator started (its role just succeeds)."""
    project = tmp / "project"
    (project / "roles" / "late" / "tasks").mkdir(parents=True)
    (project / "roles" / "late" / "tasks" / "main.yml").write_text(
        "- ansible.builtin.debug:\n    msg: reconciled\n"
    )
    for role in (REPO / "roles").iterdir():
        (project / "roles" / role.name).symlink_to(role)
    (project / "playbooks").symlink_to(REPO / "playbooks")
    watches = yaml.safe_load((REPO / "watches.yaml").read_text())
    watches.append({"version": "v1", "group": group, "kind": "Late", "role": "late"})
    (project / "watches.yaml").write_text(yaml.safe_dump(watches))
    return project / "watches.yaml"


def test_deploy_rbac_is_enough_for_the_samples(
    cluster: Cluster, apply_identity: Any, apps_namespace: str, tmp_path: Path
) -> None:
    """deploy/'s rules (plus, for the `Late` kind of this test only, rules for its group)."""
    late_group = f"late-{uuid.uuid4().hex[:6]}.operator-runner.dev"

    def allow_late(role: dict[str, Any]) -> None:
        role["rules"] += [
            {"apiGroups": [late_group], "resources": ["lates"], "verbs": ["get", "list", "watch"]},
            {"apiGroups": [late_group], "resources": ["lates/status"], "verbs": ["get", "patch"]},
        ]

    identity = apply_identity(allow_late)
    who = f"system:serviceaccount:{identity.namespace}:{SERVICE_ACCOUNT}{identity.suffix}"
    as_sa = ("--kubeconfig", str(identity.kubeconfig))
    # The token really is that ServiceAccount, with only these rights.
    whoami = cluster.kubectl("auth", "whoami", "-o", "jsonpath={.status.userInfo.username}", *as_sa)
    assert whoami == who
    denied = cluster.kubectl("auth", "can-i", "list", "secrets", "-A", *as_sa, check=False)
    assert denied.strip() == "no"

    api = cluster.api_client()
    late = (late_group, "v1", "lates", "late-sample")
    try:
        with operator(
            cluster,
            tmp_path,
            watches=project_with_a_late_kind(tmp_path, late_group),
            namespaces=[apps_namespace],
            args=operator_args(identity),
            env=operator_env(identity),
        ) as op:
            cluster.kubectl("apply", "-n", apps_namespace, "-k", str(SAMPLES))
            echo = wait_for(
                lambda: converged(api, ECHO, apps_namespace),
                timeout=CONVERGE,
                what="Echo Successful",
            )
            flask = wait_for(
                lambda: converged(api, FLASK, apps_namespace),
                timeout=CONVERGE,
                what="EchoFlask Successful",
            )
            core, apps = client.CoreV1Api(api), client.AppsV1Api(api)
            assert owned_by(core.read_namespaced_pod("echo-sample", apps_namespace), echo)
            deployment = apps.read_namespaced_deployment(
                "example-echoflask-deployment", apps_namespace
            )
            assert owned_by(deployment, flask)
            service = core.read_namespaced_service("example-echoflask-svc", apps_namespace)
            assert owned_by(service, flask)
            assert service.spec.type == "NodePort"
            lease = client.CoordinationV1Api(api).read_namespaced_lease(
                f"operator-runner{identity.suffix}", identity.namespace
            )
            assert lease.spec.holder_identity

            # A CRD installed after the operator started is served: kopf notices it through its
            # watch of CustomResourceDefinitions (the `customresourcedefinitions` rule).
            install_crd(api, crd(late_group, "Late"))
            client.CustomObjectsApi(api).create_namespaced_custom_object(
                late_group,
                "v1",
                apps_namespace,
                "lates",
                {"apiVersion": f"{late_group}/v1", "kind": "Late", "metadata": {"name": late[3]}},
            )
            wait_for(
                lambda: converged(api, late, apps_namespace),
                timeout=CONVERGE,
                what="a CR whose CRD was installed after the operator started Successful",
            )
            log = op.log_text()
    finally:
        client.ApiextensionsV1Api(api).delete_custom_resource_definition(f"lates.{late_group}")
    # Nothing the operators do was refused. The one exception is kopf's scan of Namespace
    # objects, which it makes only when WATCH_NAMESPACE names namespaces (deploy/ leaves it
    # empty: all namespaces): refused, it retries for ~1 min, then takes the names as given.
    refused = [
        line
        for line in log.splitlines()
        if ("forbidden" in line.lower() or " 403" in line or "Not enough permissions" in line)
        and not kopf_namespace_scan(line)
    ]
    assert not refused, "\n".join(refused)
    assert "Falling back to a list of namespaces which are assumed to exist" in log


def sharded_replica(identity: Identity, apps_namespace: str) -> dict[str, Any]:
    """The launch arguments of replica-0 of a --sharding operator, as deploy/'s ServiceAccount."""
    return {
        "watches": REPO / "watches.yaml",
        "namespaces": [apps_namespace],
        "args": (
            "--webhook-bind-address=0",  # as operator_args
            "--sharding",
            f"--leader-election-namespace={identity.namespace}",
            f"--leader-election-id=operator-runner{identity.suffix}",
        ),
        "env": {**operator_env(identity), "POD_NAME": "replica-0"},
    }


def test_deploy_rbac_is_enough_for_sharding(
    cluster: Cluster, apply_identity: Any, apps_namespace: str, tmp_path: Path
) -> None:
    """--sharding under deploy/'s rules: the replica's Lease (create, update, list, delete) and
    the CRs' shard label (patch)."""
    identity = apply_identity(lambda role: None)
    api = cluster.api_client()
    leases = client.CoordinationV1Api(api)
    selector = "operator-runner.dev/shard-group"
    with operator(cluster, tmp_path, **sharded_replica(identity, apps_namespace)) as op:
        cluster.kubectl("apply", "-n", apps_namespace, "-f", str(SAMPLES / "app_v1_echo.yaml"))
        try:
            echo = wait_for(
                lambda: converged(api, ECHO, apps_namespace),
                timeout=CONVERGE,
                what="Echo Successful",
            )
        except AssertionError as err:
            raise AssertionError(f"{err}\noperator log:\n{op.log_text()[-4000:]}") from None
        assert echo["metadata"]["labels"]["operator-runner.dev/shard"] == "replica-0"
        held = leases.list_namespaced_lease(identity.namespace, label_selector=selector).items
        assert [lease.spec.holder_identity for lease in held] == ["replica-0"]
        log = op.log_text()
    assert not leases.list_namespaced_lease(identity.namespace, label_selector=selector).items
    refused = [
        line
        for line in log.splitlines()
        if ("forbidden" in line.lower() or " 403" in line) and not kopf_namespace_scan(line)
    ]
    assert not refused, "\n".join(refused)


def test_sharding_without_the_lease_rules_stops_with_one_message(
    cluster: Cluster, apply_identity: Any, apps_namespace: str, tmp_path: Path
) -> None:
    """A Role that may not list Leases: --sharding cannot know the other replicas, so the
    operator stops at start-up with one message that names the rule, and no traceback."""

    def no_list(role: dict[str, Any]) -> None:
        for rule in role["rules"]:
            if "leases" in rule.get("resources", []):
                rule["verbs"] = [v for v in rule["verbs"] if v != "list"]

    identity = apply_identity(no_list, kind="Role")
    running = launch(cluster, tmp_path, **sharded_replica(identity, apps_namespace))
    code = running.exit_code(timeout=60)
    log = running.log_text()
    assert code != 0, log
    assert "Traceback" not in log, log
    assert "--sharding: could not write this replica's Lease or list the group's Leases" in log
    assert "leases.coordination.k8s.io" in log and "leader_election_role.yaml" in log, log


def kopf_namespace_scan(line: str) -> bool:
    return any(
        marker in line
        for marker in (
            "namespaces is forbidden",
            "permissions to list namespaces",
            "permissions to watch for namespaces",
        )
    )


def drop_services(role: dict[str, Any]) -> None:
    before = len(role["rules"])
    role["rules"] = [r for r in role["rules"] if "services" not in r["resources"]]
    assert len(role["rules"]) == before - 1


def test_without_the_services_rule_echoflask_fails_visibly(
    cluster: Cluster, apply_identity: Any, apps_namespace: str, tmp_path: Path
) -> None:
    identity = apply_identity(drop_services)
    api = cluster.api_client()
    with operator(
        cluster,
        tmp_path,
        watches=REPO / "watches.yaml",
        namespaces=[apps_namespace],
        args=operator_args(identity),
        env=operator_env(identity),
    ):
        cluster.kubectl("apply", "-n", apps_namespace, "-k", str(SAMPLES))

        def failed() -> dict[str, Any] | None:
            failure = condition(get_cr(api, FLASK, apps_namespace), "Failure")
            return failure if failure and failure["status"] == "True" else None

        failure = wait_for(failed, timeout=CONVERGE, what="EchoFlask Failure")
        # kubernetes.core quotes the API server's Status as escaped JSON inside the message.
        message = failure["message"].replace("\\", "")
        assert "Expose the app on a NodePort" in message, message  # the failing task
        assert "forbidden" in message, message
        assert 'cannot get resource "services"' in message, message
        assert failure["reason"] == "Failed"
        successful = condition(get_cr(api, FLASK, apps_namespace), "Successful")
        assert successful is not None and successful["status"] == "False"

        def warning_event() -> list[Any]:
            events = client.CoreV1Api(api).list_namespaced_event(
                apps_namespace,
                field_selector=f"involvedObject.name={FLASK[3]},type=Warning",
            )
            return [
                e
                for e in events.items
                if 'cannot get resource "services"' in (e.message or "").replace("\\", "")
            ]

        events = wait_for(warning_event, timeout=60, what="a Warning Event about services")
        assert "forbidden" in events[0].message
        # The rest still works: Echo needs no Service.
        wait_for(
            lambda: converged(api, ECHO, apps_namespace), timeout=CONVERGE, what="Echo Successful"
        )


def test_deployment_is_admitted_under_the_restricted_pod_security_standard(
    cluster: Cluster, tmp_path: Path
) -> None:
    """deploy/ as `make deploy` applies it (under a unique name): its namespace enforces the
    restricted Pod Security Standard, and the operator's Pod is admitted there (kwok runs it)."""
    suffix = f"-t{uuid.uuid4().hex[:6]}"
    namespace = f"ort-deploy{suffix}"
    overlay = tmp_path / "deploy-overlay"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "namespace": namespace,
                "nameSuffix": suffix,
                "resources": [os.path.relpath(REPO / "deploy", overlay)],
            }
        )
    )
    rendered = cluster.kubectl("kustomize", str(overlay))
    assert "image: controller:latest" in rendered  # what `make deploy` replaces with IMG
    rendered = rendered.replace("image: controller:latest", "image: localhost/operator-runner:test")
    docs = [d for d in yaml.safe_load_all(rendered) if d]
    kinds = sorted(d["kind"] for d in docs)
    assert kinds == sorted(
        [
            "Namespace",
            "ServiceAccount",
            "ClusterRole",
            "ClusterRoleBinding",
            "ClusterRole",  # metrics-auth-role (--metrics-require-rbac)
            "ClusterRoleBinding",
            "ClusterRole",  # metrics-reader
            "Role",
            "RoleBinding",
            "Deployment",
            "Service",
            "Service",  # the webhooks'
            "ValidatingWebhookConfiguration",
            "MutatingWebhookConfiguration",
            "ClusterRole",  # webhook-role: the two configurations by name
            "ClusterRoleBinding",
            "Role",  # webhook-cert-role: the certificates' Secret
            "RoleBinding",
        ]
    )
    # The configurations are cluster-wide: a kwok Pod runs no operator to answer them, and
    # with failurePolicy Fail they would refuse every Echo and EchoFlask of the cluster (the
    # deployed webhooks are tested on the real node: test_real_node.py).
    docs = [d for d in docs if not d["kind"].endswith("WebhookConfiguration")]
    rendered = yaml.safe_dump_all(docs)
    cluster.kubectl("apply", "-f", "-", input=rendered)
    try:
        api = cluster.api_client()
        core = client.CoreV1Api(api)

        def running_pod() -> Any:
            pods = core.list_namespaced_pod(
                namespace, label_selector="control-plane=controller-manager"
            )
            return next((p for p in pods.items if p.status.phase == "Running"), None)

        pod = wait_for(running_pod, timeout=60, what="the operator's Pod Running")
        assert pod.spec.service_account_name == SERVICE_ACCOUNT + suffix
        (container,) = pod.spec.containers
        assert container.image == "localhost/operator-runner:test"
        assert "--health-probe-bind-address=:6789" in container.args
        for arg in ("--metrics-bind-address=:8443", "--metrics-secure", "--metrics-require-rbac"):
            assert arg in container.args, container.args
        assert container.liveness_probe.http_get.path == "/healthz"
        assert container.readiness_probe.http_get.path == "/readyz"
        sc = container.security_context
        assert (sc.run_as_user, sc.run_as_non_root, sc.read_only_root_filesystem) == (
            1001,
            True,
            True,
        )
        assert sc.allow_privilege_escalation is False and sc.capabilities.drop == ["ALL"]
        tmp = next(m for m in container.volume_mounts if m.mount_path == "/tmp")
        assert next(v for v in pod.spec.volumes if v.name == tmp.name).empty_dir is not None
        metrics = core.read_namespaced_service(
            f"operator-runner-controller-manager-metrics-service{suffix}", namespace
        )
        assert [p.port for p in metrics.spec.ports] == [8443]
        # ... and the standard is really enforced there: a Pod without these settings is refused.
        with pytest.raises(client.exceptions.ApiException) as refused:
            core.create_namespaced_pod(
                namespace,
                {
                    "apiVersion": "v1",
                    "kind": "Pod",
                    "metadata": {"name": "unrestricted"},
                    "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                },
            )
        assert refused.value.status == 403 and "violates PodSecurity" in refused.value.body
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "--wait=false", "-f", "-", input=rendered)


def test_deploy_webhook_rbac_is_enough(
    cluster: Cluster, apply_identity: Any, apps_namespace: str, tmp_path: Path
) -> None:
    """deploy/webhook's RBAC keeps the webhooks written, and only just: the operator runs as
    deploy/'s ServiceAccount deployed-style (--webhook-service), finds the configurations its
    manifests made (here empty, made by the test: no webhook of a kwok Pod may answer for the
    cluster), writes its webhooks and caBundle into them (get, patch by name) and its
    certificates into its Secret (create; get, update by name), and is ready. The names carry
    the test's suffix, as a user's overlay would give them."""
    identity = apply_identity(lambda role: None)
    name = f"operator-runner-webhooks{identity.suffix}"
    service = f"operator-runner-webhook-service{identity.suffix}"
    roles = [
        d
        for name_ in ("role.yaml", "role_binding.yaml")
        for d in yaml.safe_load_all((REPO / "deploy" / "webhook" / name_).read_text())
        if d
    ]
    for doc in roles:
        doc["metadata"]["name"] += identity.suffix
        if doc["metadata"].get("namespace"):
            doc["metadata"]["namespace"] = identity.namespace
        renamed = {
            "operator-runner-webhooks": name,
            "operator-runner-webhooks-cert": f"{name}-cert",
        }
        for rule in doc.get("rules", []):
            if "resourceNames" in rule:
                rule["resourceNames"] = [renamed[n] for n in rule["resourceNames"]]
        if "roleRef" in doc:
            doc["roleRef"]["name"] += identity.suffix
            for subject in doc["subjects"]:
                subject.update(name=SERVICE_ACCOUNT + identity.suffix, namespace=identity.namespace)
    configurations = [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": kind,
            "metadata": {"name": name},
            "webhooks": [],
        }
        for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
    ]
    documents = yaml.safe_dump_all(roles + configurations)
    cluster.kubectl("apply", "-f", "-", input=documents)
    api = cluster.api_client()
    admission = client.AdmissionregistrationV1Api(api)
    try:
        with (
            temporary_namespace(cluster, "ort-rbac-hooks") as quiet,
            operator(
                cluster,
                tmp_path,
                watches=REPO / "watches.yaml",
                namespaces=[quiet],  # the webhooks admit this empty namespace only
                args=(
                    f"--webhook-service={identity.namespace}/{service}",
                    f"--webhook-configuration-name={name}",
                    "--health-probe-bind-address=127.0.0.1:0",
                ),
                env=operator_env(identity),
            ) as op,
        ):
            wait_for(
                lambda: "served for the API server" in op.log_text(),
                timeout=60,
                what="the webhooks served",
            )

            def written() -> bool:
                hooks = admission.read_validating_webhook_configuration(name).webhooks or []
                return len(hooks) == 2 and all(h.client_config.ca_bundle for h in hooks)

            wait_for(written, timeout=30, what="the webhooks and caBundle written")
            (hook, _) = admission.read_validating_webhook_configuration(name).webhooks
            assert hook.client_config.service.name == service
            assert hook.namespace_selector.match_expressions[0].values == [quiet]
            assert hook.match_conditions[0].expression.endswith(
                f'"system:serviceaccount:{identity.namespace}:{SERVICE_ACCOUNT}{identity.suffix}"'
            )
            mutating = admission.read_mutating_webhook_configuration(name).webhooks or []
            assert [h.name for h in mutating] == ["mutate.echoflask.swallowlab.com"]
            secret = client.CoreV1Api(api).read_namespaced_secret(
                f"{name}-cert", identity.namespace
            )
            assert "tls.crt" in secret.data
            log = op.log_text()
        refused = [
            line
            for line in log.splitlines()
            if "forbidden" in line.lower() or " 403" in line or "cannot be written" in line
        ]
        refused = [line for line in refused if not kopf_namespace_scan(line)]
        assert not refused, "\n".join(refused)
    finally:
        cluster.kubectl("delete", "--ignore-not-found", "-f", "-", input=documents, check=False)


SDK_RBAC = REPO / "tests" / "integration" / "sdk-operator" / "config" / "rbac"
SDK_SERVICE_ACCOUNT = "controller-manager"
NOTICE_ROLE = """\
- name: Fail when asked to
  ansible.builtin.fail:
    msg: failing as asked
  when: fail | default(false) | bool

- name: A ConfigMap of its own
  kubernetes.core.k8s:
    definition:
      apiVersion: v1
      kind: ConfigMap
      metadata:
        name: "{{ ansible_operator_meta.name }}-notice"
        namespace: "{{ ansible_operator_meta.namespace }}"
      data:
        said: "yes"
"""


def sdk_project(tmp: Path, group: str) -> Path:
    """An operator-sdk-shaped project of two kinds of `group`: Notice (a ConfigMap; fails when
    its spec says `fail`) and Late (its CRD installed only after the operator started)."""
    project = tmp / "sdk-project"
    for role, text in (("notice", NOTICE_ROLE), ("late", "- ansible.builtin.debug:\n")):
        (project / "roles" / role / "tasks").mkdir(parents=True)
        (project / "roles" / role / "tasks" / "main.yml").write_text(text)
    watches = [
        {"version": "v1", "group": group, "kind": kind, "role": kind.lower()}
        for kind in ("Notice", "Late")
    ]
    (project / "watches.yaml").write_text(yaml.safe_dump(watches))
    return project / "watches.yaml"


def sdk_identity(cluster: Cluster, tmp: Path, group: str) -> tuple[Identity, list[Any]]:
    """operator-sdk's scaffolded RBAC (tests/integration/sdk-operator/config/rbac: no list of
    CRDs, Events in the operator's namespace only), with the rules `operator-sdk create api`
    adds for each kind, applied under a fresh name; a kubeconfig of its ServiceAccount."""
    suffix = f"-t{uuid.uuid4().hex[:6]}"
    namespace = f"ort-sdkrbac{suffix}"
    overlay = tmp / f"sdk-overlay{suffix}"
    overlay.mkdir()
    (overlay / "kustomization.yaml").write_text(
        yaml.safe_dump(
            {
                "namespace": namespace,
                "nameSuffix": suffix,
                "resources": [os.path.relpath(SDK_RBAC, overlay)],
            }
        )
    )
    docs = [d for d in yaml.safe_load_all(cluster.kubectl("kustomize", str(overlay))) if d]
    manager = next(d for d in docs if d["metadata"]["name"] == f"manager-role{suffix}")
    for plural in ("notices", "lates"):  # as `operator-sdk create api` writes them
        manager["rules"].append(
            {
                "apiGroups": [group],
                "resources": [plural, f"{plural}/status", f"{plural}/finalizers"],
                "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
            }
        )
    cluster.kubectl("create", "namespace", namespace)
    cluster.kubectl("apply", "-f", "-", input=yaml.safe_dump_all(docs))
    kubeconfig = tmp / f"kubeconfig{suffix}"
    service_account_kubeconfig(cluster, namespace, SDK_SERVICE_ACCOUNT + suffix, kubeconfig)
    return Identity(namespace, suffix, kubeconfig, manager), docs


def test_operator_sdk_rbac_without_crd_list_or_events_reconciles_quietly(
    cluster: Cluster, tmp_path: Path
) -> None:
    """Exactly the RBAC of an operator-sdk project's CSV: no list or watch of CRDs, Events in the
    operator's namespace only. The operator reconciles, says once at info level what it goes
    without, logs no error and no traceback; a CRD installed after it started is served all the
    same (found through discovery)."""
    group = f"sdk-{uuid.uuid4().hex[:6]}.operator-runner.dev"
    api = cluster.api_client()
    install_crd(api, crd(group, "Notice"))
    identity, docs = sdk_identity(cluster, tmp_path, group)
    as_sa = ("--kubeconfig", str(identity.kubeconfig))
    for verb in ("list", "watch"):
        denied = cluster.kubectl("auth", "can-i", verb, "crd", *as_sa, check=False)
        assert denied.strip() == "no", verb
    custom = client.CustomObjectsApi(api)
    try:
        with (
            temporary_namespace(cluster, "ort-sdkrbac-apps") as apps,
            operator(
                cluster,
                tmp_path,
                watches=sdk_project(tmp_path, group),  # all namespaces, as AllNamespaces
                args=operator_args(identity),
                env=operator_env(identity),
            ) as op,
        ):

            def notice(name: str) -> dict[str, Any]:
                obj: dict[str, Any] = custom.get_namespaced_custom_object(
                    group, "v1", apps, "notices", name
                )
                return obj

            def now(name: str, ctype: str) -> dict[str, Any] | None:
                found = condition(notice(name), ctype)
                return notice(name) if found and found["status"] == "True" else None

            body = {"apiVersion": f"{group}/v1", "kind": "Notice", "spec": {"fail": True}}
            custom.create_namespaced_custom_object(
                group, "v1", apps, "notices", {**body, "metadata": {"name": "n1"}}
            )
            wait_for(lambda: now("n1", "Failure"), timeout=CONVERGE, what="Notice Failure")
            custom.patch_namespaced_custom_object(
                group, "v1", apps, "notices", "n1", {"spec": {"fail": False}}
            )
            n1 = wait_for(lambda: now("n1", "Successful"), timeout=CONVERGE, what="Successful")
            cm = client.CoreV1Api(api).read_namespaced_config_map("n1-notice", apps)
            assert owned_by(cm, n1)

            install_crd(api, crd(group, "Late"))
            custom.create_namespaced_custom_object(
                group,
                "v1",
                apps,
                "lates",
                {"apiVersion": f"{group}/v1", "kind": "Late", "metadata": {"name": "l1"}},
            )
            wait_for(
                lambda: converged(api, (group, "v1", "lates", "l1"), apps),
                timeout=CONVERGE,
                what="a CR whose CRD was installed after the operator started Successful",
            )
            lines = op.log_lines()
            text = op.log_text()
    finally:
        for kind in ("notices", "lates"):
            cluster.kubectl("delete", "crd", f"{kind}.{group}", "--wait=false", check=False)
        cluster.kubectl(
            "delete",
            "--ignore-not-found",
            "--wait=false",
            "-f",
            "-",
            input=yaml.safe_dump_all(docs),
        )
        cluster.kubectl("delete", "namespace", identity.namespace, "--wait=false", check=False)
    infos = [str(line.get("msg")) for line in lines if line.get("level") == "info"]
    said_crds = [m for m in infos if m.startswith("CustomResourceDefinitions: this operator")]
    said_events = [m for m in infos if m.startswith("Events: this operator may not write")]
    assert len(said_crds) == 1 and len(said_events) == 1, infos
    assert f"namespace {apps}" in said_events[0]
    errors = [line for line in lines if line.get("level") == "error"]
    assert not errors, "\n".join(json.dumps(e) for e in errors)
    # the failed run's own warnings, and kopf's about Late's CRD not installed at start (with
    # or without the permission), no other
    warnings = [str(line["msg"]) for line in lines if line.get("level") == "warning"]
    expected = (
        "task failed: Fail when asked to",
        "reconciliation failed: Fail when asked to (role notice, tasks/main.yml:1): "
        "failing as asked",
        f"Unresolved resources cannot be served (try creating their CRDs): Selector(group='{group}'"
        ", version='v1', kind='Late')",
    )
    assert sorted(set(warnings)) == sorted(expected), warnings
    assert "Traceback" not in text
