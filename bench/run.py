"""operator-runner against operator-sdk's ansible-operator on a real (local) cluster.

    python -m bench.run --scale small|medium|full [--out bench/results/raw/<ts>.json]
                        [--kubeconfig FILE] [--peer auto|binary|none]
                        [--scenarios latency,burst,scale]

Scenarios (EchoFlask from watches.yaml, CRDs from crds/), each operator in a fresh namespace and
a fresh process, the two never at the same time, interleaved scenario by scenario:

- latency: N CRs created one after another, each when the previous one is Successful and the
  operator is quiet again: create -> `Successful` True (observedGeneration == generation where
  the operator writes it), p50/p95; also create -> status.nodes written by the role;
- burst: N CRs created at once: time until all are Successful, CPU seconds of the operator's
  whole process tree, peak RSS of the tree (sampled every 100 ms), Ansible runs;
- scale (bench/scale.py): N CRs (size 0) with a reconcile period P (CR annotation
  ansible.sdk.operatorframework.io/reconcile-period; P from a size-0 probe unless given):
  converge, then memory with N CRs while idle, then CPU seconds of the resync (its first K runs
  at full scale, extrapolated to N);
- idle memory: operator up after one warm-up CR (deleted again), no CRs.

At the end the table is written as the bench's record, bench/results/run-<scale>.json (with the
scenarios in its name when they are not the default ones; bench/record.py), and everything it
measured to --out. See bench/README.md.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from . import fairness as fair
from . import record
from . import sharding as shard
from .cluster import Cluster
from .harness import BENCH, REPO, SCALES, DidNotFinish, MiB, log
from .operators import PEER_VENV, OperatorSpec, ours_spec, peer_spec, wait_quiet
from .results import figures, notes, pct, peer_label, rounded, sizes_line, table
from .scale import scale
from .session import Session

DEFAULT_SCENARIOS = "latency,burst,scale"


def latency(s: Session, n: int, size: int) -> None:
    lat: list[float] = []
    status_lat: list[float] = []
    for i in range(n):
        name = f"lat-{i:03d}"
        st = s.tracker.state(name)
        st.created = time.monotonic()
        s.cluster.create_cr(s.ns, name, size)
        if not s.tracker.wait([name], s.deadline):
            s.result.update(latency_s=lat, done=i)
            raise DidNotFinish(f"CR {i + 1} of {n} not Successful within the cap")
        assert st.successful is not None  # wait() above returned True
        lat.append(st.successful - st.created)
        if st.status_written is not None:
            status_lat.append(st.status_written - st.created)
        wait_quiet(s.op, 1.0, min(s.deadline, time.monotonic() + 20))
    s.result.update(
        n=n,
        size=size,
        latency_s=lat,
        p50_s=pct(lat, 50),
        p95_s=pct(lat, 95),
        status_written_p50_s=pct(status_lat, 50),
        runs=s.op.sampler.now().runs,
    )
    # then the steady idle memory, once the CRs are gone (their resyncs would keep it busy)
    for i in range(n):
        s.cluster.delete_cr(s.ns, f"lat-{i:03d}")
    wait_quiet(s.op, 3, min(s.deadline, time.monotonic() + 60))
    s.idle_settled()


def burst(s: Session, n: int, size: int) -> None:
    names = [f"burst-{i:04d}" for i in range(n)]
    s.op.sampler.reset_peak()
    a = s.op.sampler.now()
    t0 = time.monotonic()
    s.cluster.create_many(s.ns, names, size, None, s.tracker)
    t_created = time.monotonic()
    ok = s.tracker.wait(names, s.deadline)
    b = s.op.sampler.now()
    s.result.update(
        n=n,
        size=size,
        create_s=t_created - t0,
        all_successful_s=b.t - t0 if ok else None,
        successful=s.tracker.count(names),
        cpu_s=b.cpu - a.cpu,
        cpu_main_s=b.cpu_main - a.cpu_main,
        peak_rss_mib=s.op.sampler.peak_rss / MiB,
        peak_rss_main_mib=s.op.sampler.peak_rss_main / MiB,
        runs=b.runs - a.runs,
    )
    if not ok:
        raise DidNotFinish(f"{s.tracker.count(names)} of {n} Successful when the cap was reached")
    # what the operator still does after every CR is Successful (follow-up runs)
    quiet = wait_quiet(s.op, 3, min(s.deadline, time.monotonic() + 300))
    c = s.op.sampler.now()
    s.result.update(
        settled=quiet,
        settle_cpu_s=c.cpu - a.cpu,
        settle_runs=c.runs - a.runs,
        settle_s=c.t - t0,
        peak_rss_mib=s.op.sampler.peak_rss / MiB,
    )


# --------------------------------------------------------------------------- main


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt(f"signal {signum}")


def main(argv: list[str] | None = None) -> int:
    # SIGTERM (kill, make's Ctrl-C path) unwinds like Ctrl-C: the operators are stopped
    signal.signal(signal.SIGTERM, _interrupt)
    p = argparse.ArgumentParser(prog="python -m bench.run", description=__doc__.split("\n")[0])
    p.add_argument("--scale", choices=sorted(SCALES), default="small")
    p.add_argument("--out", type=Path)
    p.add_argument(
        "--kubeconfig",
        type=Path,
        default=os.environ.get("OPERATOR_RUNNER_KUBECONFIG") or os.environ.get("KUBECONFIG"),
    )
    p.add_argument(
        "--peer",
        choices=["auto", "binary", "none"],
        default="auto",
        help="operator-sdk's ansible-operator (auto: when bench/peer.sh built it, else none)",
    )
    p.add_argument(
        "--only",
        choices=["ours", "peer"],
        help="run the scenarios for this operator alone (e.g. the peer's long scale run apart)",
    )
    p.add_argument("--scenarios", default=DEFAULT_SCENARIOS)
    p.add_argument(
        "--size", type=int, default=1, help="spec.size of the latency and burst CRs (default 1)"
    )
    p.add_argument(
        "--period", type=float, help="reconcile period of the scale CRs in s (default: estimated)"
    )
    p.add_argument("--cap", type=float, help="hard cap per scenario and operator in s")
    p.add_argument("--latency", type=int)
    p.add_argument("--burst", type=int)
    p.add_argument("--n", type=int, help="CRs of the scale/resync scenario")
    p.add_argument("--fairness-n", type=int, help="CRs of the fairness scenario")
    p.add_argument(
        "--fairness-period", type=float, help="their reconcile period in s (default: estimated)"
    )
    p.add_argument(
        "--fairness-new-cr-only",
        action="store_true",
        help="fairness: stop once the new CR during the resync is measured (no rest of the "
        "resync, no restart): the peer's hour-long tail",
    )
    p.add_argument("--sharding-io", type=int, help="CRs of the sharding scenario, I/O role")
    p.add_argument("--sharding-cpu", type=int, help="CRs of the sharding scenario, EchoFlask")
    p.add_argument(
        "--skip-resync",
        action="store_true",
        help="scale: stop after the memory with N CRs (no full resync)",
    )
    p.add_argument(
        "--resync-sample",
        type=int,
        help="scale: measure the resync's first K runs and extrapolate to N (default: N, "
        "except at full scale)",
    )
    p.add_argument(
        "--ours-arg", action="append", default=[], help="extra argument for operator-runner run"
    )
    p.add_argument("--watches-file", type=Path, default=REPO / "watches.yaml")
    p.add_argument("--work", type=Path, help="folder for logs and artifacts (default: a temp dir)")
    a = p.parse_args(argv)
    if not a.kubeconfig:
        raise SystemExit("bench: no cluster: pass --kubeconfig or set OPERATOR_RUNNER_KUBECONFIG")
    sizes = dict(SCALES[a.scale])
    for k in ("latency", "burst"):
        if getattr(a, k):
            sizes[k] = getattr(a, k)
    if a.n:
        sizes["scale"] = a.n
    sizes["fairness"] = a.fairness_n or fair.SIZES[a.scale]
    sizes["sharding_io"] = a.sharding_io or shard.SIZES[a.scale]["io"]
    sizes["sharding_cpu"] = a.sharding_cpu or shard.SIZES[a.scale]["cpu"]
    if a.cap:
        sizes["cap"] = a.cap
    ts = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out = a.out or BENCH / "results" / "raw" / f"{ts}.json"
    work = a.work or Path(os.environ.get("TMPDIR", "/tmp")) / f"operator-runner-bench-{ts}"
    work.mkdir(parents=True, exist_ok=True)
    cluster = Cluster(Path(a.kubeconfig))
    cluster.install_crds()
    watches = a.watches_file.resolve()
    ours = ours_spec(work / "ours", watches, a.ours_arg)
    peer = peer_spec(a.peer, work / "peer", watches)
    ops = [ours] + ([peer] if peer else [])
    if a.only:
        ops = [spec for spec in ops if spec.key == a.only]
        if not ops:
            raise SystemExit(f"bench: --only {a.only}, but there is no {a.only} (--peer none?)")

    def session_spec(key: str, sess_work: Path) -> OperatorSpec:
        """A spec of its own per session: artifacts of that session only."""
        if key == "ours":
            return ours_spec(sess_work, watches, a.ours_arg)
        spec = peer_spec(a.peer, sess_work, watches)
        assert spec is not None
        return spec

    scenarios = [x.strip() for x in a.scenarios.split(",") if x.strip()]
    results: dict[str, dict[str, Any]] = {}
    started = time.monotonic()
    meta = {
        "timestamp": ts,
        "scale": a.scale,
        "sizes": sizes,
        "nproc": os.cpu_count(),
        "loadavg_start": os.getloadavg(),
        "watches": str(watches),
        "work": str(work),
        "git": _git_state(),
        "ours": {"argv": ours.argv, "versions": _versions(REPO / ".venv" / "bin" / "python")},
        "peer": {
            "kind": peer.label,
            "argv": peer.argv,
            "versions": _versions(PEER_VENV / "bin" / "python"),
        }
        if peer
        else None,
    }
    log(f"scale {a.scale}: {sizes}; peer: {peer.label if peer else 'none'}; work dir {work}")
    for scen in scenarios:
        results[scen] = {}
        if scen == "sharding":  # several operator processes at once: a runner of its own
            t0 = time.monotonic()
            results[scen] = shard.run(
                cluster,
                work / "sharding",
                a.scale,
                sizes["cap"],
                lambda w, watches: ours_spec(w, watches, a.ours_arg),
                (lambda w, watches: peer_spec(a.peer, w, watches)) if peer else None,
                sizes={"io": sizes["sharding_io"], "cpu": sizes["sharding_cpu"]},
            )
            log(f"sharding: done in {time.monotonic() - t0:.0f} s")
            partial = {"meta": {**meta, "partial": True}, "results": results}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(partial, indent=1, default=str))
            continue
        for spec in ops:
            sess_work = work / f"{scen}-{spec.key}"
            spec = session_spec(spec.key, sess_work)
            period = None
            if scen == "scale":
                period = a.period  # else estimated in the session, from a size-0 probe
            elif scen == "fairness":
                per_cr = fair.per_cr_estimate((results.get("burst") or {}).get(spec.key), spec.key)
                period = a.fairness_period or fair.choose_period(
                    sizes["fairness"], per_cr, sizes["min_period"]
                )
            s = Session(cluster, spec, scen, sess_work, sizes["cap"] + (period or 0))
            log(f"{scen}: {spec.label} ...")
            t0 = time.monotonic()
            try:
                with s:
                    if scen == "latency":
                        latency(s, sizes["latency"], a.size)
                    elif scen == "burst":
                        burst(s, sizes["burst"], a.size)
                    elif scen == "scale":
                        scale(
                            s,
                            sizes["scale"],
                            period,
                            resync=not a.skip_resync,
                            probe=sizes["probe"],
                            floor=sizes["min_period"],
                            ceiling=sizes["max_period"],
                            resync_sample=a.resync_sample or sizes["resync_sample"],
                        )
                    elif scen == "fairness":
                        assert period is not None
                        fair.fairness(
                            s, sizes["fairness"], period, new_cr_only=a.fairness_new_cr_only
                        )
                    else:
                        raise SystemExit(f"bench: unknown scenario {scen}")
            except DidNotFinish as exc:
                s.result["dnf"] = f"did not finish in {s.cap:.0f} s: {exc}"
                log(f"{scen}: {spec.label}: {s.result['dnf']}")
            except Exception as exc:  # keep going with the other measurements
                s.result["dnf"] = f"error: {type(exc).__name__}: {exc}"
                log(f"{scen}: {spec.label}: {s.result['dnf']}")
            s.result["wall_s"] = time.monotonic() - t0
            results[scen][spec.key] = s.result
            log(f"{scen}: {spec.label}: done in {s.result['wall_s']:.0f} s")
            # after every session, so that an interrupted run keeps what it measured
            partial = {"meta": {**meta, "partial": True}, "results": results}
            out.parent.mkdir(parents=True, exist_ok=True)
            out.write_text(json.dumps(partial, indent=1, default=str))
    meta["loadavg_end"] = os.getloadavg()
    meta["total_wall_s"] = time.monotonic() - started
    text = table(results, sizes)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps(
            {"meta": meta, "results": results, "table": text.splitlines()}, indent=1, default=str
        )
    )
    print(text)
    rows = [
        [title, unit, *(rounded(v) for v in values)] for title, unit, *values in figures(results)
    ]
    columns = ["figure", "unit", "ours", "peer", "ours/peer"]
    title = f"ours = operator-runner; peer = {peer_label(results)}; {sizes_line(sizes)}"
    record.write(
        record_name(a.scale, scenarios, a.only),
        "run",
        f"{a.scale} scale, {', '.join(scenarios)}" + (f", {a.only} only" if a.only else ""),
        [record.Table(title, columns, rows)],
        notes(results),
    )
    print(
        f"\n(total {meta['total_wall_s']:.0f} s; load average {meta['loadavg_start'][0]:.1f} -> "
        f"{meta['loadavg_end'][0]:.1f} on {os.cpu_count()} CPUs; JSON: {out})"
    )
    return 0


def record_name(scale: str, scenarios: list[str], only: str | None) -> str:
    """run-<scale> for make bench's default scenarios, else with the scenarios (and --only)."""
    name = f"run-{scale}"
    if scenarios != DEFAULT_SCENARIOS.split(","):
        name += "-" + "-".join(scenarios)
    return name + (f"-{only}" if only else "")


def _git_state() -> dict[str, Any]:
    def git(*args: str) -> str:
        try:
            return subprocess.run(
                ["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30
            ).stdout.strip()
        except (OSError, subprocess.TimeoutExpired):
            return ""

    return {
        "head": git("rev-parse", "HEAD"),
        "runner_changes_not_committed": len(git("status", "--porcelain", "runner").splitlines()),
    }


def _versions(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        "out = {}\n"
        "for d in ('ansible-core', 'ansible-runner', 'ansible-runner-http', 'kubernetes',\n"
        "          'kopf', 'operator-runner'):\n"
        "    try: out[d] = m.version(d)\n"
        "    except m.PackageNotFoundError: pass\n"
        "print(json.dumps(out))\n"
    )
    try:
        versions: dict[str, str] = json.loads(
            subprocess.run(
                [str(python), "-c", code], capture_output=True, text=True, timeout=60
            ).stdout
        )
    except (OSError, ValueError, subprocess.TimeoutExpired):
        return {}
    return versions


if __name__ == "__main__":
    raise SystemExit(main())
