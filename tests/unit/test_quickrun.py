"""Quick runs (runner/ansible/quickrun.py): the display callback's event files, read."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

from runner.ansible.quickrun import job_events
from runner.ansible.results import RunSummary, apply_event
from runner.ansible.warm.attempt import Hold, WarmAttempt


async def given_back(held: list[int]) -> None:
    """Until every hold is given back after `close()`: it cancels the jobs still starting ahead,
    whose holds go when the cancellation reaches them (the loop's next turns) or, for an
    attempt still being made in a thread, when it is made; on a loaded machine that is after
    `close()` returns (seen on 2.19 and 2.20 in a cold make test)."""
    async with asyncio.timeout(10):
        while held:
            await asyncio.sleep(0.01)


def test_events_are_read_in_order_and_fold_into_a_summary(tmp_path: Path) -> None:
    events = tmp_path / "job_events"
    events.mkdir()
    written = [
        {"event": "playbook_on_start", "created": "2026-12-04T10:00:00.000001", "event_data": {}},
        {
            "event": "runner_on_failed",
            "created": "2026-12-04T10:00:00.500000",
            "event_data": {"task": "check", "res": {"msg": "the name is taken"}},
        },
        {
            "event": "playbook_on_stats",
            "created": "2026-12-04T10:00:01.000000",
            "event_data": {"failures": {"localhost": 1}, "ok": {}},
        },
    ]
    for number, event in enumerate(reversed(written)):
        (events / f"{number}-partial.json").write_text(json.dumps(event))
    (events / "9-partial.json").write_text('{"event": "runner_on_o')  # killed while writing
    read = job_events(tmp_path)
    assert [e["event"] for e in read] == [e["event"] for e in written]
    summary = RunSummary()
    for event in read:
        apply_event(summary, event)
    assert summary.finished and summary.failures == ["check: the name is taken"]
    assert job_events(tmp_path / "none") == []


FAKE_PLAYBOOK = r"""#!PYTHON
# ansible-playbook's stand-in: counts its starts, reads its extra vars (-e @file, a named pipe
# that is written once a request comes), answers them as a job event, sleeps when asked.
import json, os, sys, time
folder = os.environ["AWX_ISOLATED_DATA_DIR"]
with open(os.environ["STARTS"], "a") as starts:
    starts.write("x")
source = sys.argv[sys.argv.index("-e") + 1][1:]
extra = json.loads(open(source).read())
time.sleep(extra.get("sleep", 0))
os.makedirs(os.path.join(folder, "job_events"))
events = [
    {"event": "runner_on_ok", "created": "2026-01-01T00:00:01",
     "event_data": {"task_action": "operator_sdk.util.admission",
                    "res": {"admission": {"allowed": False, "message": extra["say"]}}}},
    {"event": "playbook_on_stats", "created": "2026-01-01T00:00:02", "event_data": {}},
]
for number, event in enumerate(events):
    with open(os.path.join(folder, "job_events", f"{number}-partial.json"), "w") as f:
        json.dump(event, f)
"""


def test_jobs_are_started_ahead_and_a_cancelled_run_is_stopped(tmp_path: Path) -> None:
    import asyncio
    import sys

    from runner.ansible.quickrun import JobSpec, QuickRunner

    fake = tmp_path / "ansible-playbook"
    fake.write_text(FAKE_PLAYBOOK.replace("PYTHON", sys.executable))
    fake.chmod(0o700)
    starts = tmp_path / "starts"
    starts.write_text("")
    playbook = tmp_path / "site.yml"
    playbook.write_text("[]\n")
    held: list[int] = []

    def attempt() -> WarmAttempt:
        held.append(1)
        return WarmAttempt(Hold(None, held.pop), lambda reason: None)

    def spec_for(attempt: object, path: Path, env: object, cmdline: object) -> JobSpec:
        return JobSpec(str(fake), path, ("hosts",), (("STARTS", str(starts)),))

    async def go() -> None:
        runner = QuickRunner(attempt, spec_for, tmp_path)
        ended = await runner.run(playbook, '{"say": "first"}', {}, ())
        assert ended.rc == 0 and ended.summary.answers == [{"allowed": False, "message": "first"}]
        async with asyncio.timeout(10):
            while starts.read_text() != "xx":  # the next job, started ahead, waits for its vars
                await asyncio.sleep(0.01)
        assert len(runner._ready) == 1
        ended = await runner.run(playbook, '{"say": "second"}', {}, ())
        assert ended.summary.answers == [{"allowed": False, "message": "second"}]
        async with asyncio.timeout(10):
            while starts.read_text() != "xxx":  # the second run took the waiting job
                await asyncio.sleep(0.01)
        task = asyncio.create_task(runner.run(playbook, '{"say": "late", "sleep": 60}', {}, ()))
        await asyncio.sleep(0.5)
        task.cancel()
        async with asyncio.timeout(10):
            with pytest.raises(asyncio.CancelledError):
                await task
        runner.close()
        await given_back(held)  # every hold on the warm executor
        assert [p for p in tmp_path.iterdir() if p.name.startswith("quick-")] == []

    asyncio.run(go())


FAILING_WARM_PLAYBOOK = r"""#!PYTHON
# A warm job whose patch fails (it records it where $OPERATOR_RUNNER_WARM_FAILURES says, as
# warm/patches/guard.py does, and fails); a plain job answers.
import json, os, sys
folder = os.environ["AWX_ISOLATED_DATA_DIR"]
with open(os.environ["STARTS"], "a") as starts:
    starts.write("w" if os.environ.get("OPERATOR_RUNNER_WARM_FAILURES") else "p")
source = sys.argv[sys.argv.index("-e") + 1][1:]
extra = json.loads(open(source).read())
record = os.environ.get("OPERATOR_RUNNER_WARM_FAILURES")
if record:
    with open(record, "a") as f:
        f.write(json.dumps({"patch": "direct", "error": "AttributeError: gone", "redo": True}))
        f.write("\n")
    sys.exit(2)
os.makedirs(os.path.join(folder, "job_events"))
event = {"event": "runner_on_ok", "created": "2026-01-01T00:00:01",
         "event_data": {"task_action": "operator_sdk.util.admission",
                        "res": {"admission": {"allowed": True, "message": extra["say"]}}}}
with open(os.path.join(folder, "job_events", "0-partial.json"), "w") as f:
    json.dump(event, f)
"""


def test_a_patch_failing_in_a_warm_job_gives_warm_up_and_runs_it_again_plain(
    tmp_path: Path,
) -> None:
    """The warm executor's fence holds for quick runs: the attempt gives the warm executor up,
    the job started ahead on it is stopped, and the same request is answered by a plain job;
    the next runs and jobs started ahead are plain; every hold is given back."""
    import asyncio
    import sys

    from runner.ansible.quickrun import JobSpec, QuickRunner

    fake = tmp_path / "ansible-playbook"
    fake.write_text(FAILING_WARM_PLAYBOOK.replace("PYTHON", sys.executable))
    fake.chmod(0o700)
    starts = tmp_path / "starts"
    starts.write_text("")
    playbook = tmp_path / "site.yml"
    playbook.write_text("[]\n")
    held: list[int] = []
    told: list[str] = []
    records = tmp_path / "failures"
    records.mkdir()
    pool: Any = SimpleNamespace(failures=records, env={})

    def attempt() -> WarmAttempt:
        held.append(1)
        return WarmAttempt(Hold(None if told else pool, held.pop), told.append)

    def spec_for(attempt: WarmAttempt, path: Path, env: object, cmdline: object) -> JobSpec:
        env_items = (("STARTS", str(starts)), ("KIND", "warm" if attempt.warm else "plain"))
        return JobSpec(str(fake), path, ("hosts",), env_items, (), warm=attempt.warm)

    async def go() -> None:
        runner = QuickRunner(attempt, spec_for, tmp_path)
        ended = await runner.run(playbook, '{"say": "plain"}', {}, ())
        assert ended.rc == 0 and ended.summary.answers == [{"allowed": True, "message": "plain"}]
        assert told == ["patch direct failed in a run: AttributeError: gone"]
        async with asyncio.timeout(10):
            while runner._starting or len(runner._ready) != 1:  # the plain job started ahead
                await asyncio.sleep(0.01)
        assert [dict(spec.env)["KIND"] for spec in runner._ready] == ["plain"]
        ended = await runner.run(playbook, '{"say": "again"}', {}, ())
        assert ended.summary.answers == [{"allowed": True, "message": "again"}]
        assert len(told) == 1
        runner.close()
        await given_back(held)
        # the failed run, and maybe a job started ahead on warm before the failure was known
        # (stopped unused); plain only from then on
        assert starts.read_text().rstrip("p") in ("w", "ww")

    asyncio.run(go())
