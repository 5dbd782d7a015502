"""`operator-runner preview` writes nothing, proven from the API server's audit log.

The role `writer` (tests/integration/project/roles/writer) writes in every way a role can:
create, patch, delete, k8s_status, an Event, a command in a Pod (k8s_exec), a write outside
check mode; its watch has the operator's own finalizer, and a failing run would get a Warning
Event and a Failure condition. The operator serves namespace `served` (its CR reconciled, and
the operator still running during the preview); namespace `new` holds CRs no operator has
reconciled yet (so a run would create, finalize, patch status, exec, and one fails).

The preview runs as an identity of its own, a ServiceAccount bound to cluster-admin (so that
only the preview itself keeps it from writing, not its permissions). The local cluster's audit
log (hack/audit-policy.yaml), read between a request of the test's own before the preview and
one after it, then shows that identity's requests: reads only; no write by anyone in the two
namespaces, no dry run; and the resourceVersions of everything in both namespaces are the same
after the preview as before.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from .conftest import Cluster
from .kit import PROJECT, Env, crd, install_crd, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

GROUP = "preview.operator-runner.dev"
WATCHES = PROJECT / "watches-preview.yaml"
EXE = Path(sys.executable).parent / "operator-runner"
READS = {"get", "list", "watch"}


def audit_log(cluster: Cluster) -> Path:
    """The local cluster's audit log (hack/cluster.sh turns it on for every cluster)."""
    log = cluster.kubeconfig.parent / "logs" / "audit.log"
    if not (cluster.kubeconfig.parent / "logs").is_dir():
        pytest.skip("the cluster of $OPERATOR_RUNNER_KUBECONFIG is no local kwok cluster")
    assert log.is_file(), f"{log}: the local cluster has no audit log (made before audit?)"
    return log


def audit_mark(cluster: Cluster, log: Path, namespace: str) -> int:
    """A request of the test's own, waited for in the audit log: the log's size just after it.

    Every request that was answered before this one was sent is in the log before that offset,
    so the requests of a preview that has exited are all in the log before the next mark.
    """
    name = f"audit-mark-{uuid.uuid4().hex[:12]}"
    cluster.kubectl("get", "configmap", name, "-n", namespace, "--ignore-not-found")
    uri = f"/api/v1/namespaces/{namespace}/configmaps/{name}".encode()

    def offset() -> int | None:
        data = log.read_bytes()
        at = data.find(uri)
        end = data.find(b"\n", at) if at >= 0 else -1
        return end + 1 if end >= 0 else None

    return wait_for(offset, timeout=30, what=f"the request for {name} in {log}")


def audit_events(log: Path, start: int, end: int) -> list[dict[str, Any]]:
    """The audit log's events between two marks."""
    with log.open("rb") as f:
        f.seek(start)
        data = f.read(end - start)
    events = []
    for line in data.decode("utf-8", errors="replace").splitlines():
        try:
            events.append(json.loads(line))
        except ValueError:
            continue
    return events


def touches(event: dict[str, Any], namespaces: list[str]) -> bool:
    uri = event.get("requestURI", "")
    return any(
        f"/namespaces/{ns}/" in uri or uri.endswith(f"/namespaces/{ns}") for ns in namespaces
    )


def previewer_kubeconfig(cluster: Cluster, namespace: str, tmp: Path) -> tuple[Path, str]:
    """A kubeconfig of a ServiceAccount bound to cluster-admin, and its username."""
    cluster.kubectl("create", "serviceaccount", "previewer", "-n", namespace)
    binding = f"previewer-{namespace}"
    cluster.kubectl(
        "create",
        "clusterrolebinding",
        binding,
        "--clusterrole=cluster-admin",
        f"--serviceaccount={namespace}:previewer",
    )
    token = cluster.kubectl("create", "token", "previewer", "-n", namespace).strip()
    admin = yaml.safe_load(cluster.kubeconfig.read_text(encoding="utf-8"))
    context = next(c for c in admin["contexts"] if c["name"] == admin["current-context"])
    server = next(c for c in admin["clusters"] if c["name"] == context["context"]["cluster"])
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": server["cluster"]}],
        "users": [{"name": "previewer", "user": {"token": token}}],
        "contexts": [{"name": "p", "context": {"cluster": "c", "user": "previewer"}}],
        "current-context": "p",
    }
    path = tmp / "previewer.kubeconfig"
    path.write_text(yaml.safe_dump(config), encoding="utf-8")
    return path, f"system:serviceaccount:{namespace}:previewer"


def resource_versions(core: client.CoreV1Api, env: Env, namespaces: list[str]) -> dict[str, str]:
    """Every object the preview could touch, by kind and name: its resourceVersion."""
    found: dict[str, str] = {}
    for ns in namespaces:
        for kind, items in (
            ("ConfigMap", core.list_namespaced_config_map(ns).items),
            ("Pod", core.list_namespaced_pod(ns).items),
            ("Event", core.list_namespaced_event(ns).items),
            ("Secret", core.list_namespaced_secret(ns).items),
        ):
            for obj in items:
                found[f"{kind} {ns}/{obj.metadata.name}"] = obj.metadata.resource_version
        crs = env.custom.list_namespaced_custom_object(GROUP, "v1", ns, "writers")["items"]
        for obj in crs:
            found[f"Writer {ns}/{obj['metadata']['name']}"] = obj["metadata"]["resourceVersion"]
    return found


