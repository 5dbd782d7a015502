"""Scenario `scale`: N CRs (size 0) with a reconcile period P (CR annotation
ansible.sdk.operatorframework.io/reconcile-period): converge, then memory with N CRs while idle,
then CPU seconds of one full resync (the N runs P after convergence)."""

from __future__ import annotations

import time

from .common import DidNotFinish, MiB, Session, create_periodic, wait_quiet

QUIET_CAP_S = 300.0


def scale(s: Session, n: int, period: float, resync: bool = True) -> None:
    names, a, t0, b, ok = create_periodic(s, "scale", n, period)
    s.result.update(
        n=n,
        size=0,
        period_s=period,
        converge_s=b.t - t0 if ok else None,
        converge_cpu_s=b.cpu - a.cpu,
        converge_runs=b.runs - a.runs,
        successful=s.tracker.count(names),
        peak_rss_mib=s.op.sampler.peak_rss / MiB,
    )
    if not ok:
        raise DidNotFinish(f"{s.tracker.count(names)} of {n} Successful when the cap was reached")
    # memory with N CRs, converged and idle (before the first resync, at t0 + period). An
    # operator whose follow-up runs go on (the peer at 1000 CRs: over an hour) is measured after
    # at most QUIET_CAP_S, as the burst is; `idle_before_resync` then says it was not idle.
    first_resync = t0 + period
    quiet = wait_quiet(s.op, 5, min(s.deadline, first_resync - 8, time.monotonic() + QUIET_CAP_S))
    q = s.op.sampler.now()
    time.sleep(5)
    rss, rss_main = s.op.sampler.mean_rss(q.t)
    idle = s.op.sampler.now().runs == q.runs
    s.result["pss_idle_with_crs_mib"] = s.op.sampler.pss()[0] / MiB
    s.result.update(
        rss_idle_with_crs_mib=rss / MiB,
        rss_main_idle_with_crs_mib=rss_main / MiB,
        idle_before_resync=quiet and idle,
    )
    if not resync:
        return
    # one full resync: the next N runs after the quiet point
    runs0 = s.op.sampler.now().runs
    start = None
    while time.monotonic() < s.deadline:
        cur = s.op.sampler.now()
        if start is None and cur.runs > runs0:
            # the last sample before the first resync run started
            hist = [h for h in s.op.sampler.history if h.runs == runs0]
            start = hist[-1] if hist else cur
        if cur.runs - runs0 >= n and cur.running == 0:
            break
        time.sleep(0.2)
    else:
        s.result.update(resync_runs=s.op.sampler.now().runs - runs0)
        raise DidNotFinish(
            f"resync: {s.op.sampler.now().runs - runs0} of {n} runs when the cap was reached"
        )
    end = s.op.sampler.now()
    assert start is not None
    runs = end.runs - runs0
    s.result.update(
        resync_runs=runs,
        resync_wall_s=end.t - start.t,
        resync_cpu_s=end.cpu - start.cpu,
        resync_cpu_main_s=end.cpu_main - start.cpu_main,
        resync_cpu_per_run_s=(end.cpu - start.cpu) / runs if runs else None,
        resync_cpu_full_s=(end.cpu - start.cpu) * n / runs if runs else None,
    )
