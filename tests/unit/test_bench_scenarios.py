"""The pure parts of the bench's fairness and sharding scenarios (bench/fairness.py,
bench/sharding.py): the reconcile period, when a resync counts as under way, throughput and
speedup, and the warm-up CR names that rendezvous hashing gives to each replica."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench import fairness, sharding
from bench.results import table
from runner.control.shards import rendezvous


def test_period_leaves_room_for_convergence() -> None:
    assert fairness.choose_period(100, 1.5, 30) == pytest.approx(1.3 * 1.5 * 100 + 20)
    assert fairness.choose_period(2, 1.0, 30) == 30  # the floor


def test_per_cr_estimate_prefers_the_same_operators_burst() -> None:
    settled = {"n": 10, "settled": True, "settle_s": 25.0, "all_successful_s": 9.0}
    assert fairness.per_cr_estimate(settled, "ours") == 2.5
    never_quiet = {"n": 10, "settled": False, "all_successful_s": 9.0}
    assert fairness.per_cr_estimate(never_quiet, "peer") == 1.8
    assert fairness.per_cr_estimate(None, "peer") == fairness.DEFAULT_PER_CR_S["peer"]


@pytest.mark.parametrize(
    ("runs", "n", "expected"),
    [(2, 10, False), (3, 10, True), (49, 1000, False), (50, 1000, True)],
)
def test_resync_under_way(runs: int, n: int, expected: bool) -> None:
    assert fairness.under_way(runs, n) is expected


def test_throughput_counts_until_the_last_one() -> None:
    assert sharding.throughput(4, 10.0, [11.0, 12.0, 14.0, 12.5]) == pytest.approx(1.0)
    assert sharding.throughput(4, 10.0, [11.0, 12.0]) is None  # not all done
    assert sharding.throughput(0, 10.0, []) is None


def test_speedup_is_relative_to_one_replica() -> None:
    assert sharding.speedups({4: 6.0, 1: 2.0, 2: None}) == {1: 1.0, 2: None, 4: 3.0}
    assert sharding.speedups({2: 3.0}) == {2: None}  # no baseline


def test_warmup_names_give_every_replica_one_cr() -> None:
    members = sharding.identities(4)
    names = sharding.warmup_names("bench-ns", members)
    assert sorted(names.values()) == sorted(members)
    for name, member in names.items():
        assert rendezvous(f"bench-ns/{name}", members) == member


def test_table_shows_fairness_and_sharding_with_ratios() -> None:
    results = {
        "fairness": {
            "ours": {"new_cr_s": 1.0, "resync_wall_s": 50.0},
            "peer": {"new_cr_s": 40.0, "resync_wall_s": 200.0},
        },
        "sharding": {
            "ours": {"io_throughput_1": 1.0, "io_throughput_4": 3.5, "io_speedup_4": 3.5},
            "peer": {"io_throughput_1": 0.5},
        },
    }
    sizes = {"latency": 2, "burst": 6, "scale": 10, "fairness": 100}
    sizes |= {"sharding_io": 60, "sharding_cpu": 20}
    lines = table(results, sizes).splitlines()

    def row(title: str) -> list[str]:
        return next(x for x in lines if x.startswith(title)).split()[-3:]

    assert row("fairness: new CR during a resync") == ["1.00", "40.00", "0.03"]
    assert row("fairness: wall time of the full resync") == ["50.00", "200", "0.25"]
    assert row("sharding, I/O role: 1 replica") == ["1.00", "0.50", "2.00"]
    assert row("sharding, I/O role: 4 replicas") == ["3.50", "-", "-"]
    assert row("sharding, I/O role: speedup 4 replicas") == ["3.50", "-", "-"]


def test_table_says_when_the_resync_was_sampled() -> None:
    sampled = {"resync_runs": 250, "resync_sampled": True, "resync_cpu_full_s": 400.0}
    results = {
        "scale": {
            "ours": {**sampled, "probe_per_cr_s": 0.3, "period_s": 410.0},
            "peer": {
                "resync_runs": 1000,
                "resync_sampled": False,
                "resync_cpu_full_s": 4000.0,
                "period_s": 3000.0,
                "period_capped": True,
            },
        }
    }
    sizes = {"latency": 2, "burst": 6, "scale": 1000, "fairness": 100}
    sizes |= {"sharding_io": 60, "sharding_cpu": 20}
    text = table(results, sizes)
    lines = text.splitlines()

    def row(title: str) -> list[str]:
        return next(x for x in lines if x.startswith(title)).split()[-3:]

    assert row("resync: runs measured") == ["250", "1000", "0.25"]
    assert row("resync: CPU per full resync") == ["400", "4000", "0.10"]
    assert row("scale: probe, time per CR") == ["0.30", "-", "-"]
    assert "scale/ours: the resync's first 250 runs were measured" in text
    assert "scale/peer: the resync's" not in text
    assert "scale/peer: its probe asked for a longer period than the greatest (3000 s)" in text
    assert "scale/ours: its probe" not in text


def test_the_lines_scenario_reads_which_executor_the_operator_chose(tmp_path: Path) -> None:
    from bench import lines

    log = tmp_path / "operator.log"
    log.write_text(
        '{"msg": "executor: warm (fork server, started and proved by a canary with the first'
        ' run), ansible-core 2.18.19, no memory limit known"}\n'
        '{"msg": "executor: warm (fork server), ansible-core 2.18.19, 17 patches"}\n'
    )
    assert lines.chosen(log) == "warm, 17 patches"
    with log.open("a") as out:
        out.write('{"msg": "warm executor given up: patch direct failed: x"}\nnot json\n')
    assert lines.chosen(log) == "plain: warm executor given up: patch direct failed: x"
    log.write_text('{"msg": "executor: warm (fork servers), no memory limit known"}\n')
    assert lines.chosen(log) == "warm (fork servers), no memory limit known"
    assert lines.chosen(None) == "?"
