"""docs/figures.md, generated from the benches' records (bench/results/*.json, bench/record.py).

    python -m bench.figures            # write docs/figures.md
    python -m bench.figures --check    # exit 1 when docs/figures.md is not what the records give

One section per record, in the order of BENCHES (then any other bench, by name): what the bench
measures, the date, the machine and the command, then its tables and notes. A bench of BENCHES
with no record is listed as not yet measured in this format, with where its earlier figures are.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from .harness import REPO
from .record import RESULTS, cell, read

PAGE = REPO / "docs" / "figures.md"
# The commit whose bench/README.md and README.md still held the figures measured before the
# records: what "not yet measured in this format" points to.
HISTORY = "6f8de74"

# bench name -> (title, what it measures, how to run it)
BENCHES: dict[str, tuple[str, str, str]] = {
    "run": (
        "make bench: operator-runner against operator-sdk's ansible-operator",
        "The EchoFlask operator run by operator-runner (ours) and by operator-sdk's "
        "ansible-operator (the peer) on one local cluster, one after the other: latency, a "
        "burst, convergence and resync of many CRs, memory; fairness and sharding on request.",
        "make bench BENCH_SCALE=small",
    ),
    "reconcile_cost": (
        "What one reconcile costs",
        "CPU and wall time of one reconcile of a one-task role and of five kubernetes.core.k8s "
        "tasks, on the warm and the plain executor; the operator's memory idle and with 100 CRs.",
        "python -m bench.reconcile_cost --kubeconfig K",
    ),
    "breakdown": (
        "Where an EchoFlask reconcile's CPU goes",
        "CPU per run of one EchoFlask, by process (the operator, the runs, the module jobs, the "
        "servers), and the memory of the operator's process tree warm and idle.",
        "python -m bench.breakdown --kubeconfig K",
    ),
    "lines": (
        "CPU per EchoFlask run on each ansible-core line",
        "bench.breakdown's CPU per run, warm and plain, with one virtualenv per line, "
        "alternating so that the machine's drift takes every line alike.",
        "python -m bench.lines --kubeconfig K --venv 2.18=.venv --venv 2.15=.venv-ansible-2.15 ...",
    ),
    "warm_local": (
        "The warm executor without a cluster",
        "CPU per run of a 9-task playbook shaped like EchoFlask's role (module tasks are ping) "
        "on the warm executor, and its server's memory.",
        "python -m bench.warm_local",
    ),
    "live_reload": (
        "Live reload: a role saved -> its effect on a live CR",
        "`operator-runner run --watch-roles`: from saving a role to its new value on the CR's "
        "ConfigMap.",
        "python -m bench.live_reload --kubeconfig K",
    ),
    "admission": (
        "Admission webhooks written as Ansible",
        "A validate role with one lookup against a CEL rule, at 1, 10 and 50 dry-run creates a "
        "second; reconcile latency while admissions run.",
        "python -m bench.admission --kubeconfig K",
    ),
    "conversion": (
        "Conversion webhooks",
        "A ConversionReview of 1 and 100 objects answered by a field map and by a role, and a "
        "GET through the API server of the stored and of a converted version.",
        "python -m bench.conversion --kubeconfig K",
    ),
}


def records(results: Path) -> list[dict[str, Any]]:
    """Every record in `results`, known benches first (in BENCHES' order), then by name."""
    found = [read(path) for path in sorted(results.glob("*.json"))]
    order = list(BENCHES)

    def key(record: dict[str, Any]) -> tuple[int, str]:
        bench = record["bench"]
        return (order.index(bench) if bench in order else len(order), record["name"])

    return sorted(found, key=key)


def _escape(text: str) -> str:
    return text.replace("|", "\\|").replace("\n", " ")


def markdown_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> list[str]:
    lines = [
        "| " + " | ".join(_escape(c) for c in columns) + " |",
        "|" + "|".join(" --- " for _ in columns) + "|",
    ]
    lines += ["| " + " | ".join(_escape(cell(v)) for v in row) + " |" for row in rows]
    return lines


def machine_line(record: dict[str, Any]) -> str:
    m = record["machine"]
    date = record["date"].replace("T", " ").removesuffix("Z") + " UTC"
    cpus = f"{m.get('cpus')} CPUs"
    if m.get("cpus_usable") not in (None, m.get("cpus")):
        cpus += f" ({m['cpus_usable']} usable)"
    if m.get("cpu_model"):
        cpus += f", {m['cpu_model']}"
    parts = [cpus, f"{m.get('memory_gib')} GiB", f"Linux {m.get('kernel')}"]
    parts.append(f"Python {m.get('python')}")
    if m.get("ansible_core"):
        parts.append(f"ansible-core {m['ansible_core']}")
    commit = f"commit {m.get('commit') or '?'}"
    if m.get("uncommitted"):
        commit += f" with {m['uncommitted']} uncommitted changes in runner/ or bench/"
    load = m.get("loadavg") or ["?"]
    return f"Measured {date} at {commit}, on {'; '.join(parts)}; load average {load[0]} at the end."


def section(record: dict[str, Any]) -> list[str]:
    bench = record["bench"]
    title, measures, _ = BENCHES.get(bench, (record["title"], "", ""))
    heading = title if record["title"] in ("", title) else f"{title}: {record['title']}"
    lines = [f"## {heading}", ""]
    if measures:
        lines += [measures, ""]
    lines += [machine_line(record), "", f"`{record['command']}`", ""]
    for table in record["tables"]:
        if table["title"]:
            lines += [f"**{_escape(table['title'])}**", ""]
        lines += [*markdown_table(table["columns"], table["rows"]), ""]
    lines += [f"- {note}" for note in record["notes"]]
    if record["notes"]:
        lines.append("")
    return lines


def render(results: Path = RESULTS) -> str:
    found = records(results)
    lines = [
        "<!-- Generated by `python -m bench.figures` from bench/results/*.json: do not edit. -->",
        "",
        "# Figures",
        "",
        "What the benches measured, one table per bench run, each with its date, the machine "
        "and the command. Every bench writes its record to `bench/results/<name>.json` when "
        "it ends (`bench/record.py`); `python -m bench.figures` renders this page from them, "
        "and `make lint` fails when the page is not what the records give. How to run each "
        "bench and how to read its figures: `bench/README.md`. Wall times move with the "
        "machine's load (the load average is given); CPU seconds much less.",
        "",
    ]
    for record in found:
        lines += section(record)
    measured = {record["bench"] for record in found}
    missing = [bench for bench in BENCHES if bench not in measured]
    if missing:
        lines += [
            "## Not yet measured in this format",
            "",
            "These benches have no record yet. Their earlier figures, kept by hand before the "
            f"records, are in the history: `git show {HISTORY}:bench/README.md` and "
            f"`git show {HISTORY}:README.md` (its Figures table).",
            "",
            "| bench | what it measures | how to run it |",
            "| --- | --- | --- |",
        ]
        for bench in missing:
            title, measures, how = BENCHES[bench]
            lines.append(f"| {_escape(title)} | {_escape(measures)} | `{how}` |")
        lines.append("")
    return "\n".join(lines).rstrip("\n") + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.figures", description=__doc__)
    parser.add_argument("--check", action="store_true", help="compare, do not write")
    parser.add_argument("--results", type=Path, default=RESULTS)
    parser.add_argument("--page", type=Path, default=PAGE)
    args = parser.parse_args(argv)
    try:
        text = render(args.results)
    except ValueError as err:
        print(f"figures: {err}", file=sys.stderr)
        return 1
    page = args.page
    if args.check:
        if not page.exists() or page.read_text() != text:
            print(
                f"figures: {page} is not what bench/results/*.json give; "
                "run: .venv/bin/python -m bench.figures",
                file=sys.stderr,
            )
            return 1
        print(f"figures: {page.name} is up to date ({len(records(args.results))} records)")
        return 0
    page.write_text(text)
    print(f"figures: wrote {page}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
