"""Scenario `scale`: N CRs (size 0) with a reconcile period P (CR annotation
ansible.sdk.operatorframework.io/reconcile-period): converge, then memory with N CRs while idle,
then the CPU seconds of the resync (the runs P after convergence).

P must be long enough that the N CRs converge and go quiet (each has a follow-up run: the
dependent watch sees the Deployment it made change) before the first resync comes due, and not
much longer: every second of P is waited. Unless given, it is estimated in the session, from a
probe of the same operator: PROBE CRs (size 0, as the N are) created at once, and their time
until all are Successful and the operator is quiet again, per CR, into `fairness.choose_period`
(1.3 x per CR x N + 20 s), at most `ceiling` (`period_capped` says so: the peer at N = 1000
needs ~70 min to go quiet). The probe CRs are deleted before the N are created. (The estimate
from the burst, size 1 with its Pods and resyncs every 15 s, was 3x too long for ours and over
2 h for the peer at N = 1000.)

`resync_sample` measures the resync's first K runs only, where a full resync takes too long (the
peer's at N = 1000: ~36 min); `resync_cpu_full_s` is then extrapolated to N runs, and
`resync_sampled` says so. With K = N the whole resync is measured, as before.
"""

from __future__ import annotations

import time

from .crs import PERIOD_ANNOTATION
from .fairness import choose_period
from .harness import DidNotFinish, MiB
from .operators import wait_quiet
from .proctree import Sample
from .session import Session, create_periodic

QUIET_CAP_S = 300.0
PROBE_PERIOD = "24h"  # the probe CRs are deleted long before this


def probe_per_cr(s: Session, k: int) -> tuple[float, bool]:
    """Seconds per CR until k size-0 CRs created at once are all Successful and the operator is
    quiet again: each CR has a follow-up run (its dependent watch sees the Deployment it made
    change), which the resync must not meet. An operator not quiet within QUIET_CAP_S counts
    twice its time to Successful (and False says so). The k CRs are then deleted."""
    names = [f"probe-{i:04d}" for i in range(k)]
    t0 = time.monotonic()
    s.cluster.create_many(s.ns, names, 0, {PERIOD_ANNOTATION: PROBE_PERIOD}, s.tracker)
    ok = s.tracker.wait(names, s.deadline)
    successful = time.monotonic() - t0
    quiet = ok and wait_quiet(s.op, 3, min(s.deadline, time.monotonic() + QUIET_CAP_S))
    elapsed = time.monotonic() - 3 - t0 if quiet else 2 * successful
    for name in names:
        s.cluster.delete_cr(s.ns, name)
    if not ok:
        raise DidNotFinish(f"probe: {s.tracker.count(names)} of {k} Successful within the cap")
    s.cluster.wait_crs_gone(s.ns, names, min(s.deadline, time.monotonic() + 120))
    wait_quiet(s.op, 3, min(s.deadline, time.monotonic() + 60))
    return elapsed / k, quiet


def scale(
    s: Session,
    n: int,
    period: float | None,
    resync: bool = True,
    *,
    probe: int = 10,
    floor: float = 30.0,
    ceiling: float = 3600.0,
    resync_sample: int | None = None,
) -> None:
    """`period` None: estimated from a probe of `probe` CRs, at least `floor` and at most
    `ceiling` s; the session's deadline is moved on by it, as for a period given."""
    if period is None:
        per_cr, quiet = probe_per_cr(s, probe)
        wanted = choose_period(n, per_cr, floor)
        period = min(wanted, ceiling)
        s.extend(period)
        s.result.update(
            probe_n=probe, probe_per_cr_s=per_cr, probe_quiet=quiet, period_capped=wanted > ceiling
        )
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
    # the resync: the next K runs (K = resync_sample, else N) to finish after the quiet point
    target = min(n, resync_sample or n)
    q0 = s.op.sampler.now()
    runs0 = q0.runs

    def finished(x: Sample) -> int:
        """Runs ended since the quiet point."""
        return (x.runs - x.running) - (q0.runs - q0.running)

    start = None
    while time.monotonic() < s.deadline:
        cur = s.op.sampler.now()
        if start is None and cur.runs > runs0:
            # the last sample before the first resync run started
            hist = [h for h in s.op.sampler.history if h.runs == runs0]
            start = hist[-1] if hist else cur
        if finished(cur) >= target and (target < n or cur.running == 0):
            break
        time.sleep(0.2)
    else:
        done = finished(s.op.sampler.now())
        s.result.update(resync_runs=done)
        raise DidNotFinish(f"resync: {done} of {target} runs when the cap was reached")
    end = s.op.sampler.now()
    assert start is not None
    runs = finished(end)
    s.result.update(
        resync_runs=runs,
        resync_sampled=target < n,
        resync_wall_s=end.t - start.t,
        resync_cpu_s=end.cpu - start.cpu,
        resync_cpu_main_s=end.cpu_main - start.cpu_main,
        resync_cpu_per_run_s=(end.cpu - start.cpu) / runs if runs else None,
        resync_cpu_full_s=(end.cpu - start.cpu) * n / runs if runs else None,
    )
