"""Dependent resources: owner references through the proxy, dependent watches, GC."""

from __future__ import annotations

import contextlib
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client

from . import kit
from .conftest import Cluster
from .kit import PROJECT, condition, crd, install_crd, temporary_namespace, wait_for

# `lines`: what an ansible-core line can change; make test runs these on every line.
pytestmark = [pytest.mark.integration, pytest.mark.lines]

GROUP = "dep.operator-runner.dev"
WATCHES = PROJECT / "watches-dependents.yaml"
KINDS = ("Owner", "Secretive", "Neighbour")


class Env(kit.Env):
    other = ""  # a second namespace, not watched

    @property
    def heals_within(self) -> float:
        """How soon a dependent is put back: 5 s on the warm executor; a plain run costs ten
        times its CPU, so the plain path is given 30 s (what is checked there is that it is)."""
        return 5 if self.executor == "warm" else 30


@pytest.fixture(scope="module", params=["warm", "plain"])
def env(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Env]:
    """The operator, once with the warm executor and once with plain ansible-runner runs: the
    proxy, owner references and dependent watches behave alike on both paths."""
    tmp = tmp_path_factory.mktemp("dependents")
    with (
        cluster.api_client() as api,
        temporary_namespace(cluster, "dep") as ns,
        temporary_namespace(cluster, "far") as other,
    ):
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = Env(cluster, api, ns, tmp, group=GROUP, watches=WATCHES)
        environment.other = other
        try:
            environment.start(args=(f"--executor={request.param}",))
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


def _refs(meta: Any) -> list[tuple[str, str, bool]]:
    return [(r.kind, r.name, bool(r.controller)) for r in meta.owner_references or []]


def test_created_objects_are_owned_updated_ones_are_not(env: Env) -> None:
    """As operator-sdk: owner references on what a role creates, not on an object that existed
    before the CR and that the role only updates (its finalizerconcurrencytest relies on it)."""
    env.core.create_namespaced_config_map(
        env.ns, {"metadata": {"name": "own-pre"}, "data": {"before": "1"}}
    )
    env.create("Owner", "own", {"updatePre": True})
    cr = env.wait_condition("Owner", "own", generation=False, timeout=90)
    uid = cr["metadata"]["uid"]
    cm = env.config_map("own-cm")
    dep = env.apps.read_namespaced_deployment("own-dep", env.ns)
    for meta in (cm.metadata, dep.metadata):  # type: ignore[union-attr]
        assert _refs(meta) == [("Owner", "own", True)], meta.name
        assert meta.owner_references[0].uid == uid
        assert meta.owner_references[0].block_owner_deletion is True
    pre = env.config_map("own-pre")
    assert pre is not None and pre.data == {"before": "1", "touched": "yes"}
    assert _refs(pre.metadata) == [], "an object that existed before is not adopted"


def test_owner_ref_on_update_adopts_objects_that_existed_before(
    cluster: Cluster, env: Env, tmp_path: Path
) -> None:
    """`--owner-ref-on-update`: updated objects get the owner reference too."""
    with temporary_namespace(cluster, "adopt") as ns:
        adopting = Env(cluster, env.api, ns, tmp_path, group=GROUP, watches=WATCHES)
        adopting.start(args=("--owner-ref-on-update",))
        try:
            adopting.core.create_namespaced_config_map(
                ns, {"metadata": {"name": "own-pre"}, "data": {"before": "1"}}
            )
            adopting.create("Owner", "own", {"updatePre": True})
            cr = adopting.wait_condition("Owner", "own", generation=False, timeout=90)
            pre = adopting.config_map("own-pre")
            assert pre is not None and pre.data == {"before": "1", "touched": "yes"}
            assert _refs(pre.metadata) == [("Owner", "own", True)]
            assert pre.metadata.owner_references[0].uid == cr["metadata"]["uid"]
        finally:
            adopting.stop()


def test_virtual_resources_get_nothing_injected(env: Env) -> None:
    """As operator-sdk: a SelfSubjectAccessReview or LocalSubjectAccessReview (no get, list or
    watch in discovery) is an API call; with the primary-resource annotations or an owner
    injected, the API server refused it (422, metadata must be empty) and the role failed."""
    env.create("Owner", "reviews", {"reviews": True})
    env.wait_condition("Owner", "reviews", generation=False, timeout=90)
    answers = env.config_map_data("reviews-reviews")
    # the operator (the cluster's admin here) may list Pods; the default ServiceAccount may not
    # read ConfigMaps: the answers are the API server's own
    assert answers == {"self": "True", "local": "False"}, answers
    watched = [
        str(line["msg"])
        for line in env.op.log_lines()
        if str(line.get("msg", "")).startswith("watching dependent")
    ]
    assert not [m for m in watched if "accessreviews" in m], watched


