"""Scenario `fairness`: how long a new CR waits while a full resync of N CRs runs.

N EchoFlasks (size 0) with the annotation ansible.sdk.operatorframework.io/reconcile-period: P,
P chosen (`choose_period`) so that all N converge and go quiet before their first resync
comes due. Once the resync is under way (`under_way`: enough resync runs seen since the quiet
point), one new CR is created: create -> Successful (as run.py defines it) is the figure; the
goal for operator-runner on 2 CPUs is at most GOAL_S while the resync runs. Also: how long the
whole resync took (its first run started -> N runs seen and none alive for QUIET_S), its CPU,
and how many resync runs were still to come when the new CR was created (a figure taken after
the resync ended would not measure anything).

The periodic resync comes due at the pace the CRs converged (and ours spreads it by up to 10 %),
so only a few of its runs are queued at any moment. The harder case follows: the operator is
restarted with the N + 1 CRs in place, its initial listing queues a run of every one at once,
and once those runs are under way a second new CR is created: `restart_new_cr_s`, with
`restart_pending_at_create` and the wall time of the whole listing (`restart_listing_wall_s`).
"""

from __future__ import annotations

import time
from typing import Any

from .harness import DidNotFinish
from .operators import RunningOperator, wait_quiet
from .proctree import Sample
from .session import Session, create_periodic

SIZES = {"small": 100, "medium": 300, "full": 1000}
GOAL_S = 2.0
QUIET_S = 1.5
# seconds per CR to converge (size 0: two runs each, the second from the dependent watch) on 2
# busy CPUs, when no burst of the same operator gives a better estimate
DEFAULT_PER_CR_S = {"ours": 1.5, "peer": 7.0}


def per_cr_estimate(burst: dict[str, Any] | None, key: str) -> float:
    """Seconds per CR until quiet, from the same operator's burst where there is one."""
    b = burst or {}
    if b.get("n") and b.get("settled") and b.get("settle_s"):
        return float(b["settle_s"]) / float(b["n"])
    if b.get("n") and b.get("all_successful_s"):
        return 2 * float(b["all_successful_s"]) / float(b["n"])
    return DEFAULT_PER_CR_S.get(key, 5.0)


def choose_period(n: int, per_cr_s: float, floor: float) -> float:
    """Long enough that n CRs converge and go quiet before the first resync comes due (resyncs
    are jittered by up to 10 %, hence the 1.3): 1.3 x per CR x n + 20 s, at least `floor`."""
    return max(floor, 1.3 * per_cr_s * n + 20)


