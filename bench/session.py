"""A session: one operator, one namespace, one scenario; and CRs with a reconcile period
created in one."""

from __future__ import annotations

import os
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from .anatomy import summarize_artifacts
from .cluster import Cluster
from .crs import PERIOD_ANNOTATION, Tracker
from .harness import DidNotFinish, MiB, log
from .operators import OperatorSpec, RunningOperator, wait_quiet
from .proctree import Sample


class Converged(NamedTuple):
    names: list[str]
    before: Sample  # just before the creates
    t0: float
    after: Sample  # when all were Successful, or at the cap
    ok: bool


def create_periodic(s: Session, prefix: str, n: int, period: float) -> Converged:
    """n CRs (`size: 0`) named PREFIX-0000.. with a reconcile period, created at once; waits
    until all are Successful or the session's cap is reached."""
    names = [f"{prefix}-{i:04d}" for i in range(n)]
    before = s.op.sampler.now()
    t0 = time.monotonic()
    s.cluster.create_many(s.ns, names, 0, {PERIOD_ANNOTATION: f"{int(period)}s"}, s.tracker)
    ok = s.tracker.wait(names, s.deadline)
    return Converged(names, before, t0, s.op.sampler.now(), ok)


@dataclass
class Session:
    """One operator, one namespace, one scenario."""

    cluster: Cluster
    spec: OperatorSpec
    scenario: str
    work: Path
    cap: float
    result: dict[str, Any] = field(default_factory=dict)

    def __enter__(self) -> Session:
        self.ns = self.cluster.namespace(f"bench-{self.scenario}-{self.spec.key}")
        self.deadline = time.monotonic() + self.cap
        self.tracker = Tracker(self.cluster.api, self.ns)
        self.tracker.start()
        self.tracker.ready.wait(30)
        self.op = RunningOperator(self.spec, self.cluster.kubeconfig, self.ns, self.work)
        self.result.update(
            {"operator": self.spec.label, "namespace": self.ns, "loadavg_start": os.getloadavg()}
        )
        try:
            self._warm_up()
        except BaseException:  # no `with` body runs, so no __exit__: stop the operator here
            self.__exit__(*sys.exc_info())
            raise
        return self

    def extend(self, seconds: float) -> None:
        """Moves the cap (and so the deadline) on, e.g. by a period chosen in the session."""
        self.cap += seconds
        self.deadline += seconds

    def _warm_up(self) -> None:
        t0 = time.monotonic()
        self.cluster.create_cr(self.ns, "warmup", 0)
        self.tracker.state("warmup").created = t0
        if not self.tracker.wait(["warmup"], min(self.deadline, t0 + 600)):
            raise DidNotFinish(
                f"the warm-up CR was not Successful in {time.monotonic() - t0:.0f} s; "
                f"operator log:\n{self.op.log_tail()}"
            )
        first_successful = self.tracker.state("warmup").successful
        assert first_successful is not None  # wait() above returned True
        self.result["startup_to_first_successful_s"] = first_successful - self.op.t_start
        self.cluster.delete_cr(self.ns, "warmup")
        wait_quiet(self.op, 3, min(self.deadline, time.monotonic() + 60))
        t = time.monotonic()
        time.sleep(3)
        rss, rss_main = self.op.sampler.mean_rss(t)
        self.result["idle_rss_mib"] = rss / MiB
        self.result["idle_rss_main_mib"] = rss_main / MiB
        self.result["idle_pss_mib"] = self.op.sampler.pss()[0] / MiB

    def idle_settled(self) -> None:
        """Idle memory once the operator is down to its steady state: operator-runner stops its
        warm executors after --warm-idle-timeout (120 s by default) without a run; the peer
        keeps no helper processes. Waits until the tree is one process (at most 180 s, not
        counted against the session's cap)."""
        t0 = time.monotonic()
        self.deadline += 180
        deadline = t0 + 180
        while self.op.sampler.now().nprocs > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        t = time.monotonic()
        time.sleep(3)
        rss, _ = self.op.sampler.mean_rss(t)
        self.result["idle_settled_after_s"] = t - t0
        self.result["idle_settled_nprocs"] = self.op.sampler.now().nprocs
        self.result["idle_settled_rss_mib"] = rss / MiB
        self.result["idle_settled_pss_mib"] = self.op.sampler.pss()[0] / MiB

    def __exit__(self, *exc: object) -> None:
        self.tracker.stop()
        rusage = self.op.stop()
        self.result["rusage_children_at_exit"] = rusage
        self.result["loadavg_end"] = os.getloadavg()
        self.result["operator_log"] = str(self.op.log_file)
        try:
            self.result["anatomy"] = summarize_artifacts(self.spec.artifacts)
        except Exception as e:  # the analysis must not lose the measurement
            self.result["anatomy"] = {"error": str(e)}
        if not self.cluster.delete_namespace(self.ns):
            log(f"namespace {self.ns} still terminating after 300 s")

    def left(self) -> float:
        return self.deadline - time.monotonic()