def test_cluster_scoped_object_gets_annotations_only_whatever_its_body_says(
    env: Env, cluster: Cluster
) -> None:
    """A ClusterRole whose template keeps the CR's namespace is cluster-scoped all the same
    (discovery says so): the primary-resource annotations, never an ownerReference to the
    namespaced CR (an owner Kubernetes treats as invalid)."""
    name = f"{env.ns}-scoped-reader"
    try:
        env.create("Owner", "scoped", {"clusterRole": True})
        env.wait_condition("Owner", "scoped", generation=False, timeout=90)
        role = client.RbacAuthorizationV1Api(env.api).read_cluster_role(name)
        assert not role.metadata.owner_references, role.metadata.owner_references
        assert role.metadata.annotations["operator-sdk/primary-resource"] == f"{env.ns}/scoped"
        assert role.metadata.annotations["operator-sdk/primary-resource-type"] == f"Owner.{GROUP}"
    finally:
        cluster.kubectl("delete", "clusterrole", name, "--ignore-not-found", check=False)


def test_objects_created_by_apply_or_force_are_owned_as_created_ones(env: Env) -> None:
    """Server-side apply (a PATCH that the API server answers 201 Created), and `apply: true`
    or `force: true` of a missing object: each gets the owner reference as a create does. The
    role's next server-side apply keeps it (the reference is not the role's field manager's to
    take away), and so does its next client-side apply (a patch). (Its next `force: true` is a
    replace, which drops every reference its body does not carry, on operator-sdk too: not
    checked here; `--owner-ref-on-update` puts ours back into such replaces.)"""
    env.create("Owner", "patched", {"patchCreates": True, "value": "one"})
    cr = env.wait_condition("Owner", "patched", generation=False, timeout=90)
    names = ("patched-ssa", "patched-applied", "patched-forced")
    for name in names:
        cm = env.config_map(name)
        assert cm is not None, name
        assert _refs(cm.metadata) == [("Owner", "patched", True)], name
        assert cm.metadata.owner_references[0].uid == cr["metadata"]["uid"]
    env.patch_spec("Owner", "patched", {"value": "two"})

    def applied_again() -> list[Any] | None:
        found = [env.config_map(name) for name in names[:2]]
        return found if all(cm and cm.data == {"value": "two"} for cm in found) else None

    # (wait for the data itself: a run that began before the spec change may end after it)
    for cm in wait_for(applied_again, timeout=90, what="the next run's two applies"):
        assert _refs(cm.metadata) == [("Owner", "patched", True)], cm.metadata.name


def test_deleted_or_scaled_dependents_are_put_back(env: Env) -> None:
    env.create("Owner", "heal", {"replicas": 2})
    env.wait_condition("Owner", "heal", generation=False, timeout=90)
    start = time.monotonic()
    env.core.delete_namespaced_config_map("heal-cm", env.ns)
    wait_for(
        lambda: env.config_map("heal-cm"),
        timeout=env.heals_within,
        what="the ConfigMap to come back",
        interval=0.05,
    )
    deleted_latency = time.monotonic() - start

    start = time.monotonic()
    env.apps.patch_namespaced_deployment_scale("heal-dep", env.ns, {"spec": {"replicas": 7}})
    wait_for(
        lambda: env.apps.read_namespaced_deployment("heal-dep", env.ns).spec.replicas == 2,
        timeout=env.heals_within,
        what="the Deployment scaled back to 2",
        interval=0.05,
    )
    scaled_latency = time.monotonic() - start
    print(
        f"\nrevert latency: deleted ConfigMap {deleted_latency:.2f} s, "
        f"scaled Deployment {scaled_latency:.2f} s"
    )


