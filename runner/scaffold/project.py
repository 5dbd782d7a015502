"""``operator-runner init``: a new project in operator-sdk's Ansible layout, in the current folder.

What ``operator-sdk init --plugins=ansible`` writes (PROJECT, watches.yaml, roles/, playbooks/,
requirements.yml, config/{crd,default,manager,manifests,network-policy,prometheus,rbac,samples,
scorecard,testing}, molecule/default and molecule/kind, Dockerfile, Makefile), with
operator-runner's additions: the webhooks (config/webhook), least-privilege RBAC, the
ansible-core line (PROJECT's plugin entry, Makefile, Dockerfile, requirements.txt), a README
and a molecule scenario default in which the operator runs on this machine.

The project name defaults to the folder's name. A folder that holds anything but ``.git`` is
refused unless ``--force``; the message names every file ``init`` would overwrite (other files
are left as they are, with or without ``--force``). A bad domain or name writes nothing.
"""

from __future__ import annotations

from pathlib import Path
from typing import Final

from . import layout
from .lines import ANSIBLE_PACKAGE, DEFAULT_LINE, check_line
from .names import ScaffoldError, check_domain, check_project_name
from .projectfile import Project, load_project
from .render import Plan, project_templates, render, template

__all__ = ["Project", "in_the_way", "init", "load_project"]

# What may be in the folder without --force.
_IGNORED: Final = frozenset({".git"})
# Templates whose file name differs in the project (package data keeps no dot files).
_RENAMED: Final = {"gitignore": ".gitignore"}


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
        "sdk_version": layout.SDK_VERSION,
        "scorecard_version": layout.SDK_VERSION,
        "kustomize_version": layout.KUSTOMIZE_VERSION,
        "opm_version": layout.OPM_VERSION,
    }
    plan = Plan(root)
    for path in project_templates():
        target = "/".join(_RENAMED.get(part, part) for part in path.split("/"))
        plan.add(target, render(template(f"project/{path}"), values))
    for placeholder in layout.PLACEHOLDERS:
        plan.add(placeholder, "")
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
