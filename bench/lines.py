"""CPU per EchoFlask run, warm and plain, on each ansible-core line (issue 25).

    python -m bench.lines --kubeconfig K --venv 2.18=/path/to/venv-2.18 --venv 2.19=.venv \
        [--venv main-2.19=.venv:/path/to/main-checkout] [--runs 10] [--plain-runs 4] \
        [--rounds 2] [--json out.json]

Each `--venv LABEL=VENV[:SRC]` names a Python environment with operator-runner, its
ansible-core line and kubernetes.core installed (`VENV/bin/python`; with `:SRC`, the runner's
code is taken from the source tree SRC through PYTHONPATH). A virtualenv with another checkout
installed (e.g. main's, `pip install --no-deps -e CHECKOUT`) compares against it on the same
machine with the same command: `bench.breakdown` runs in the folder of the runner package the
environment imports, with that checkout's bench/. For every round, every environment and
both executors in turn (alternating, so that a machine's drift takes them alike), it runs
`bench.breakdown` (one EchoFlask, size 1, resynced every second: CPU of the operator's whole
process tree per run) with that Python, then prints a table: per environment and executor, the
mean CPU seconds per run of each round, their mean, and the wall seconds per run. It also
reads which executor the operator really used (the warm executor falls back to the plain path
when a line or a patch fails). The table is also written as the bench's record (bench/record.py).

Run it under the team lock: `flock /tmp/or-heavy.lock python -m bench.lines ...`.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import statistics
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from . import record
from .harness import REPO


@dataclass
class Target:
    label: str
    python: str
    source: str | None  # PYTHONPATH for the runner's code, or None (the venv's own)
    versions: str = ""
    core: tuple[int, ...] = ()
    tree: str = str(REPO)  # where its runner package (and bench/) is: the runs' working dir
    cpu: dict[str, list[float]] = field(default_factory=dict)
    wall: dict[str, list[float]] = field(default_factory=dict)
    chosen: dict[str, str] = field(default_factory=dict)


def parse_target(spec: str) -> Target:
    label, _, rest = spec.partition("=")
    venv, _, source = rest.partition(":")
    python = str(Path(venv).absolute() / "bin" / "python")
    if not label or not Path(python).exists():
        raise SystemExit(f"--venv {spec}: want LABEL=VENV[:SRC] with VENV/bin/python")
    return Target(label, python, source or None)


def environ(target: Target) -> dict[str, str]:
    env = {**os.environ, "BENCH_RECORD": "0"}  # this bench's record holds the breakdowns'
    if target.source:
        env["PYTHONPATH"] = target.source
    return env


def versions(target: Target) -> str:
    probe = (
        "import os, sys, ansible, runner\n"
        "print(ansible.__version__, '%d.%d' % sys.version_info[:2],"
        " os.path.dirname(os.path.dirname(runner.__file__)))"
    )
    done = subprocess.run(  # from "/": the environment's own runner, not a checkout's in cwd
        [target.python, "-c", probe], env=environ(target), capture_output=True, text=True, cwd="/"
    )
    core, python, target.tree = done.stdout.split()
    target.core = tuple(int(part) for part in core.split(".")[:2])
    return f"ansible-core {core}, Python {python}"


def breakdown(
    target: Target, kubeconfig: str, executor: str, runs: int
) -> tuple[float, float, str]:
    """(CPU s per run, wall s per run, the executor the operator chose) of one breakdown."""
    done = subprocess.run(
        [
            target.python,
            "-m",
            "bench.breakdown",
            f"--kubeconfig={kubeconfig}",
            f"--runs={runs}",
            f"--executor={executor}",
            "--idle=5",
        ],
        cwd=target.tree,  # `python -m` finds the runner package there first
        env=environ(target),
        capture_output=True,
        text=True,
        timeout=3600,
    )
    total = re.search(r"^total\s+([\d.]+)", done.stdout, re.MULTILINE)
    wall = re.search(r"^wall s per run.*?([\d.]+)$", done.stdout, re.MULTILINE)
    if done.returncode != 0 or not total or not wall:
        raise SystemExit(f"bench.breakdown failed for {target.label} {executor}:\n{done.stdout}")
    log = re.search(r"^operator log: (.+)$", done.stdout, re.MULTILINE)
    return float(total[1]), float(wall[1]), chosen(Path(log[1]) if log else None)


def chosen(log: Path | None) -> str:
    """What the operator's log says about its executor: warm (N patches), or plain (why)."""
    if log is None or not log.exists():
        return "?"
    said = "?"
    for line in log.read_text(errors="replace").splitlines():
        try:
            message = str(json.loads(line).get("msg", ""))
        except ValueError:
            continue
        if message.startswith("executor: warm (fork server), "):
            said = "warm, " + message.split(", ", 2)[2]
        elif message.startswith(("warm executor given up", "executor: plain")):
            said = "plain: " + message
        elif message.startswith("executor: ") and said == "?":  # before issue 25
            said = message.removeprefix("executor: ")
    return said


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"))
    parser.add_argument("--venv", action="append", required=True, help="LABEL=VENV[:SRC]")
    parser.add_argument("--runs", type=int, default=10, help="measured runs, warm")
    parser.add_argument("--plain-runs", type=int, default=4, help="measured runs, plain")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--executors", default="warm,plain")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    targets = [parse_target(spec) for spec in args.venv]
    executors = args.executors.split(",")
    for target in targets:
        target.versions = versions(target)
    for round_ in range(args.rounds):
        for target in targets:
            for executor in executors:
                runs = args.runs if executor == "warm" else args.plain_runs
                cpu, wall, said = breakdown(target, args.kubeconfig, executor, runs)
                target.cpu.setdefault(executor, []).append(cpu)
                target.wall.setdefault(executor, []).append(wall)
                target.chosen[executor] = said
                print(
                    f"round {round_ + 1}: {target.label} {executor}: {cpu:.3f} s CPU per run",
                    file=sys.stderr,
                    flush=True,
                )
    print(
        f"{'line':<14} {'versions':<34} {'executor':<8} {'CPU s per run (rounds)':<28} "
        f"{'mean':>6} {'wall s':>7}  chosen"
    )
    for target in targets:
        for executor in executors:
            cpus, walls = target.cpu[executor], target.wall[executor]
            rounds = " / ".join(f"{value:.3f}" for value in cpus)
            print(
                f"{target.label:<14} {target.versions:<34} {executor:<8} {rounds:<28} "
                f"{statistics.mean(cpus):>6.3f} {statistics.mean(walls):>7.3f}  "
                f"{target.chosen[executor]}"
            )
    rows: list[list[record.Value]] = [
        [
            target.label,
            target.versions,
            executor,
            " / ".join(f"{value:.3f}" for value in target.cpu[executor]),
            round(statistics.mean(target.cpu[executor]), 3),
            round(statistics.mean(target.wall[executor]), 3),
            target.chosen[executor],
        ]
        for target in targets
        for executor in executors
    ]
    columns = ["line", "versions", "executor", "CPU s per run, rounds", "mean", "wall s", "chosen"]
    title = f"{args.runs} warm / {args.plain_runs} plain runs per round, {args.rounds} round(s)"
    record.write("lines", "lines", "", [record.Table(title, columns, rows)])
    if args.json:
        args.json.write_text(json.dumps([vars(t) for t in targets], indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
