"""Quick runs (runner/ansible/quickrun.py): the display callback's event files, read."""

from __future__ import annotations

import json
from pathlib import Path

from runner.ansible.quickrun import job_events
from runner.ansible.results import RunSummary, apply_event


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