def under_way(resync_runs: int, n: int) -> bool:
    """The resync counts as under way once this many of its runs were seen: 1 in 20, >= 3."""
    return resync_runs >= max(3, n // 20)


def fairness(s: Session, n: int, period: float, new_cr_only: bool = False) -> None:
    names, a, t0, b, ok = create_periodic(s, "fair", n, period)
    s.result.update(
        n=n,
        period_s=period,
        converge_s=b.t - t0 if ok else None,
        converge_runs=b.runs - a.runs,
        successful=s.tracker.count(names),
        goal_s=GOAL_S,
    )
    if not ok:
        raise DidNotFinish(f"{s.tracker.count(names)} of {n} Successful when the cap was reached")
    # quiet before the first resync can come due (at 0.9 P after a CR's last run, at the soonest)
    quiet = wait_quiet(s.op, 3, min(s.deadline, t0 + 0.85 * period))
    s.result["quiet_before_resync"] = quiet
    runs0 = s.op.sampler.now().runs
    start = None
    while True:
        cur = s.op.sampler.now()
        if start is None and cur.runs > runs0:
            hist = [h for h in s.op.sampler.history if h.runs == runs0]
            start = hist[-1] if hist else cur
        if under_way(cur.runs - runs0, n):
            break
        if time.monotonic() > s.deadline:
            raise DidNotFinish(f"resync: {cur.runs - runs0} runs when the cap was reached")
        time.sleep(0.2)
    assert start is not None
    # the new CR, while the resync runs
    at_create, created, new_cr_s, at_done = new_cr(s, "fair-new", "the new CR")
    s.result.update(
        new_cr_s=new_cr_s,
        new_cr_within_goal=new_cr_s <= GOAL_S,
        resync_runs_before_create=at_create.runs - runs0,
        resync_pending_at_create=max(0, n - (at_create.runs - runs0)),
        runs_while_new_cr_waited=at_done.runs - at_create.runs,
    )
    if new_cr_only:  # the figure is in: skip the rest of the resync and the restart
        s.result["new_cr_only"] = True
        return
    # the rest of the resync: N runs since the quiet point (the new CR's own runs among them
    # are few) and no run alive for QUIET_S
    cur, last_busy = runs_done(s, runs0, n, at_done.t, "resync", count_key="resync_runs")
    end = next((h for h in reversed(s.op.sampler.history) if h.t <= last_busy), cur)
    s.result.update(
        resync_runs=end.runs - runs0,
        resync_wall_s=end.t - start.t,
        resync_cpu_s=end.cpu - start.cpu,
        new_cr_after_resync_start_s=created - start.t,
    )
    restart(s, n + 1)


def restart(s: Session, n: int) -> None:
    """Stop the operator, start it again with the n CRs in place: its initial listing queues n
    runs at once; once they are under way, a new CR: create -> Successful."""
    s.result["rusage_children_at_exit_first"] = s.op.stop()
    s.op = RunningOperator(s.spec, s.cluster.kubeconfig, s.ns, s.work / "restart")
    t0 = time.monotonic()
    while not under_way(s.op.sampler.now().runs, n):
        if time.monotonic() > s.deadline or not s.op.alive():
            raise DidNotFinish(f"restart: {s.op.sampler.now().runs} runs; {s.op.log_tail(5)}")
        time.sleep(0.2)
    at_create, _, new_cr_s, at_done = new_cr(s, "fair-new2", "restart: the new CR")
    s.result.update(
        restart_new_cr_s=new_cr_s,
        restart_first_runs_s=at_create.t - t0,
        restart_pending_at_create=max(0, n - at_create.runs),
        restart_runs_while_new_cr_waited=at_done.runs - at_create.runs,
    )
    cur, last_busy = runs_done(s, 0, n, at_done.t, "restart")
    s.result.update(restart_listing_runs=cur.runs, restart_listing_wall_s=last_busy - t0)


def new_cr(s: Session, name: str, what: str) -> tuple[Sample, float, float, Sample]:
    """Create one CR now; (the sample at its create, when it was created, create ->
    Successful, the sample then)."""
    at_create = s.op.sampler.now()
    st = s.tracker.state(name)
    st.created = time.monotonic()
    s.cluster.create_cr(s.ns, name, 0)
    if not s.tracker.wait([name], s.deadline):
        raise DidNotFinish(f"{what} was not Successful within the cap")
    at_done = s.op.sampler.now()
    assert st.successful is not None
    return at_create, st.created, st.successful - st.created, at_done


def runs_done(
    s: Session, runs0: int, n: int, last_busy: float, what: str, count_key: str | None = None
) -> tuple[Sample, float]:
    """Until n runs since `runs0` were seen and none was alive for QUIET_S: (the last sample,
    when a run was last alive). At the cap, the runs seen go to `count_key` of the result."""
    while True:
        cur = s.op.sampler.now()
        if cur.running:
            last_busy = cur.t
        if cur.runs - runs0 >= n and cur.t - last_busy >= QUIET_S:
            return cur, last_busy
        if time.monotonic() > s.deadline:
            if count_key:
                s.result[count_key] = cur.runs - runs0
            raise DidNotFinish(f"{what}: {cur.runs - runs0} of {n} runs when the cap was reached")
        time.sleep(0.2)
