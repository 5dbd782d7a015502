"""The ansible-core lines operator-runner supports, read from `lines.txt` beside this module:
the one list of the lines, their Pythons, their `ansible` community release (where
kubernetes.core comes from), their image's Debian suite, and the default line. hack/lines.sh
reads the same file for the shell scripts.

Standard library only, and free of the runner's imports: hack/install_collections.py loads this
file by its path (in the base image's build, before the runner is installed), and the warm
executor's registry reads it in the fork server.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

FILE = Path(__file__).with_name("lines.txt")


@dataclass(frozen=True)
class Line:
    name: str  # "2.18"
    pythons: tuple[str, ...]  # the Python versions it runs on, newest first
    ansible: str  # the `ansible` community release of the line: "11.13.0"
    ansible_sha256: str  # of that release's wheel
    kubernetes_core: str  # the kubernetes.core version inside it
    debian: str  # the Debian suite of the line's image

    @property
    def ansible_major(self) -> int:
        return int(self.ansible.split(".")[0])


@dataclass(frozen=True)
class Lines:
    lines: tuple[Line, ...]
    default: str
    debian_python: dict[str, str]  # suite -> its python3's version

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(line.name for line in self.lines)

    def get(self, name: str) -> Line | None:
        return next((line for line in self.lines if line.name == name), None)


def parse(text: str, where: str = "lines.txt") -> Lines:
    """The table; a malformed row is a ValueError naming it."""
    lines: list[Line] = []
    default = ""
    debian: dict[str, str] = {}
    for number, raw in enumerate(text.splitlines(), 1):
        words = raw.split("#", 1)[0].split()
        if not words:
            continue
        kind, fields = words[0], words[1:]
        if kind == "line" and len(fields) == 6:
            name, pythons, ansible, sha256, core, suite = fields
            lines.append(Line(name, tuple(pythons.split(",")), ansible, sha256, core, suite))
        elif kind == "default" and len(fields) == 1:
            default = fields[0]
        elif kind == "debian" and len(fields) == 2:
            debian[fields[0]] = fields[1]
        else:
            raise ValueError(f"{where}:{number}: not a line, default or debian row: {raw!r}")
    names = [line.name for line in lines]
    if default not in names:
        raise ValueError(f"{where}: the default line {default!r} is not one of {names}")
    for line in lines:
        if line.debian not in debian:
            raise ValueError(f"{where}: line {line.name}'s Debian suite {line.debian} has no row")
    return Lines(tuple(lines), default, debian)


TABLE = parse(FILE.read_text(encoding="utf-8"), str(FILE))
#: Every line, oldest first.
NAMES = TABLE.names
DEFAULT = TABLE.default


def line_of(version: str) -> str:
    """ "2.18" for "2.18.19" (or "2.18.0rc1")."""
    major, _, rest = version.partition(".")
    minor = "".join(c for c in rest.partition(".")[0] if c.isdigit())
    return f"{major}.{minor}"
