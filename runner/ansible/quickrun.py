"""Quick runs: a playbook run on the request path (admission), without ansible-runner.

An admission webhook answers while the API server waits, so its run takes the shortest way:
`ansible-playbook` (the warm fork server's client when it is up, the real program otherwise) is
started directly as an asyncio subprocess, with exactly the environment ansible-runner gives a
run (its display callback included, so the fork server takes the job). The callback writes each
job event as a file into the run's own folder (`AWX_ISOLATED_DATA_DIR/job_events/`), which is
read once the job has ended and folded into a `RunSummary` as ansible-runner's events are. What
this skips: ansible-runner's pexpect pty and its polling, its artifact folder (the run's folder
is removed at the end) and its per-run configuration; ~0.3 s of a warm run.

The role runs exactly as Ansible runs it: the same playbook, inventory, extra vars file
(`-e @file`, `!unsafe` tags intact) and `--ansible-args`. A run that is cancelled (the webhook's
deadline) has its process group sent SIGTERM (the client relays it to the job), then SIGKILL.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import shutil
import signal
import tempfile
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from runner.ansible.results import RunSummary, apply_event

KILL_AFTER = 2.0  # seconds between SIGTERM and SIGKILL of a cancelled run
TAIL_LINES = 15


def job_events(folder: Path) -> list[dict[str, Any]]:
    """The job events the display callback wrote into `folder/job_events`, in order."""
    events = []
    for path in (folder / "job_events").glob("*-partial.json"):
        try:
            event = json.loads(path.read_text(encoding="utf-8"))
        except (OSError, ValueError):  # a job killed while writing one
            continue
        if isinstance(event, dict):
            events.append(event)
    events.sort(key=lambda event: str(event.get("created", "")))
    return events


def _write_private(path: Path, text: str) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        f.write(text)


def _tail(path: Path) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""
    return "\n".join(text.rstrip().splitlines()[-TAIL_LINES:])


async def _stop(process: asyncio.subprocess.Process) -> None:
    """SIGTERM to the run's process group, SIGKILL if it is still there KILL_AFTER s later."""
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), KILL_AFTER)
            return
        except TimeoutError:
            continue


async def run_quick(
    binary: str,
    playbook: Path,
    inventory: Sequence[str],
    extravars_text: str,
    env: Mapping[str, str],
    tmp_root: Path,
    cmdline: Sequence[str] = (),
) -> tuple[int | None, RunSummary, str]:
    """Run `playbook` with `binary`; its exit code (None when cancelled), what its events
    say, and the end of its output when it did not finish."""
    folder = Path(tempfile.mkdtemp(prefix="quick-", dir=tmp_root))
    try:
        extravars = folder / "extravars"
        _write_private(extravars, extravars_text)
        args = [str(playbook)]
        for source in inventory:
            args += ["-i", source]
        args += ["-e", f"@{extravars}", *cmdline]
        output = folder / "stdout"
        with output.open("wb") as out:
            process = await asyncio.create_subprocess_exec(
                binary,
                *args,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out,
                stderr=asyncio.subprocess.STDOUT,
                env={
                    **env,
                    "AWX_ISOLATED_DATA_DIR": str(folder),
                    "ANSIBLE_CACHE_PLUGIN_CONNECTION": str(folder / "fact_cache"),
                },
                cwd=str(playbook.parent),
                start_new_session=True,
            )
        try:
            rc = await process.wait()
        except asyncio.CancelledError:
            await asyncio.shield(_stop(process))
            raise
        summary = RunSummary()
        for event in job_events(folder):
            apply_event(summary, event)
        tail = "" if summary.finished and rc == 0 else _tail(output)
        return rc, summary, tail
    finally:
        shutil.rmtree(folder, ignore_errors=True)
