#!/usr/bin/python3 -Es
"""dnf, yum and microdnf on operator-runner's Debian base image, done with apt-get.

A Dockerfile written for operator-sdk's UBI-based image says, as root, `dnf update --security
--bugfix -y`, `dnf install -y openssl`, `yum remove -y subscription-manager`, `yum update -y &&
yum clean all`, `microdnf install -y jq && microdnf clean all`. Here those commands do the same
through apt-get: each says the apt-get command it runs. Package names are RHEL's, mapped to
Debian's (rpm-names.txt beside this file lists the ones that differ, and the rules); a name with
no Debian equivalent stops the build with one line that names the apt package to use instead.

- install, reinstall: apt-get install (update first when the package lists are gone, as dnf
  fetches its metadata); without recommended packages (Debian's Recommends are dnf's weak
  dependencies), unless --setopt=install_weak_deps=True; downloaded packages are not kept (dnf's
  keepcache=0).
- remove, erase, autoremove: apt-get remove of those installed; a package that is not
  installed is nothing to do (dnf says "No match for argument" and succeeds, as here).
- update, upgrade (also -minimal, distro-sync): apt-get update, then apt-get upgrade of every
  package, or of the named ones. --security: only the updates from Debian's security archive;
  --bugfix: Debian stable's updates are all security or bug fixes, so all of them;
  --enhancement, --newpackage alone: Debian stable has none, nothing to do.
- check-update: lists the upgrades; exit 100 when there are some (as dnf).
- clean all: apt-get clean and the package lists removed; clean metadata, clean packages.
- makecache: apt-get update. config-manager, module enable/disable/reset: nothing to do
  (repositories are Debian's apt sources; a Debian package has one version).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

from debnames import LISTS, Apt, Names, Refused, SystemApt, load_names

# What the image runs on: removing one would break it (dnf protects its own packages likewise).
PROTECTED = re.compile(r"^(python3(\.\d+)?(-minimal|-venv)?|libpython3.*|tini|dpkg|apt)$")
APT_GET = (
    "apt-get", "-q", "-y",
    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
)  # fmt: skip
IGNORED_FLAGS = {
    "-y", "--assumeyes", "-q", "--quiet", "-v", "--verbose", "--nodocs", "--best", "--nobest",
    "--allowerasing", "--skip-broken", "--skip-unavailable", "--refresh", "--noplugins",
    "--nogpgcheck", "-C", "--cacheonly", "--obsoletes", "--noautoremove",
}  # fmt: skip
IGNORED_VALUES = {
    "--enablerepo", "--disablerepo", "--repo", "--repoid", "--disableplugin", "--enableplugin",
    "--releasever", "--color", "--config", "-c", "--disableexcludes", "-d", "--debuglevel",
    "-e", "--errorlevel", "--rpmverbosity",
}  # fmt: skip
ADVISORY_VALUES = {"--advisory", "--advisories", "--cve", "--cves", "--bz", "--bzs"}
SEVERITY_VALUES = {"--sec-severity", "--secseverity"}
INSTALL = {"install", "in", "localinstall", "reinstall", "rei"}
REFRESH = {"check-update", "check-upgrade", "makecache", "mc"}
REMOVE = {"remove", "erase", "rm", "autoremove"}
UPGRADE = {
    "update", "upgrade", "up", "update-minimal", "upgrade-minimal", "distro-sync", "dsync",
    "distrosync",
}  # fmt: skip
NOOP = {"config-manager"}
MODULE_NOOP = (["enable"], ["disable"], ["reset"])
ROOT_ERROR = (
    "Error: This command has to be run with superuser privileges (under the root user on most "
    "systems)."
)


@dataclass
class Request:
    command: str
    args: list[str] = field(default_factory=list)
    security: bool = False
    bugfix: bool = False
    other_types: list[str] = field(default_factory=list)  # --enhancement, --newpackage
    weak_deps: bool = False
    notes: list[str] = field(default_factory=list)


@dataclass(frozen=True)
class Run:
    argv: tuple[str, ...]


@dataclass(frozen=True)
class Note:
    text: str


@dataclass(frozen=True)
class DropLists:
    """Remove apt's package lists (dnf's metadata)."""


@dataclass(frozen=True)
class SecurityUpgrade:
    """Upgrade the packages whose update comes from Debian's security archive."""


Action = Run | Note | DropLists | SecurityUpgrade


