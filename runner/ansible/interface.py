"""The Ansible side as the reconciler sees it: a run request in, a run result out.

As ansible-runner's interface.py: the executor, the warm pool (fork servers) and the
artifacts' files stay behind it. Importing this module does not import ansible_runner.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from runner.ansible.results import RunSummary
from runner.util.redact import SecretValues


class LogEvents(enum.Enum):
    """`--ansible-log-events`: which job events go to the operator's log."""

    TASKS = "Tasks"
    EVERYTHING = "Everything"
    NOTHING = "Nothing"


@dataclass(frozen=True)
class RunRequest:
    private_dir: Path
    ident: str
    playbook: Path
    extravars_text: str
    verbosity: int = 0
    cmdline: tuple[str, ...] = ()
    rotate: int = 20
    envvars: Mapping[str, str] = field(default_factory=dict)
    log_events: LogEvents = LogEvents.TASKS
    log_extra: Mapping[str, Any] = field(default_factory=dict)
    echo: bool = False  # Ansible's own output (tasks, diffs) to our stdout as well
    # the values the run must not show (the proxy adds the Secrets the run reads or writes);
    # the executor masks them in its log lines, the failures and the output's tail
    secrets: SecretValues = field(default_factory=SecretValues)


@dataclass
class RunResult:
    status: str  # ansible-runner's: successful, failed, timeout, canceled, error
    rc: int | None
    summary: RunSummary
    stdout_tail: str = ""

    @property
    def ok(self) -> bool:
        return self.summary.finished and not self.summary.failures and self.status == "successful"


def role_playbook_text(role: str, skip_facts: bool = False) -> str:
    """The playbook that runs a `role:` watch, as operator-sdk's (ansible-runner's `--role`)
    does: facts gathered as Ansible's `gathering` setting says (by default they are), or not at
    all with `skip_facts` (operator-sdk's `--role-skip-facts`, given when ANSIBLE_GATHERING is
    `explicit`)."""
    return (
        "---\n"
        "- hosts: localhost\n" + ("  gather_facts: false\n" if skip_facts else "") + "  roles:\n"
        f"    - role: {json.dumps(role)}\n"
    )


def skip_facts(environ: Mapping[str, str]) -> bool:
    """operator-sdk's rule (internal/ansible/runner/runner.go): role runs skip gathering facts
    when ANSIBLE_GATHERING is exactly `explicit`."""
    return environ.get("ANSIBLE_GATHERING") == "explicit"


class Runs(Protocol):
    """What runs Ansible for the reconciler: `runner.ansible.executor.Executor`, or a fake."""

    async def run(self, request: RunRequest) -> RunResult: ...


@dataclass(frozen=True)
class QuickRequest:
    """A run on the request path (an admission webhook's): no ansible-runner, no artifacts
    kept (quickrun.py); cancelling the call stops the run."""

    playbook: Path
    extravars_text: str
    envvars: Mapping[str, str] = field(default_factory=dict)
    cmdline: tuple[str, ...] = ()
    verbosity: int = 0


class QuickRuns(Protocol):
    """What runs Ansible for the admission webhooks: the Executor, or a fake."""

    async def run_quick(self, request: QuickRequest) -> RunResult: ...

    async def prepare_quick(self, request: QuickRequest) -> bool:
        """Get ready for runs like `request` (its extra vars are ignored): a job started ahead,
        returned once it can take a request at once (False: it could not be made ready)."""
