"""The ansible-core lines a project can be written for, and the one ``init`` picks.

The lines of the one list, runner/util/lines.txt: 2.15 (operator-sdk v1.31 to v1.35's images)
to 2.21 (the current release). A project
records its line in PROJECT, the Makefile (``ANSIBLE_CORE``, the image's build argument), the
Dockerfile (which checks that the operator-runner image it is built on has that line) and
requirements.txt (the pip way: ansible-core and the ``ansible`` community package of the line,
for kubernetes.core).
"""

from __future__ import annotations

import importlib.metadata
from typing import Final

from runner.util import lines

from .names import ScaffoldError

__all__ = ["ANSIBLE_PACKAGE", "DEFAULT_LINE", "LINES", "check_line", "installed_line"]

LINES: Final = lines.NAMES
# The line today's operator-sdk images ship: roles moved over run unmodified.
DEFAULT_LINE: Final = lines.DEFAULT
# ansible-core line -> the major version of the `ansible` community package built on it
ANSIBLE_PACKAGE: Final = {line.name: line.ansible_major for line in lines.TABLE.lines}


def check_line(line: str) -> str:
    """``line`` (``2.18``) when it is a supported ansible-core line, else a clear error."""
    if line not in LINES:
        raise ScaffoldError(
            f"--ansible-core {line!r} is not an ansible-core line operator-runner supports; "
            f"the lines are {', '.join(LINES)} (default {DEFAULT_LINE})"
        )
    return line


def installed_line() -> str:
    """The line of the ansible-core installed beside the runner, when it is a supported one;
    otherwise (none installed, or another line) the default line."""
    try:
        version = importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return DEFAULT_LINE
    line = ".".join(version.split(".")[:2])
    return line if line in LINES else DEFAULT_LINE