def parse(argv: list[str], prog: str) -> Request:
    """dnf's command line: options anywhere, the first other word is the command."""
    words: list[str] = []
    req = Request(command="")
    i = 0
    while i < len(argv):
        arg = argv[i]
        i += 1
        if arg == "--":
            words += argv[i:]
            break
        if not arg.startswith("-") or arg == "-":
            words.append(arg)
            continue
        name, eq, value = arg.partition("=")
        takes_value = name in IGNORED_VALUES | ADVISORY_VALUES | SEVERITY_VALUES
        takes_value = takes_value or name in ("--setopt", "-x", "--exclude", "--installroot")
        if takes_value and not eq:
            if i >= len(argv):
                raise Refused(f"{name} needs a value")
            value, i = argv[i], i + 1
        if arg in IGNORED_FLAGS or name in IGNORED_VALUES:
            if name in ("--enablerepo", "--disablerepo", "--repo", "--repoid"):
                req.notes.append(f"{name}={value}: the repositories are Debian's apt sources")
        elif name == "--security":
            req.security = True
        elif name in ("--bugfix", "--bugfixes"):
            req.bugfix = True
        elif name in ("--enhancement", "--enhancements", "--newpackage"):
            req.other_types.append(name)
        elif name in ADVISORY_VALUES | SEVERITY_VALUES:
            req.security = True
            if name in ADVISORY_VALUES:
                req.notes.append(
                    f"{name}={value}: RHEL's advisories do not name Debian's updates; every "
                    "security update is applied instead"
                )
        elif name == "--setopt":
            key, _, setting = value.partition("=")
            if key.split(".")[-1] == "install_weak_deps":
                req.weak_deps = setting.strip().lower() in ("1", "true", "yes", "on")
        elif name in ("-x", "--exclude"):
            req.notes.append(f"{name}={value}: exclusions are not applied on Debian")
        elif name in ("-h", "--help"):
            return Request(command="help")
        elif name == "--version":
            return Request(command="version")
        elif "config-manager" in argv:  # its own options: --set-enabled, --add-repo, ...
            words.append(arg)
        else:
            raise Refused(
                f"option {arg} has no meaning on Debian (the base of this image); leave it out, "
                "or use apt-get (USER root; RUN apt-get ...)"
            )
    if not words:
        raise Refused(f"no command given (e.g. {prog} install -y PACKAGE)")
    req.command, req.args = words[0], words[1:]
    return req


# The package lists, without their translations (dnf's metadata has none; ~30 MB on Debian).
UPDATE = Run(("apt-get", "-q", "-o", "Acquire::Languages=none", "update"))


def refresh_first(req: Request, apt: Apt) -> bool:
    """Whether apt's package lists are fetched before anything else (dnf fetches its metadata
    when it has expired: in a build, always; install also when there are none)."""
    if req.command in UPGRADE | REFRESH:
        return True
    return req.command in INSTALL and not apt.fresh()


def apt_get(req: Request, command: str, *args: str) -> Run:
    recommends = () if req.weak_deps else ("--no-install-recommends",)
    return Run((*APT_GET, command, *recommends, *args))


CLEAN = Run(("apt-get", "clean"))  # dnf keeps no downloaded package (keepcache=0)


def plan(req: Request, names: Names) -> list[Action]:
    """What `req` does, as notes and apt-get commands (the package lists are fresh)."""
    actions: list[Action] = [Note(n) for n in req.notes]
    command, args = req.command, req.args
    if command in INSTALL:
        if not args:
            raise Refused(f"{command}: name the packages to install")
        wanted = _resolve(names, args, actions)
        if wanted:
            again = ("--reinstall",) if command in ("reinstall", "rei") else ()
            actions += [apt_get(req, "install", *again, *wanted), CLEAN]
    elif command in REMOVE:
        actions += _remove(names, req)
    elif command in UPGRADE:
        actions += _upgrade(names, req)
    elif command == "clean":
        what = args[0] if args else "all"
        if what not in ("all", "packages", "metadata", "expire-cache", "dbcache"):
            raise Refused(f"clean {what}: say all, metadata, packages, expire-cache or dbcache")
        if what in ("all", "packages"):
            actions.append(CLEAN)
        if what != "packages":
            actions.append(DropLists())
    elif command in NOOP or (command == "module" and args[:1] in MODULE_NOOP):
        actions.append(Note(f"{command} {' '.join(args)}: nothing to do on Debian"))
    elif command not in REFRESH:
        raise Refused(
            f"{command}: not available on Debian (the base of this image); {names.prog} here "
            "does install, reinstall, remove, autoremove, update, upgrade, check-update, clean, "
            "makecache; for anything else use apt-get (USER root; RUN apt-get ...)"
        )
    return actions


