"""The one reading of a command the local connection runs: `SHELL -c SCRIPT` (ansible-core's
`_low_level_execute_command` wraps every command in the connection's executable that way)."""

from __future__ import annotations

import shlex


def shell_script(cmd: object) -> tuple[str, str] | None:
    """(SHELL, SCRIPT) of `SHELL -c SCRIPT`, None for anything else."""
    if not isinstance(cmd, str):
        return None
    try:
        words = shlex.split(cmd)
    except ValueError:
        return None
    if len(words) != 3 or words[1] != "-c":
        return None
    return words[0], words[2]
