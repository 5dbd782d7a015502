"""``operator-runner init``: a new project in this repository's layout, in the current folder.

The project name defaults to the folder's name. A folder that holds anything but ``.git`` is
refused unless ``--force``; the message names every file ``init`` would overwrite (other files
are left as they are, with or without ``--force``). A bad domain or name writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import yaml

from .lines import ANSIBLE_PACKAGE, DEFAULT_LINE, check_line
from .names import ScaffoldError, check_domain, check_project_name
from .render import Plan, project_templates, render, template

__all__ = ["LAYOUT", "PROJECT_FILE", "Project", "in_the_way", "init", "load_project"]

PROJECT_FILE: Final = "PROJECT"
LAYOUT: Final = "operator-runner/v1"
# Folders a role author fills, kept in version control (and in the image's COPY) while empty.
_EMPTY_FOLDERS: Final = ("roles", "playbooks", "crds")
# What may be in the folder without --force.
_IGNORED: Final = frozenset({".git"})


@dataclass(frozen=True)
class Project:
    """An ``init`` project: its root folder, domain and name (from its PROJECT file)."""

    root: Path
    domain: str
    name: str


def in_the_way(root: Path, path: str) -> Path | None:
    """What stops a file being written at ``root/path``: a folder there, or a file above it."""
    if (root / path).is_dir():
        return root / path
    for parent in Path(path).parents:
        if parent != Path(".") and (root / parent).exists() and not (root / parent).is_dir():
            return root / parent
    return None


def _plan(root: Path, domain: str, name: str, line: str) -> Plan:
    values = {
        "project_name": name,
        "domain": domain,
        "namespace": f"{name}-system",
        "ansible_core": line,
        "ansible_package": str(ANSIBLE_PACKAGE[line]),
    }
    plan = Plan(root)
    for path in project_templates():
        plan.add(path, render(template(f"project/{path}"), values))
    for folder in _EMPTY_FOLDERS:
        plan.add(f"{folder}/.gitkeep", "")
    return plan


def init(
    root: Path,
    domain: str,
    project_name: str | None = None,
    force: bool = False,
    ansible_core: str = DEFAULT_LINE,
) -> Plan:
    """Check everything, then write the project into ``root``; returns what was written.

    ``ansible_core`` is the ansible-core line the project is written for (``2.18``).
    """
    check_domain(domain)
    check_line(ansible_core)
    name = project_name if project_name is not None else root.resolve().name
    check_project_name(name, from_folder=project_name is None)
    plan = _plan(root, domain, name, ansible_core)
    for path in plan.files:
        blocker = in_the_way(root, path)
        if blocker is not None:
            raise ScaffoldError(
                f"{blocker} is in the way of the file {path} that init writes; move it away"
            )
    present = sorted(entry.name for entry in root.iterdir() if entry.name not in _IGNORED)
    if present and not force:
        overwritten = sorted(path for path in plan.files if (root / path).exists())
        would = (
            "it would overwrite: " + ", ".join(overwritten)
            if overwritten
            else "it would overwrite none of its files"
        )
        raise ScaffoldError(
            f"{root} is not empty ({', '.join(present[:5])}{', ...' if len(present) > 5 else ''}); "
            f"init writes a new project into an empty folder. With --force, {would} "
            "(other files stay as they are)"
        )
    plan.write()
    return plan


def load_project(root: Path) -> Project:
    """The project ``root`` is the root of, or a clear error when it is not one."""
    path = root / PROJECT_FILE
    hint = (
        "run operator-runner create api in the root folder of a project made with "
        "`operator-runner init --domain <domain>`"
    )
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScaffoldError(f"{root.resolve()} has no {PROJECT_FILE} file; {hint}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"{path} cannot be read ({exc}); {hint}") from None
    if not isinstance(data, dict) or data.get("layout") != LAYOUT:
        raise ScaffoldError(f"{path} is not the PROJECT file of an operator-runner project; {hint}")
    domain, name = data.get("domain"), data.get("projectName")
    if not isinstance(domain, str) or not isinstance(name, str):
        raise ScaffoldError(f"{path}: 'domain' and 'projectName' must be set; {hint}")
    check_domain(domain)
    return Project(root=root, domain=domain, name=name)
