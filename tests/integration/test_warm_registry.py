"""Every patch of the warm executor's registry is installed in its phase, in its order, on the
running line: a real server (both kinds, as the operator starts it) reports what each phase
installed (status.json), and the report is compared with the registry. No cluster needed."""

from __future__ import annotations

import json
from importlib import metadata
from pathlib import Path

import pytest

from runner.ansible.warm import jobenv
from runner.ansible.warm.patches import registry
from runner.ansible.warm.pool import WarmPool

pytestmark = pytest.mark.lines

#: Patches that may say they have nothing to do here (their install returns False): profiling
#: without $OPERATOR_RUNNER_PROFILE; immortal objects before CPython 3.12.
MAY_BE_UNUSED = {"profile-workers", "immortal"}


def test_every_registered_patch_is_installed_in_its_phase(tmp_path: Path) -> None:
    line = registry.line_of(metadata.version("ansible-core"))
    pool = WarmPool({"ANSIBLE_LOCAL_TEMP": str(tmp_path)})
    try:
        started = pool.wait_ready(timeout=300)
        assert started.failure is None, started.failure
        report = json.loads((pool.dir / jobenv.STATUS_FILE).read_text())
    finally:
        pool.stop()
    assert report["line"] == line and report["skipped"] == []  # every patch verified here
    phases: dict[str, list[str]] = report["phases"]
    assert list(phases) == [phase for phase, _, _ in registry.PHASES if phase in phases]
    for phase, _, _ in registry.PHASES:
        expected = [
            patch.name
            for patch in registry.in_phase(phase)
            if line in patch.verified_on and patch.name not in report["unused"]
        ]
        assert phases.get(phase, []) == expected, phase
    for patch in registry.PATCHES:
        if line in patch.absent_on:
            assert patch.name not in report["installed"], patch.name
        elif patch.name in report["unused"]:
            assert patch.name in MAY_BE_UNUSED, f"{patch.name} did nothing on {line}"
        else:
            assert patch.name in phases[patch.phase], patch.name
