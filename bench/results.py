"""The table of bench.run's results (ours, peer, ours/peer) and the statistics behind it."""

from __future__ import annotations

from typing import Any

from . import sharding as shard
from .record import Value


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


ROWS = [
    ("startup: launch -> first CR Successful", "s", "latency", "startup_to_first_successful_s"),
    ("latency p50 (create -> Successful)", "s", "latency", "p50_s"),
    ("latency p95 (create -> Successful)", "s", "latency", "p95_s"),
    ("latency p50 (create -> status.nodes written)", "s", "latency", "status_written_p50_s"),
    ("burst: all Successful", "s", "burst", "all_successful_s"),
    ("burst: CPU, process tree", "s", "burst", "cpu_s"),
    ("burst: CPU, operator process alone", "s", "burst", "cpu_main_s"),
    ("burst: Ansible runs until all Successful", "", "burst", "runs"),
    ("burst: peak RSS, process tree", "MiB", "burst", "peak_rss_mib"),
    ("burst: until quiet again", "s", "burst", "settle_s"),
    ("burst: CPU until quiet again", "s", "burst", "settle_cpu_s"),
    ("scale: probe, time per CR (size 0)", "s", "scale", "probe_per_cr_s"),
    ("scale: reconcile period chosen", "s", "scale", "period_s"),
    ("scale: converge N CRs", "s", "scale", "converge_s"),
    ("scale: CPU to converge", "s", "scale", "converge_cpu_s"),
    ("resync: CPU per full resync", "s", "scale", "resync_cpu_full_s"),
    ("resync: CPU per run", "s", "scale", "resync_cpu_per_run_s"),
    ("resync: runs measured", "", "scale", "resync_runs"),
    ("resync: wall time of the runs measured", "s", "scale", "resync_wall_s"),
    ("fairness: new CR during a resync -> Successful", "s", "fairness", "new_cr_s"),
    ("fairness: resync runs pending at its create", "", "fairness", "resync_pending_at_create"),
    ("fairness: wall time of the full resync", "s", "fairness", "resync_wall_s"),
    ("fairness: CPU of the full resync", "s", "fairness", "resync_cpu_s"),
    ("fairness: new CR during restart listing -> Succ.", "s", "fairness", "restart_new_cr_s"),
    ("fairness: listing runs pending at its create", "", "fairness", "restart_pending_at_create"),
    ("fairness: restart -> listing of N+1 done", "s", "fairness", "restart_listing_wall_s"),
    ("sharding, I/O role: 1 replica", "CR/s", "sharding", "io_throughput_1"),
    ("sharding, I/O role: 2 replicas", "CR/s", "sharding", "io_throughput_2"),
    ("sharding, I/O role: 4 replicas", "CR/s", "sharding", "io_throughput_4"),
    ("sharding, I/O role: speedup 2 replicas", "x", "sharding", "io_speedup_2"),
    ("sharding, I/O role: speedup 4 replicas", "x", "sharding", "io_speedup_4"),
    ("sharding, EchoFlask (CPU): 1 replica", "CR/s", "sharding", "cpu_throughput_1"),
    ("sharding, EchoFlask (CPU): 2 replicas", "CR/s", "sharding", "cpu_throughput_2"),
    ("sharding, EchoFlask (CPU): 4 replicas", "CR/s", "sharding", "cpu_throughput_4"),
    ("sharding, EchoFlask (CPU): speedup 2 replicas", "x", "sharding", "cpu_speedup_2"),
    ("sharding, EchoFlask (CPU): speedup 4 replicas", "x", "sharding", "cpu_speedup_4"),
    ("idle memory, no CRs, steady (tree)", "MiB", "latency", "idle_settled_rss_mib"),
    ("idle memory, no CRs, steady (tree, PSS)", "MiB", "latency", "idle_settled_pss_mib"),
    ("idle memory, no CRs (tree)", "MiB", "scale", "idle_rss_mib"),
    ("idle memory, no CRs (operator process)", "MiB", "scale", "idle_rss_main_mib"),
    ("idle memory, no CRs (tree, PSS)", "MiB", "scale", "idle_pss_mib"),
    ("memory with N CRs, idle (tree)", "MiB", "scale", "rss_idle_with_crs_mib"),
    ("memory with N CRs, idle (operator process)", "MiB", "scale", "rss_main_idle_with_crs_mib"),
    ("memory with N CRs, idle (tree, PSS)", "MiB", "scale", "pss_idle_with_crs_mib"),
]


def fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.2f}" if abs(v) < 100 else f"{v:.0f}"
    return str(v)


def rounded(v: Value) -> Value:
    """A float as the table shows it (2 decimals under 100, none above); others unchanged."""
    if isinstance(v, float):
        return round(v, 2) if abs(v) < 100 else float(round(v))
    return v


def figures(results: dict[str, Any]) -> list[list[Value]]:
    """One row per figure of ROWS: title, unit, ours, peer, ours/peer (None where not measured,
    "DNF" where the session did not finish)."""
    out: list[list[Value]] = []
    for title, unit, scen, key in ROWS:
        r = results.get(scen) or {}
        if key.startswith("idle_"):  # measured in every session: take the first one that has it
            r = next(
                (
                    results[x]
                    for x in ("scale", "burst", "latency")
                    if x in results
                    and any(key in (results[x].get(w) or {}) for w in ("ours", "peer"))
                ),
                r,
            )
        o, p = (r.get("ours") or {}), (r.get("peer") or {})
        ov, pv = o.get(key), p.get(key)
        ratio = (
            ov / pv
            if isinstance(ov, (int, float)) and isinstance(pv, (int, float)) and pv
            else None
        )
        out.append(
            [
                title,
                unit,
                "DNF" if ov is None and "dnf" in o else ov,
                "DNF" if pv is None and "dnf" in p else pv,
                ratio,
            ]
        )
    return out


def sizes_line(sizes: dict[str, Any]) -> str:
    return (
        f"sizes: latency {sizes['latency']} CRs, burst {sizes['burst']}, "
        f"scale/resync N = {sizes['scale']}, fairness N = {sizes['fairness']}, sharding "
        f"{sizes['sharding_io']} CRs (I/O role, {shard.DELAY_S:g} s a run) / "
        f"{sizes['sharding_cpu']} (EchoFlask), --max-concurrent-reconciles={shard.MAX_CONCURRENT} "
        "per replica; the peer cannot shard (1 replica only)"
    )


def peer_label(results: dict[str, Any]) -> str:
    found = (r["peer"].get("operator") for r in results.values() if r.get("peer"))
    return str(next(found, "peer"))


def table(results: dict[str, Any], sizes: dict[str, Any]) -> str:
    lines = [
        f"ours = operator-runner; peer = {peer_label(results)}",
        sizes_line(sizes),
        "",
    ]
    header = f"{'figure':<47} {'unit':<4} {'ours':>10} {'peer':>10} {'ours/peer':>9}"
    lines += [header, "-" * len(header)]
    for title, unit, ov, pv, ratio in figures(results):
        lines.append(f"{title:<47} {unit:<4} {fmt(ov):>10} {fmt(pv):>10} {fmt(ratio):>9}")
    found = notes(results)
    if found:
        lines += ["", *found]
    return "\n".join(lines)


def notes(results: dict[str, Any]) -> list[str]:
    notes = []
    for scen, r in results.items():
        for who in ("ours", "peer"):
            if (r.get(who) or {}).get("dnf"):
                notes.append(f"{scen}/{who}: did not finish: {r[who]['dnf']}")
            if (r.get(who) or {}).get("idle_before_resync") is False:
                notes.append(
                    f"{scen}/{who}: Ansible still ran when the memory with N CRs was taken and the "
                    "resync window opened (follow-up runs): those figures include them"
                )
            if (r.get(who) or {}).get("period_capped"):
                notes.append(
                    f"{scen}/{who}: its probe asked for a longer period than the greatest "
                    f"({r[who].get('period_s'):.0f} s): it may not be quiet when the resync "
                    "comes due"
                )
            if (r.get(who) or {}).get("resync_sampled"):
                notes.append(
                    f"{scen}/{who}: the resync's first {r[who].get('resync_runs')} runs were "
                    "measured; its CPU per full resync is extrapolated to N"
                )
            if (r.get(who) or {}).get("quiet_before_resync") is False:
                notes.append(
                    f"{scen}/{who}: not quiet before the resync came due (follow-up runs "
                    "or a short period): the resync figures include those runs"
                )
            if (r.get(who) or {}).get("settled") is False:
                notes.append(f"{scen}/{who}: not quiet within 300 s after all were Successful")
    return notes
