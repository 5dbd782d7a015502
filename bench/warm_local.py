"""The warm executor without a cluster: CPU per run and the servers' memory.

    python -m bench.warm_local [--runs 10] [--rounds 1]

Starts the warm executor (`WarmPool`, as the operator does, ANSIBLE_PIPELINING=True), runs a
playbook shaped like EchoFlask's role (9 tasks: an assert, 6 module tasks, 2 set_fact; the
module tasks are `ansible.builtin.ping`, so no API server is needed) `--runs` times through
ansible-runner with the warm client, stops the pool, and prints the CPU seconds of everything
it started (getrusage of the reaped children: the servers, their jobs, the clients), once with
no run (start-up alone) and once with the runs, and the difference per run. Before stopping
it, the servers' RSS and PSS (smaps_rollup). With several `--rounds` each figure is repeated
(the machine is shared: compare rounds, not single figures). The rounds are also written as
the bench's record (bench/record.py).
"""

from __future__ import annotations

import argparse
import resource
import shutil
import sys
import tempfile
from pathlib import Path

import ansible_runner

from runner.ansible.warm.pool import WarmPool

from . import record

PLAYBOOK = """\
- hosts: localhost
  gather_facts: false
  tasks:
    - ansible.builtin.assert: {that: "1 == 1", quiet: true}
    - ansible.builtin.ping: {data: "{{ 'a' }}"}
    - ansible.builtin.ping:
    - ansible.builtin.ping:
      register: r1
    - ansible.builtin.ping:
      register: r2
    - ansible.builtin.set_fact: {a: "{{ r1 | string }}"}
    - ansible.builtin.set_fact: {b: "{{ r2 | string }}"}
    - ansible.builtin.ping:
    - ansible.builtin.ping:
      when: false
"""
BASE_ENV = {"ANSIBLE_PIPELINING": "True"}


def smaps(pid: int) -> tuple[float, float]:
    lines = Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines()[1:]
    fields = dict(line.split(":", 1) for line in lines)
    return int(fields["Rss"].split()[0]) / 1024, int(fields["Pss"].split()[0]) / 1024


def children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def session(runs: int) -> tuple[float, list[tuple[float, float]]]:
    """CPU of a pool's whole life with `runs` runs; its servers' (RSS, PSS) after them."""
    start = children_cpu()
    pool = WarmPool(BASE_ENV)
    memory: list[tuple[float, float]] = []
    try:
        started = pool.wait_ready()
        if started.failure is not None:
            raise SystemExit(f"the warm executor did not start: {started.failure}")
        for _ in range(runs):
            private = Path(tempfile.mkdtemp(prefix="warm-local-"))
            try:
                (private / "project").mkdir()
                (private / "project" / "main.yml").write_text(PLAYBOOK)
                (private / "inventory").mkdir()
                hosts = private / "inventory" / "hosts"
                hosts.write_text(
                    "localhost ansible_connection=local "
                    f"ansible_python_interpreter={pool.python_client}\n"
                )
                run = ansible_runner.run(
                    private_data_dir=str(private),
                    playbook="main.yml",
                    project_dir=str(private / "project"),
                    cmdline=str(private / "project" / "main.yml"),
                    inventory=str(hosts),
                    binary=str(pool.playbook_client),
                    envvars={**BASE_ENV, **pool.env},
                    quiet=True,
                )
                if run.status != "successful":
                    raise SystemExit(f"run {run.status}: {run.stdout.read()[-2000:]}")
            finally:
                shutil.rmtree(private, ignore_errors=True)
        memory = [smaps(pool.server_pid)]
    finally:
        pool.stop()
    return children_cpu() - start, memory


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=1)
    args = parser.parse_args()
    rows: list[list[record.Value]] = []
    for round_ in range(args.rounds):
        idle, _ = session(0)
        busy, memory = session(args.runs)
        rss, pss = sum(m[0] for m in memory), sum(m[1] for m in memory)
        print(
            f"start-up {idle:.2f} s CPU; {args.runs} runs {busy:.2f} s CPU: "
            f"{(busy - idle) / args.runs:.3f} s per run; {len(memory)} server(s) after the runs: "
            f"RSS {rss:.1f} MiB, PSS {pss:.1f} MiB",
            flush=True,
        )
        per_run = round((busy - idle) / args.runs, 3)
        rows.append([round_ + 1, round(idle, 2), per_run, round(rss, 1), round(pss, 1)])
    columns = ["round", "start-up CPU s", "CPU s per run", "server RSS MiB", "server PSS MiB"]
    title = f"{args.runs} runs per round"
    record.write("warm_local", "warm_local", "", [record.Table(title, columns, rows)])
    return 0


if __name__ == "__main__":
    sys.exit(main())
