"""The files a watch runs: its role's or playbook's, and those of what they include.

For `operator-runner run --watch-roles`: a change to any of them re-runs the watch's CRs. The
roots are the watch's role folder or playbook (and its finalizer's); then every role folder
under the project's `roles/` and every playbook under its `playbooks/` whose name appears as a
word in a file already included is added, until nothing new turns up. That over-approximates
Ansible's includes (a name in a comment counts too): an extra re-run, never a missed one.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from pathlib import Path

from runner.watches.model import Watch

_MAX_FILE = 1_000_000  # larger files are watched, not read for names


def _files_under(path: Path) -> set[Path]:
    if path.is_file():
        return {path}
    if path.is_dir():
        return {p for p in path.rglob("*") if p.is_file() and "__pycache__" not in p.parts}
    return set()


def _roots(watch: Watch) -> list[Path]:
    roots: list[Path] = []
    for role, playbook in (
        (watch.role, watch.playbook),
        (watch.finalizer.role, watch.finalizer.playbook) if watch.finalizer else (None, None),
    ):
        if role is not None and not watch.is_collection_role:
            roots.append(Path(role))
        if playbook is not None:
            roots.append(Path(playbook))
    return roots


def _candidates(project: Path) -> dict[str, Path]:
    """Names a file may use to include a project role or playbook -> its path."""
    names: dict[str, Path] = {}
    roles = project / "roles"
    if roles.is_dir():
        for role in roles.iterdir():
            if role.is_dir():
                names[role.name] = role
    playbooks = project / "playbooks"
    if playbooks.is_dir():
        for playbook in playbooks.iterdir():
            if playbook.suffix in (".yml", ".yaml") and playbook.is_file():
                names[playbook.name] = playbook
    return names


def _text(path: Path) -> str:
    try:
        if path.stat().st_size > _MAX_FILE:
            return ""
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""


def source_files(watch: Watch, project: Path, extra_roots: Iterable[Path] = ()) -> set[Path]:
    """Every file the watch's runs may read from the project (see the module's docstring)."""
    candidates = _candidates(project)
    patterns = {name: re.compile(rf"(?<![\w.-]){re.escape(name)}(?![\w-])") for name in candidates}
    files: set[Path] = set()
    done: set[Path] = set()
    todo = [*_roots(watch), *extra_roots]
    while todo:
        root = todo.pop()
        if root in done:
            continue
        done.add(root)
        new = _files_under(root) - files
        files |= new
        for path in new:
            text = _text(path)
            for name, pattern in patterns.items():
                if candidates[name] not in done and pattern.search(text):
                    todo.append(candidates[name])
    return files
