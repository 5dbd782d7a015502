"""RHEL package names to Debian's, for dnf.py, asking apt what Debian has.

rpm-names.txt beside this file lists the names that differ; the rules in `Names.debian` cover
the rest (architecture suffixes, python3X- prefixes, -devel, capitals, versions).
"""

from __future__ import annotations

import fnmatch
import re
import subprocess
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

NAMES = Path(__file__).resolve().with_name("rpm-names.txt")
LISTS = Path("/var/lib/apt/lists")
ARCH = re.compile(r"\.(x86_64|aarch64|noarch|i686|ppc64le|s390x|src)$")
PYTHON_PREFIX = re.compile(r"^python3\.?\d{1,2}(?=$|-)")
VERSION = re.compile(r"^(?P<name>.+?)-\d[\w.+~]*(-[\w.+~]+)?$")


class Refused(Exception):
    """What the command cannot do here, in one line."""


class Apt(Protocol):
    def fresh(self) -> bool:
        """Whether apt has package lists to read."""

    def known(self, names: Iterable[str]) -> set[str]:
        """Those of `names` apt can install."""

    def installed(self, names: Iterable[str]) -> set[str]:
        """Those of `names` that are installed."""

    def similar(self, stem: str) -> list[str]:
        """Package names that start with `stem`, a few."""

    def upgrades(self) -> list[tuple[str, bool]]:
        """(package, from the security archive) of each upgrade apt would make."""


def load_names(path: Path = NAMES) -> list[tuple[str, list[str]]]:
    """rpm-names.txt: (RHEL name or glob, what follows it), in order."""
    table = []
    for line in path.read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if line and not line.startswith("#"):
            key, *rest = line.split()
            table.append((key, rest))
    return table


def lookup(table: list[tuple[str, list[str]]], name: str) -> list[str] | None:
    for key, rest in table:
        if name == key or fnmatch.fnmatchcase(name, key):
            return rest
    return None


@dataclass
class Names:
    """RHEL names to Debian's: the table, the rules, and apt to ask what exists."""

    table: list[tuple[str, list[str]]]
    apt: Apt
    prog: str

    def debian(self, spec: str, for_removal: bool = False) -> tuple[list[str], list[str]]:
        """(Debian names, notes) for a RHEL package spec; Refused when it has none to install.
        For removal, the names that are installed (none: nothing to remove)."""
        if spec.endswith(".rpm") or "://" in spec:
            base = spec.rsplit("/", 1)[-1]
            if base.startswith("epel-release"):
                return [], [f"{base}: Debian's archive already carries what EPEL adds to RHEL"]
            raise Refused(
                f"{spec}: an .rpm package cannot be installed on Debian; install the Debian "
                "package of the same software (USER root; RUN apt-get install -y <package>)"
            )
        if spec.startswith("@"):
            raise Refused(
                f"{spec}: package groups and modules are RHEL's; name the packages "
                f"({self.prog} install -y PACKAGE...) or use apt-get"
            )
        name = ARCH.sub("", spec.split()[0])
        notes: list[str] = []
        python = PYTHON_PREFIX.match(name)
        if python:
            name = "python3" + name[python.end() :]
            notes.append(f"{spec}: the image has one Python, Debian's python3 (it runs Ansible)")
        if name.startswith("python3-"):
            name = name.lower().replace("_", "-")  # Debian's python3-X are lower case
        entry = lookup(self.table, name)
        if entry is not None:
            return self._entry(spec, entry, notes, for_removal)
        candidates = [name]
        if name.endswith("-devel"):
            stem = name.removesuffix("-devel")
            devel = [f"{stem}-dev" if stem.startswith("lib") else f"lib{stem}-dev", f"{stem}-dev"]
            for spelled in devel:
                if (mapped := lookup(self.table, spelled)) is not None:
                    return self._entry(spec, mapped, notes, for_removal)
            candidates = devel + candidates
        versioned = VERSION.match(name)
        if versioned:
            candidates.append(versioned.group("name"))
        exists = self.apt.installed if for_removal else self.apt.known
        found = exists(candidates)
        for candidate in candidates:
            if candidate in found:
                if versioned and candidate == versioned.group("name"):
                    notes.append(f"{spec}: Debian's version of {candidate}, not RHEL's")
                return [candidate], notes
        if for_removal:
            return [], notes
        similar = self._similar(name.removesuffix("-devel"))
        hint = f"; Debian has {', '.join(similar)}" if similar else ""
        raise Refused(
            f"no Debian package for RHEL's {spec}{hint}: install the one you need with "
            "apt-get (USER root; RUN apt-get install -y <package>)"
        )

    def _similar(self, name: str) -> list[str]:
        """A few Debian names that start as `name` does (all of it, else its first word without
        version digits, unless that says little: python3, lib)."""
        first = re.sub(r"[\d.]+", "", name.split("-")[0])
        for stem in (re.sub(r"[\d.]+$", "", name), first if first not in ("python", "lib") else ""):
            found = [n for n in self.apt.similar(stem) if stem and n.startswith(stem)]
            if found:
                return found[:6]
        return []

    def _entry(
        self, spec: str, entry: list[str], notes: list[str], for_removal: bool
    ) -> tuple[list[str], list[str]]:
        if entry and entry[0] == "-":
            return [], notes + ([] if for_removal else [f"{spec}: {' '.join(entry[1:])}"])
        if entry and entry[0] == "!":
            if for_removal:
                return [], notes
            raise Refused(f"{spec}: {' '.join(entry[1:])}")
        if for_removal:
            return sorted(self.apt.installed(entry)), notes
        return entry, notes


def with_candidate(policy: str) -> set[str]:
    """The packages `apt-cache policy` shows with a candidate version (one apt can install)."""
    found, current = set(), None
    for line in policy.splitlines():
        if line and not line.startswith(" ") and line.endswith(":"):
            current = line[:-1]
        elif current and line.strip().startswith("Candidate:") and "(none)" not in line:
            found.add(current)
    return found


def simulated_upgrades(simulation: str) -> list[tuple[str, bool]]:
    """(package, from a -security archive) of each `Inst` line of `apt-get -s upgrade`."""
    found = []
    for line in simulation.splitlines():
        if m := re.match(r"^Inst (\S+) (?:\[[^\]]*\] )?\((.*)\)", line):
            found.append((m.group(1), "-security" in m.group(2)))
    return found


class SystemApt:
    """Apt as this machine has it."""

    def fresh(self) -> bool:
        return any(LISTS.glob("*_Packages*"))

    def known(self, names: Iterable[str]) -> set[str]:
        names = list(names)
        return (
            with_candidate(_output("apt-cache", "policy", *names)) & set(names) if names else set()
        )

    def installed(self, names: Iterable[str]) -> set[str]:
        names = list(names)
        if not names:
            return set()
        out = _output("dpkg-query", "-W", "-f=${Package} ${db:Status-Abbrev}\n", *names)
        return {line.split()[0] for line in out.splitlines() if " ii" in line}

    def similar(self, stem: str) -> list[str]:
        out = _output("apt-cache", "search", "--names-only", f"^{re.escape(stem)}")
        return sorted(line.split(" - ")[0] for line in out.splitlines())

    def upgrades(self) -> list[tuple[str, bool]]:
        argv = ("apt-get", "-s", "-o", "Debug::NoLocking=1", "upgrade", "--with-new-pkgs")
        return simulated_upgrades(_output(*argv))


def _output(*argv: str) -> str:
    return subprocess.run(argv, capture_output=True, text=True, check=False).stdout
