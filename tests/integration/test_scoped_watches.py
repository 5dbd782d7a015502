"""A watch's selector and the watched namespaces limit what the API server sends, counted by
the kit's proxy between the operator and the API server (kit/faultproxy.py, `record`).

Kind Picky (watches-scoped.yaml, `selector: {matchLabels: {tier: picked}}`): 40 CRs without the
label and 2 with it in the watched namespace, 20 with it in a namespace the operator does not
watch. The operator's list and watch of the kind carry the selector and name the watched
namespace, and the API server sends the 2 CRs selected and nothing of the other 60, not even
when they change; a CR labelled later is sent (and reconciled), one that loses the label is
sent as DELETED and no longer reconciled.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, FaultProxy, Sent, crd, fault_proxy, install_crd, or_none, wait_for

pytestmark = pytest.mark.integration

GROUP = "scope.operator-runner.dev"
PREFIX = f"/apis/{GROUP}/v1"
PLURAL = "pickys"  # as kit.crd makes it
WATCHES = PROJECT / "watches-scoped.yaml"


class Env(kit.Env):
    proxy: FaultProxy
    unwatched = ""


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("scoped")
    with (
        cluster.api_client() as api,
        kit.temporary_namespace(cluster, "scoped") as ns,
        kit.temporary_namespace(cluster, "unwatched") as unwatched,
        fault_proxy(cluster.kubeconfig, tmp) as proxy,
    ):
        install_crd(api, crd(GROUP, "Picky"))
        environment = Env(cluster, api, ns, tmp, group=GROUP, watches=WATCHES)
        environment.proxy, environment.unwatched = proxy, unwatched
        for i in range(40):
            environment.create("Picky", f"plain-{i:02d}")
        for name in ("picked-a", "picked-b"):
            environment.create("Picky", name, labels={"tier": "picked"})
        elsewhere = Env(cluster, api, unwatched, tmp, group=GROUP)
        for i in range(20):
            elsewhere.create("Picky", f"far-{i:02d}", labels={"tier": "picked"})
        proxy.record(PREFIX)
        try:
            environment.start(env={"KUBECONFIG": str(proxy.kubeconfig)})
            yield environment
        finally:
            environment.stop()
            cluster.kubectl("delete", "crd", f"{PLURAL}.{GROUP}", "--wait=false", check=False)


def picky(env: Env) -> list[Sent]:
    """The operator's GETs of the kind's collections (not of one object, which its runs make)."""
    return [s for s in env.proxy.sent(PREFIX) if s.path.endswith(f"/{PLURAL}")]


def sent_names(env: Env) -> set[str]:
    return {name for s in picky(env) for name in s.listed} | {
        name for s in picky(env) for _, name in s.events
    }


def ran(env: Env, name: str) -> int:
    return sum(
        1
        for line in env.op.log_lines()
        if line.get("name") == name and str(line.get("msg", "")).startswith("ran reconcile")
    )


def test_only_the_selected_crs_of_the_watched_namespace_are_sent(env: Env) -> None:
    for name in ("picked-a", "picked-b"):
        env.wait_condition("Picky", name, timeout=90)
    requests = picky(env)
    assert requests, "the operator lists and watches the kind through the proxy"
    for sent in requests:
        assert sent.path == f"{PREFIX}/namespaces/{env.ns}/{PLURAL}", sent.path
        assert sent.query.get("labelSelector") == "tier=picked", sent.query
    lists = [s for s in requests if not s.watch]
    assert lists and all(s.query.get("limit") == "500" for s in lists), lists
    assert sorted(lists[0].listed) == ["picked-a", "picked-b"]
    assert sent_names(env) == {"picked-a", "picked-b"}, "nothing of the other 60 CRs"
    assert not (env.get("Picky", "plain-00") or {}).get("status"), "never reconciled"


def test_changes_to_crs_not_selected_are_not_sent(env: Env) -> None:
    for i in range(10):
        env.patch_spec("Picky", f"plain-{i:02d}", {"message": "changed"})
    env.patch_spec("Picky", "picked-a", {"message": "sentinel"})  # after them, on the same watch
    env.wait_condition("Picky", "picked-a", timeout=60)
    wait_for(
        lambda: ("MODIFIED", "picked-a") in [e for s in picky(env) for e in s.events],
        timeout=10,
        what="the sentinel's event through the proxy",
    )
    assert sent_names(env) == {"picked-a", "picked-b"}


def test_a_cr_labelled_later_is_sent_and_one_unlabelled_is_let_go(env: Env) -> None:
    env.custom.patch_namespaced_custom_object(
        GROUP, "v1", env.ns, PLURAL, "plain-39", {"metadata": {"labels": {"tier": "picked"}}}
    )
    env.wait_condition("Picky", "plain-39", timeout=60)
    env.custom.patch_namespaced_custom_object(
        GROUP, "v1", env.ns, PLURAL, "picked-b", {"metadata": {"labels": {"tier": None}}}
    )
    wait_for(
        lambda: ("DELETED", "picked-b") in [e for s in picky(env) for e in s.events],
        timeout=10,
        what="the API server's DELETED for the CR out of the selection",
    )
    runs_before = ran(env, "picked-b")
    env.patch_spec("Picky", "picked-b", {"message": "not ours now"})
    env.patch_spec("Picky", "plain-39", {"message": "sentinel"})
    env.wait_condition("Picky", "plain-39", timeout=60)
    wait_for(
        lambda: (env.config_map_data("plain-39-vars") or {}).get("message") == "sentinel",
        timeout=30,
        what="the sentinel's run",
    )
    assert ran(env, "picked-b") == runs_before, "a CR out of the selection is not reconciled"
    assert sent_names(env) == {"picked-a", "picked-b", "plain-39"}
    assert or_none(env.core.read_namespaced_config_map, "plain-00-vars", env.ns) is None
