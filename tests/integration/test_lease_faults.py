"""Leader election when the Lease's requests hang: the operator talks to the real API server
through a fault-injecting proxy of our own (kit/faultproxy.py), which holds the requests to the
Lease only; the CRs' watches, status writes and the roles' requests go on meanwhile.

- Renewals that hang, then recover, within the renew deadline: one renewal is given up (its
  attempt times out), the next one gets through; leadership is kept.
- Renewals that hang past the renew deadline: the leader stops every run and exits 1, cleanly,
  before anyone may take the Lease; once the proxy recovers, the restarted operator takes the
  Lease back when it expires and reconciles again.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from kubernetes import client

from .conftest import Cluster
from .kit import (
    PROJECT,
    Env,
    FaultProxy,
    RunningOperator,
    condition,
    crd,
    fault_proxy,
    install_crd,
    logged,
    logged_at,
    or_none,
    temporary_namespace,
    wait_for,
    wait_logged,
)

pytestmark = pytest.mark.integration

GROUP = "faults.operator-runner.dev"
KINDS = ("Basic", "Slow")
WATCHES = PROJECT / "watches-faults.yaml"
LEASE_SECONDS = 10  # the lease duration of the second test


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Env]:
    tmp = tmp_path_factory.mktemp("faults")
    with cluster.api_client() as api:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        try:
            with temporary_namespace(cluster, "faults") as namespace:
                yield Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        finally:
            for kind in KINDS:
                or_none(
                    client.ApiextensionsV1Api(api).delete_custom_resource_definition,
                    f"{kind.lower()}s.{GROUP}",
                )


@pytest.fixture
def proxy(env: Env, tmp_path: Path) -> Iterator[FaultProxy]:
    with fault_proxy(env.cluster.kubeconfig, tmp_path) as started:
        yield started


def lease_path(env: Env, name: str) -> str:
    return f"/apis/coordination.k8s.io/v1/namespaces/{env.ns}/leases/{name}"


def leader(env: Env, proxy: FaultProxy, label: str, lease: str, *timing: str) -> RunningOperator:
    """An operator with leader election on Lease `lease`, talking to the API through `proxy`."""
    return env.launch(
        label,
        "--leader-elect",
        f"--leader-election-id={lease}",
        f"--leader-election-namespace={env.ns}",
        *timing,
        max_concurrent=2,
        env={"KUBECONFIG": str(proxy.kubeconfig)},
    )


def stopped(op: RunningOperator) -> int:
    if op.proc.poll() is None:
        return op.stop()
    return op.proc.returncode


def test_renewals_that_hang_within_the_renew_deadline_keep_the_leadership(
    env: Env, proxy: FaultProxy
) -> None:
    """Default durations: lease 15 s, renew deadline 10 s, retry period 2 s; one attempt may
    take half the deadline (5 s). The renewals hang for 6 s from the first one held: that one
    is given up after 5 s, the next one (2 s later) passes."""
    lease = f"keep-{uuid.uuid4().hex[:6]}"
    path = lease_path(env, lease)
    proxy.watch(path)
    op = leader(env, proxy, "keep", lease)
    try:
        wait_logged(op, "became the leader", timeout=60)
        env.create("Basic", "before", {"message": "one"})
        env.wait_condition("Basic", "before", op=op)
        before = env.lease(lease).spec
        renewed = len([s for s in proxy.seen(path) if s.method == "PUT"])
        wait_for(
            lambda: len([s for s in proxy.seen(path) if s.method == "PUT"]) > renewed,
            timeout=10,
            what="a renewal through the proxy",
        )
        proxy.hang(path, seconds=6)  # the next renewal (~2 s from now) opens the window
        window = wait_for(proxy.window, timeout=10, what="a renewal held")
        env.create("Basic", "during", {"message": "two"})
        wait_for(
            lambda: any(s.arrived > window[1] and s.status == 200 for s in proxy.seen(path)),
            timeout=20,
            what="a renewal through the proxy after the window",
        )
        held = [s for s in proxy.seen(path) if s.held]
        assert [s.outcome for s in held] == ["dropped"], "one renewal hung and was given up"
        assert held[0].arrived == window[0]
        env.wait_condition("Basic", "during", op=op)
        after = env.lease(lease).spec
        assert op.proc.poll() is None, "no restart"
        assert after.holder_identity == before.holder_identity
        assert after.lease_transitions == before.lease_transitions
        assert after.renew_time > before.renew_time
        assert logged(op, f"renewing Lease {env.ns}/{lease} failed")
        assert not logged(op, "leader election lost"), op.log_text()[-3000:]
        env.patch_spec("Basic", "before", {"message": "three"})
        env.wait_condition("Basic", "before", op=op)  # and it goes on reconciling
    finally:
        assert stopped(op) == 0, op.log_text()[-3000:]
    assert "Traceback" not in op.log_text(), op.log_text()[-5000:]


def test_renewals_that_hang_past_the_deadline_give_the_leadership_up_and_it_is_taken_back(
    env: Env, proxy: FaultProxy
) -> None:
    """Lease 10 s, renew deadline 4 s, retry period 1 s: when no renewal gets through for 4 s,
    the leader cancels its runs and exits 1 (an orderly exit; os._exit if that took over 5 s),
    before the Lease may be taken; the next operator takes it once it expired."""
    lease = f"lost-{uuid.uuid4().hex[:6]}"
    expiry = timedelta(seconds=LEASE_SECONDS)
    path = lease_path(env, lease)
    timing = (
        f"--leader-elect-lease-duration={LEASE_SECONDS}s",
        "--leader-elect-renew-deadline=4s",
        "--leader-elect-retry-period=1s",
    )
    proxy.watch(path)
    first = leader(env, proxy, "lost-1", lease, *timing)
    second: RunningOperator | None = None
    try:
        wait_logged(first, "became the leader", timeout=60)
        env.create("Slow", "long", {"seconds": 60})
        wait_for(
            lambda: any(
                line.get("name") == "long" and line.get("msg") == "task ok: Begin"
                for line in first.log_lines()
            ),
            timeout=60,
            what="the slow run to begin",
        )
        identity = env.lease(lease).spec.holder_identity
        proxy.hang(path)  # until recover()
        assert first.exit_code(timeout=30) == 1, first.log_text()[-3000:]
        gone, exited = time.monotonic(), datetime.now(UTC)
        log = first.log_text()
        assert logged(first, f"leader election lost: could not renew Lease {env.ns}/{lease}")
        assert logged(first, "stopping every reconcile now and exiting")
        assert "Traceback" not in log, log[-5000:]
        assert not logged(first, "still not stopped"), "an orderly exit, not os._exit"
        held = env.lease(lease).spec
        assert held.holder_identity == identity, "neither released nor taken meanwhile"
        lost_at = logged_at(first, "leader election lost")
        assert lost_at is not None and lost_at < held.renew_time + expiry
        print(
            f"\nlost the Lease {(lost_at - held.renew_time).total_seconds():.1f} s after its last "
            f"renewal, exited {(exited - lost_at).total_seconds():.1f} s later"
        )
        wait_for(
            lambda: all(s.outcome == "dropped" for s in proxy.seen(path) if s.held),
            timeout=10,
            what="every held renewal dropped when the operator went",
        )
        assert [s for s in proxy.seen(path) if s.held], "the renewals were held"
        obj = env.get("Slow", "long")
        assert obj and condition(obj, "Successful") is None, "the run was stopped, not finished"

        env.patch_spec("Slow", "long", {"seconds": 1})  # while nobody leads
        proxy.recover()
        second = leader(env, proxy, "lost-2", lease, *timing)
        wait_logged(second, f"taken over from {identity}", timeout=60)
        taken = env.lease(lease).spec
        assert taken.holder_identity not in (None, identity)
        assert taken.acquire_time >= held.renew_time + expiry, "not before it expired"
        assert taken.lease_transitions == held.lease_transitions + 1
        env.wait_condition("Slow", "long", op=second)
        print(f"\nleader gone {time.monotonic() - gone:.1f} s before the CR was reconciled again")
    finally:
        if first.proc.poll() is None:
            first.proc.kill()
        if second is not None:
            assert stopped(second) == 0, second.log_text()[-3000:]
