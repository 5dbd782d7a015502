"""The warm executor's canary (runner/ansible/warm/canary.py): its verdict on a run's events."""

from __future__ import annotations

import json
from pathlib import Path

from runner.ansible.warm import canary


def _events(artifacts: Path, *events: dict[str, object]) -> Path:
    folder = artifacts / "job_events"
    folder.mkdir(parents=True)
    for number, event in enumerate(events):
        (folder / f"{number}-x.json").write_text(json.dumps(event))
    return artifacts


def _ok(task: str, res: dict[str, object]) -> dict[str, object]:
    return {"event": "runner_on_ok", "event_data": {"task": task, "res": res}}


def test_the_expected_result_passes(tmp_path: Path) -> None:
    artifacts = _events(
        tmp_path,
        _ok("canary module", {"job": "module", "text": "a,b,c"}),
        _ok("canary result", {"msg": canary.EXPECTED}),
    )
    assert canary.verdict("successful", artifacts) is None


def test_anything_else_says_what(tmp_path: Path) -> None:
    cold = _events(tmp_path / "cold", _ok("canary result", {"msg": "module a,b,c 6 "}))
    assert "instead of" in str(canary.verdict("successful", cold))
    failed = _events(
        tmp_path / "failed",
        {"event": "runner_on_failed", "event_data": {"task": "canary module", "res": {"msg": "x"}}},
    )
    assert canary.verdict("failed", failed) == "the canary run failed: canary module: x"
    assert "without its result" in str(canary.verdict("failed", _events(tmp_path / "none")))


def test_the_project_holds_its_playbook_module_and_template(tmp_path: Path) -> None:
    playbook = canary.write_project(tmp_path / "project")
    assert playbook.read_text() == canary.PLAYBOOK
    assert (tmp_path / "project" / "library" / "warm_canary.py").read_text() == canary.MODULE
    assert (tmp_path / "project" / "templates" / "canary.j2").read_text() == canary.TEMPLATE
