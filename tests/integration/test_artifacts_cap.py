"""The runs' folders bounded across CRs (runner/ansible/retention.py), on a real operator: the
global cap removes the first finished runs whatever their CR, keeps each CR's latest run and
the first failed run of a failing CR until it succeeds, and bounds the root's bytes; without
job events a run's folder keeps stdout but no event files.

The Echo seed's bytes per run, with and without job events, are printed (run with -s)."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from . import kit
from .conftest import Cluster
from .kit import PROJECT, crd, install_crd, temporary_namespace, wait_for

pytestmark = pytest.mark.integration

GROUP = "artifacts.operator-runner.dev"
WATCHES = PROJECT / "watches-artifacts.yaml"
KINDS = ("Cycler", "Flaky")
CYCLERS = ("c0", "c1", "c2")
REPO = Path(__file__).resolve().parents[2]
MAX_RUNS = 10
RAN = re.compile(r"ran \w+ in .*\(artifacts: (.+)\)$")  # the reconciler's line after a run


@pytest.fixture(scope="module")
def env(cluster: Cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[kit.Env]:
    tmp = tmp_path_factory.mktemp("artifacts")
    with cluster.api_client() as api, temporary_namespace(cluster, "arts") as namespace:
        for kind in KINDS:
            install_crd(api, crd(GROUP, kind))
        environment = kit.Env(cluster, api, namespace, tmp, group=GROUP, watches=WATCHES)
        try:
            yield environment
        finally:
            environment.stop()
            for kind in KINDS:
                cluster.kubectl(
                    "delete", "crd", f"{kind.lower()}s.{GROUP}", "--wait=false", check=False
                )


def runs_dir(root: Path, ns: str, kind: str, name: str) -> Path:
    return root / GROUP / "v1" / kind / ns / name / "artifacts"


def run_folders(root: Path) -> list[Path]:
    """Every run's folder under the root (not the `latest` and `first-failed` links)."""
    return [p for p in root.glob("*/*/*/*/*/artifacts/*") if p.is_dir() and not p.is_symlink()]


def size(path: Path) -> int:
    return sum(f.lstat().st_size for f in path.rglob("*") if not f.is_dir())


def logged_runs(op: kit.RunningOperator, name: str) -> list[str]:
    """The run folders of CR `name`, in the order its runs ended (its runs never overlap)."""
    found = []
    for line in op.log_lines():
        ran = RAN.match(str(line.get("msg", "")))
        if ran and line.get("name") == name:
            found.append(Path(ran.group(1)).name)
    return found


def cycler_runs(op: kit.RunningOperator) -> int:
    return sum(len(logged_runs(op, name)) for name in CYCLERS)


def test_the_oldest_runs_go_first_and_the_first_failure_stays(env: kit.Env) -> None:
    env.start(args=(f"--max-artifacts-runs={MAX_RUNS}", "--max-artifacts-bytes=0"))
    root = env.op.artifacts
    # A CR that fails, and is retried (failing) with backoff
    env.create("Flaky", "bad", {"fail": True})
    wait_for(lambda: len(logged_runs(env.op, "bad")) >= 3, timeout=90, what="3 failed runs")
    bad = runs_dir(root, env.ns, "Flaky", "bad")
    first = logged_runs(env.op, "bad")[0]
    assert os.readlink(bad / "first-failed") == first
    # Three CRs that run again every second, far past the cap
    for name in CYCLERS:
        env.create("Cycler", name)
    wait_for(lambda: cycler_runs(env.op) >= 4 * MAX_RUNS, timeout=180, what="many runs")
    # the first failure outlived runs of every CR that finished after it
    assert (bad / first).is_dir(), sorted(p.name for p in bad.iterdir())
    assert os.readlink(bad / "first-failed") == first
    # and goes once a later run of the CR succeeds: first the link, then (oldest) the folder
    env.patch_spec("Flaky", "bad", {"fail": False})
    env.wait_condition("Flaky", "bad", timeout=90)
    wait_for(lambda: not (bad / "first-failed").is_symlink(), timeout=30, what="the link gone")
    past = cycler_runs(env.op)
    wait_for(lambda: cycler_runs(env.op) >= past + 2 * MAX_RUNS, timeout=120, what="more runs")
    assert not (bad / first).exists()
    ended = logged_runs(env.op, "bad")
    env.stop()

    left = run_folders(root)
    assert len(left) <= MAX_RUNS, sorted(p.name for p in left)
    # the CR that stopped running keeps its latest run only: its older ones were the oldest
    assert sorted(p.name for p in bad.iterdir() if not p.is_symlink()) == [ended[-1]]
    # each Cycler keeps its newest runs: the global cap removed its oldest first
    for name in CYCLERS:
        logged = logged_runs(env.op, name)
        folder = runs_dir(root, env.ns, "Cycler", name)
        kept = sorted(p.name for p in folder.iterdir() if not p.is_symlink())
        # a run cancelled by the stop may have ended without its log line: the newest, then
        seen = [k for k in kept if k in logged]
        assert seen and seen == logged[-len(seen) :], (name, kept, logged[-MAX_RUNS:])
        assert kept[: len(seen)] == seen and len(kept) - len(seen) <= 1, (kept, logged[-3:])
        assert len(logged) > len(kept)

    # The byte cap: room for about four runs of the largest size seen, the runs' cap off
    largest = max(size(p) for p in left)
    cap = 4 * largest + largest // 2
    env.start(args=("--max-artifacts-runs=0", f"--max-artifacts-bytes={cap}"))
    root = env.op.artifacts
    wait_for(lambda: cycler_runs(env.op) >= 4 * MAX_RUNS, timeout=180, what="many runs")
    env.stop()
    left = run_folders(root)
    total = sum(size(p) for p in left)
    assert total <= cap, (total, cap, len(left))
    assert len(left) < cycler_runs(env.op) / 2  # most went
    print(f"\n{len(left)} runs, {total} bytes (cap {cap}); the whole root: {size(root)} bytes")


def test_no_job_events_keeps_stdout_only(
    cluster: Cluster, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """The Echo seed (seed 000) with and without job events: the bytes of its run's folder."""
    cluster.kubectl("apply", "-f", str(REPO / "crds"))
    echo = kit.CrKind("app.my.domain", "v1", "echoes", "Echo")
    tmp = tmp_path_factory.mktemp("echo-events")
    sizes = {}
    with cluster.api_client() as api, temporary_namespace(cluster, "evts") as namespace:
        env = kit.Env(cluster, api, namespace, tmp, watches=REPO / "watches.yaml")
        for events in ("true", "false"):
            name = f"echo-{events}"
            env.start(args=(f"--artifacts-job-events={events}",))
            try:
                env.create(echo, name, {"command": "echo hello world!"})
                env.wait_condition(echo, name)
            finally:
                env.stop()
            runs = env.op.artifacts / "app.my.domain" / "v1" / "Echo" / namespace / name
            run = (runs / "artifacts" / "latest").resolve()
            assert (run / "stdout").stat().st_size > 0
            events_files = list((run / "job_events").glob("*"))
            assert bool(events_files) == (events == "true"), events_files
            sizes[events] = size(run)
    assert sizes["false"] < sizes["true"]
    print(f"\nEcho run folder: {sizes['true']} bytes with job events, {sizes['false']} without")