def _resolve(names: Names, specs: list[str], actions: list[Action]) -> list[str]:
    wanted: list[str] = []
    for spec in specs:
        debian, notes = names.debian(spec)
        actions += [Note(n) for n in notes]
        wanted += [d for d in debian if d not in wanted]
    return wanted


def _remove(names: Names, req: Request) -> list[Action]:
    if req.command == "autoremove" and not req.args:
        return [Run((*APT_GET, "autoremove"))]
    actions: list[Action] = []
    found: list[str] = []
    for spec in req.args:
        present, notes = names.debian(spec, for_removal=True)
        actions += [Note(n) for n in notes]
        for name in present:
            if PROTECTED.match(name):
                raise Refused(f"{spec}: {name} is what this image runs on; it stays")
        if not present:
            actions.append(Note(f"No match for argument: {spec} (not installed): nothing to do"))
        found += [d for d in present if d not in found]
    if found:
        actions.append(Run((*APT_GET, "remove", *found)))
    return actions


def _upgrade(names: Names, req: Request) -> list[Action]:
    if req.args:
        actions: list[Action] = []
        wanted = _resolve(names, req.args, actions)
        return [*actions, apt_get(req, "install", "--only-upgrade", *wanted), CLEAN]
    if req.other_types and not (req.security or req.bugfix):
        kinds = ", ".join(req.other_types)
        return [Note(f"{kinds}: Debian stable gets no such updates: nothing to do")]
    if req.security and not req.bugfix:
        return [SecurityUpgrade(), CLEAN]
    if req.security:
        note = "--security --bugfix: Debian stable's updates are security and bug fixes: all"
        return [Note(note), apt_get(req, "upgrade", "--with-new-pkgs"), CLEAN]
    return [apt_get(req, "upgrade", "--with-new-pkgs"), CLEAN]


def execute(actions: list[Action], apt: Apt, prog: str) -> int:
    """Print each note and command, run the commands; 1 on the first that fails."""
    env = {**os.environ, "DEBIAN_FRONTEND": "noninteractive"}
    for action in actions:
        if isinstance(action, Note):
            print(f"{prog}: {action.text}", file=sys.stderr)
            continue
        if isinstance(action, DropLists):
            print(f"{prog}: rm -rf {LISTS}/* (the package lists, dnf's metadata)", file=sys.stderr)
            for path in LISTS.glob("*"):
                if path.name in ("lock", "partial", "auxfiles"):
                    continue
                if path.is_dir():
                    shutil.rmtree(path)
                else:
                    path.unlink()
            continue
        if isinstance(action, SecurityUpgrade):
            wanted = sorted({name for name, security in apt.upgrades() if security})
            print(
                f"{prog}: --security: the updates from Debian's security archive", file=sys.stderr
            )
            if not wanted:
                print(f"{prog}: no security updates: nothing to do", file=sys.stderr)
                continue
            argv: tuple[str, ...] = (*APT_GET, "install", "--only-upgrade", *wanted)
        else:
            argv = action.argv
        print(f"{prog}: {' '.join(argv)}", file=sys.stderr, flush=True)
        rc = subprocess.run(argv, env=env, check=False).returncode
        if rc != 0:
            print(f"{prog}: error: {argv[0]} failed (exit {rc})", file=sys.stderr)
            return 1
    return 0


def main(argv: list[str]) -> int:
    prog = Path(argv[0]).name
    try:
        req = parse(argv[1:], prog)
        if req.command == "help":
            print(__doc__)
            return 0
        if req.command == "version":
            print(f"{prog}: operator-runner's apt-get front end on Debian (see {prog} --help)")
            return 0
        if os.geteuid() != 0:
            print(ROOT_ERROR, file=sys.stderr)
            return 1
        apt = SystemApt()
        if refresh_first(req, apt) and execute([UPDATE], apt, prog):
            return 1
        rc = execute(plan(req, Names(load_names(), apt, prog)), apt, prog)
        if rc == 0 and req.command in ("check-update", "check-upgrade"):
            upgrades = apt.upgrades()
            for name, security in upgrades:
                print(f"{name}\t{'security' if security else 'update'}")
            return 100 if upgrades else 0
        return rc
    except Refused as refused:
        print(f"{prog}: error: {refused}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