@pytest.fixture(scope="module")
def served(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("preview")
    with cluster.api_client() as api:
        install_crd(api, crd(GROUP, "Writer"))
        with temporary_namespace(cluster, "served") as namespace:
            env = Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
            env.start()
            try:
                yield env
                for obj in env.custom.list_namespaced_custom_object(
                    GROUP, "v1", namespace, "writers"
                )["items"]:  # finalized while the operator runs
                    env.delete("Writer", obj["metadata"]["name"])
                wait_for(
                    lambda: (
                        not env.custom.list_namespaced_custom_object(
                            GROUP, "v1", namespace, "writers"
                        )["items"]
                    ),
                    timeout=60,
                    what="the served Writers finalized",
                )
            finally:
                env.stop()


def config_map(core: client.CoreV1Api, namespace: str, name: str) -> None:
    core.create_namespaced_config_map(namespace, {"metadata": {"name": name}, "data": {"a": "1"}})


def test_a_preview_writes_nothing(served: Env, cluster: Cluster) -> None:
    log = audit_log(cluster)
    core = served.core
    config_map(core, served.ns, "w1-patched")
    config_map(core, served.ns, "w1-doomed")
    served.create("Writer", "w1", {"value": "one"})
    served.wait_condition("Writer", "w1")
    with temporary_namespace(cluster, "new") as new:
        for name in ("w2", "w3"):
            config_map(core, new, f"{name}-patched")
            config_map(core, new, f"{name}-doomed")
        core.create_namespaced_pod(
            new,
            {
                "metadata": {"name": "w2-pod"},
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
            },
        )
        wait_for(
            lambda: core.read_namespaced_pod("w2-pod", new).status.phase == "Running",
            timeout=60,
            what="the Pod Running",
        )
        new_env = Env(cluster, served.api, new, served.tmp, group=GROUP, watches=WATCHES)
        new_env.create("Writer", "w2", {"value": "two", "exec": True})
        new_env.create("Writer", "w3", {"value": "three", "forced": True})
        new_env.create("Writer", "w4", {"value": "four", "fail": True})
        kubeconfig, username = previewer_kubeconfig(cluster, new, served.tmp)
        before = resource_versions(core, served, [served.ns, new])

        environ = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
        environ.update(
            KUBECONFIG=str(kubeconfig),
            WATCH_NAMESPACE=f"{served.ns},{new}",
            ANSIBLE_GATHERING="explicit",
            K8S_AUTH_KUBECONFIG=str(cluster.kubeconfig),  # the admin's: taken from the runs
        )
        start = audit_mark(cluster, log, new)
        started = time.monotonic()
        proc = subprocess.run(
            [str(EXE), "preview", f"--watches-file={WATCHES}", "-o", "json"],
            capture_output=True,
            text=True,
            env=environ,
            timeout=300,
            cwd=str(PROJECT),
        )
        took = time.monotonic() - started
        assert proc.returncode == 2, proc.stdout + proc.stderr  # w3 and w4 fail
        report = {(r["namespace"], r["name"]): r for r in json.loads(proc.stdout)}
        assert set(report) == {(served.ns, "w1"), (new, "w2"), (new, "w3"), (new, "w4")}
        assert report[served.ns, "w1"]["outcome"] == "unchanged"
        w2 = report[new, "w2"]
        assert w2["outcome"] == "changed", w2
        tasks = {c["task"] for c in w2["changes"]}
        assert {
            "Create a ConfigMap",
            "Patch a ConfigMap that exists",
            "Delete a ConfigMap",
        } <= tasks
        assert {"Write the status"} <= tasks
        assert f"exec pods/exec {new}/w2-pod: rm -rf /data" in w2["writes"]
        assert any(w.startswith(f"create configmaps {new}/w2-made") for w in w2["writes"])
        w3 = report[new, "w3"]
        assert (w3["outcome"], w3["task"]) == ("failed", "Write outside check mode"), w3
        assert "a preview writes nothing" in w3["message"]
        role = (PROJECT / "roles" / "writer" / "tasks" / "main.yml").read_text().splitlines()
        line = role.index("- name: Write outside check mode") + 1
        assert w3["task_path"] == f"roles/writer/tasks/main.yml:{line}"
        w4 = report[new, "w4"]
        assert (w4["outcome"], w4["task"]) == ("failed", "Fail when the CR asks for it"), w4
        assert "the CR asked this run to fail" in w4["message"]

        # the audit log, from before the preview to after it: every request of the preview's
        # identity was a read, and no one wrote to the CRs' namespaces (nor asked a dry run)
        events = audit_events(log, start, audit_mark(cluster, log, new))
        mine = [e for e in events if (e.get("user") or {}).get("username") == username]
        writes = [
            e
            for e in events
            if e.get("verb") not in READS and (e in mine or touches(e, [served.ns, new]))
        ]
        assert writes == [], [(e["user"]["username"], e["verb"], e["requestURI"]) for e in writes]
        verbs = {e["verb"] for e in mine}
        assert "get" in verbs and "list" in verbs and len(mine) >= 20, verbs
        assert not any("dryRun" in e["requestURI"] for e in events)
        after = resource_versions(core, served, [served.ns, new])
        assert after == before
        assert (
            core.list_namespaced_event(new, field_selector="involvedObject.kind=Writer").items == []
        )
        print(
            f"preview of 4 CRs in {took:.1f} s; audit: {len(mine)} requests by {username}, "
            f"{len(writes)} writes"
        )
