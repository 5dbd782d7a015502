"""Which local-connection commands a playbook job hands to the module server itself
(runner/ansible/direct.py)."""

from __future__ import annotations

import shlex

import pytest

from runner.ansible.warm.patches.direct import module_command

CLIENT = "/tmp/operator-runner-warm-x/python"


def _sh(inner: str) -> str:  # as ansible-core's _low_level_execute_command builds it
    return f"/bin/sh -c {shlex.quote(inner)}"


def test_a_pipelined_module_command_is_recognised() -> None:
    assert module_command(_sh(f"{CLIENT} && sleep 0"), CLIENT) == {}


def test_environment_assignments_before_the_interpreter_are_kept() -> None:
    inner = f"FOO={shlex.quote('b a r')} LANG=C {CLIENT} && sleep 0"
    assert module_command(_sh(inner), CLIENT) == {"FOO": "b a r", "LANG": "C"}


@pytest.mark.parametrize(
    "cmd",
    [
        _sh(f"{CLIENT} /root/.ansible/tmp/x/AnsiballZ_ping.py && sleep 0"),  # not pipelined
        _sh("/usr/bin/python3 && sleep 0"),  # another interpreter
        _sh(f"sudo -H -S -n -u bob {CLIENT} && sleep 0"),  # become
        _sh(f"{CLIENT} && sleep 0; rm -rf /tmp/x"),
        _sh(f"cd /tmp && {CLIENT} && sleep 0"),
        _sh("echo ~ && sleep 0"),
        f"/bin/sh -c '{CLIENT} && sleep 0",  # unbalanced quote
        f"{CLIENT} && sleep 0",
        ["/bin/sh", "-c", f"{CLIENT} && sleep 0"],
    ],
)
def test_anything_else_runs_as_before(cmd: object) -> None:
    assert module_command(cmd, CLIENT) is None