def test_dependent_watch_of_a_listing_the_api_server_would_compress(
    env: Env, cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The API server gzips a response over 128 KB for a client that accepts gzip; the
    dependent watch's listing must still be read (it failed and retried every 30 s at 1000
    EchoFlasks, so deleted dependents were not put back)."""
    tmp = tmp_path_factory.mktemp("dependents-big")
    with temporary_namespace(cluster, "big") as ns:
        for index in range(3):  # ~180 KB of ConfigMaps before the operator lists them
            env.core.create_namespaced_config_map(
                ns, {"metadata": {"name": f"bulk-{index}"}, "data": {"blob": "x" * 60_000}}
            )
        big = Env(cluster, env.api, ns, tmp, group=GROUP, watches=WATCHES)
        operator = big.start()
        try:
            big.create("Owner", "big", {"replicas": 1})
            big.wait_condition("Owner", "big", generation=False, timeout=90)
            big.core.delete_namespaced_config_map("big-cm", ns)
            wait_for(
                lambda: big.config_map("big-cm"),
                timeout=15,
                what="the deleted ConfigMap put back by the dependent watch",
                interval=0.1,
            )
            assert "restarts:" not in operator.log_text(), operator.log_text()[-3000:]
        finally:
            big.stop()


def test_status_only_change_of_a_dependent_does_not_reconcile(env: Env) -> None:
    env.create("Owner", "quiet", {})
    env.wait_condition("Owner", "quiet", generation=False, timeout=90)
    wait_for(
        lambda: env.apps.read_namespaced_deployment("quiet-dep", env.ns).status.ready_replicas,
        timeout=60,
        what="the Deployment to be ready",
    )

    def changes() -> list[str]:
        return [
            str(line["msg"])
            for line in env.op.log_lines()
            if str(line.get("msg", "")).startswith("dependent Deployment")
            and "quiet-dep" in str(line["msg"])
        ]

    before = len(changes())
    env.apps.patch_namespaced_deployment_status(
        "quiet-dep", env.ns, {"status": {"conditions": [{"type": "Custom", "status": "True"}]}}
    )
    # A label change on the same object comes after the status change on the same watch
    # stream: once it is seen, the status change has been judged too.
    env.apps.patch_namespaced_deployment(
        "quiet-dep", env.ns, {"metadata": {"labels": {"poke": "1"}}}
    )
    wait_for(lambda: len(changes()) > before, timeout=10, what="the label change to be seen")
    assert len(changes()) == before + 1, changes()
    wait_for(
        lambda: _run_finished(env, "quiet"), timeout=6 * env.heals_within, what="the run to finish"
    )


def _run_finished(env: Env, name: str) -> bool:
    running = condition(env.get("Owner", name) or {}, "Running")
    return bool(running and running["reason"] != "Running")


@pytest.mark.parametrize("kind", ["Owner", "Neighbour"])
def test_cross_namespace_object_gets_annotations_and_triggers(env: Env, kind: str) -> None:
    """With or without watchClusterScopedResources (Owner has it, Neighbour not), as in
    operator-sdk: a change to a dependent in another namespace reconciles its CR."""
    cr = f"far-{kind.lower()}"
    env.create(kind, cr, {"otherNamespace": env.other, "value": "one"})
    env.wait_condition(kind, cr, generation=False, timeout=90)
    name = f"{env.ns}-{cr}-far"
    far = env.config_map(name, env.other)
    assert far is not None and not far.metadata.owner_references
    assert far.metadata.annotations["operator-sdk/primary-resource"] == f"{env.ns}/{cr}"
    assert far.metadata.annotations["operator-sdk/primary-resource-type"] == f"{kind}.{GROUP}"
    env.core.patch_namespaced_config_map(name, env.other, {"data": {"value": "changed"}})
    wait_for(
        lambda: env.config_map(name, env.other).data["value"] == "one",  # type: ignore[union-attr]
        timeout=2 * env.heals_within,
        what="the owner's reconcile to restore the far ConfigMap",
    )


def test_blacklisted_kind_is_not_watched(env: Env) -> None:
    env.create("Secretive", "sec", {})
    env.wait_condition("Secretive", "sec", generation=False, timeout=90)
    secret = env.core.read_namespaced_secret("sec-secret", env.ns)
    assert _refs(secret.metadata) == [("Secretive", "sec", True)]  # still owned
    watched = [
        line["msg"]
        for line in env.op.log_lines()
        if str(line.get("msg", "")).startswith("watching dependent")
    ]
    assert watched, "other kinds are watched"
    assert not [m for m in watched if "/secrets" in m], watched


def test_deleting_the_cr_garbage_collects_namespaced_dependents(env: Env) -> None:
    env.create("Owner", "gone", {})
    env.wait_condition("Owner", "gone", generation=False, timeout=90)
    env.custom.delete_namespaced_custom_object(GROUP, "v1", env.ns, "owners", "gone")
    wait_for(
        lambda: (
            env.config_map("gone-cm") is None
            and not env.apps.list_namespaced_deployment(
                env.ns, field_selector="metadata.name=gone-dep"
            ).items
        ),
        timeout=60,
        what="the garbage collector to remove the CR's ConfigMap and Deployment",
    )


def _secrets_of(kubeconfig: Path) -> list[str]:
    """Distinctive lines of the kubeconfig's key, certificate and token (inline or in files)."""
    config = yaml.safe_load(kubeconfig.read_text())
    found: list[str] = []
    for user in config.get("users") or []:
        auth = user.get("user") or {}
        for key in ("client-key", "client-certificate"):
            if auth.get(key):
                found += Path(auth[key]).read_text().splitlines()[1:3]
        for key in ("client-key-data", "client-certificate-data", "token"):
            if auth.get(key):
                found.append(str(auth[key])[:60])
    return [f for f in found if len(f) > 20]


def test_no_credentials_in_artifacts(env: Env, cluster: Cluster) -> None:
    env.create("Owner", "secret-free", {})
    env.wait_condition("Owner", "secret-free", generation=False, timeout=90)
    needles = _secrets_of(cluster.kubeconfig)
    assert needles, "the operator's kubeconfig has credentials to look for"
    # other CRs' runs go on meanwhile: a folder may go while it is read (grep -r exits 2 then)
    searched, hits = 0, []
    for path in Path(env.op.artifacts).rglob("*"):
        with contextlib.suppress(FileNotFoundError, IsADirectoryError, NotADirectoryError):
            data = path.read_bytes()
            searched += 1
            hits += [str(path)] if any(n.encode() in data for n in needles) else []
    assert not hits, f"credentials found in: {hits}"
    assert searched and list(Path(env.op.artifacts).rglob("job_events")), "nothing was searched"
