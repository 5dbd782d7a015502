"""The PROJECT file: kubebuilder's project configuration (version 3) in operator-sdk's Ansible
layout, read by ``create api`` / ``create webhook`` and given each new kind (``resources``) as
operator-sdk's ``create api`` records it.

kubebuilder reads PROJECT strictly (an unknown top-level key stops operator-sdk's CLI) but keeps
any entry under ``plugins``: operator-runner's own settings (the ansible-core line) live there,
under ``operator-runner.dev/v1``.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .layout import ANSIBLE_LAYOUT, OLD_LAYOUT, PROJECT_FILE
from .names import ScaffoldError, check_domain

__all__ = ["Project", "load_project", "multigroup", "split_group", "with_resource"]

_HINT = (
    "run it in the root folder of an Ansible operator project (`operator-runner init "
    "--domain <domain>`, or operator-sdk's `init --plugins=ansible`)"
)


@dataclass(frozen=True)
class Project:
    """A project: its root folder, domain and name (from its PROJECT file)."""

    root: Path
    domain: str
    name: str


def _layouts(data: dict[str, Any]) -> list[str]:
    layout = data.get("layout")
    if isinstance(layout, str):
        return [layout]
    return [str(item) for item in layout] if isinstance(layout, list) else []


def load_project(root: Path) -> Project:
    """The project ``root`` is the root of, or a clear error when it is not one."""
    path = root / PROJECT_FILE
    try:
        data: Any = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ScaffoldError(f"{root.resolve()} has no {PROJECT_FILE} file; {_HINT}") from None
    except (OSError, UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"{path} cannot be read ({exc}); {_HINT}") from None
    layouts = _layouts(data) if isinstance(data, dict) else []
    if OLD_LAYOUT in layouts:
        raise ScaffoldError(
            f"{path}: layout {OLD_LAYOUT} (crds/, deploy/) was written by an earlier "
            "operator-runner init; create api and create webhook now extend operator-sdk's "
            f"layout ({ANSIBLE_LAYOUT}: config/): run operator-runner init in a new folder and "
            "move watches.yaml, roles/, playbooks/ and the CRDs over"
        )
    if ANSIBLE_LAYOUT not in layouts:
        found = ", ".join(layouts) or "none"
        raise ScaffoldError(
            f"{path}: layout {found} is not operator-sdk's Ansible layout ({ANSIBLE_LAYOUT}); "
            f"{_HINT}"
        )
    assert isinstance(data, dict)
    domain, name = data.get("domain"), data.get("projectName")
    if not isinstance(domain, str) or not isinstance(name, str):
        raise ScaffoldError(f"{path}: 'domain' and 'projectName' must be set; {_HINT}")
    check_domain(domain)
    return Project(root=root, domain=domain, name=name)


def split_group(group: str, domain: str) -> tuple[str, str]:
    """(group, domain) as kubebuilder records a resource: its group is ``<group>.<domain>``."""
    if group == domain:
        return "", domain
    if group.endswith(f".{domain}"):
        return group[: -len(domain) - 1], domain
    first, _, rest = group.partition(".")
    return first, rest


def with_resource(text: str, group: str, version: str, kind: str, namespaced: bool) -> str:
    """PROJECT's text with the kind among its ``resources``, as operator-sdk's create api
    records it (nothing changes when it is there already), and ``multigroup: true`` once its
    kinds are of several API groups (kubebuilder refuses another group without it). Comments
    at its top are kept."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScaffoldError(f"{PROJECT_FILE} is not valid YAML ({exc}); fix it first") from None
    if not isinstance(data, dict):
        raise ScaffoldError(f"{PROJECT_FILE} must be a mapping; fix it first")
    short, domain = split_group(group, str(data.get("domain") or ""))
    resources = data.get("resources") or []
    if not isinstance(resources, list):
        raise ScaffoldError(f"{PROJECT_FILE}: 'resources' must be a list; fix it first")
    groups = {(r.get("group", ""), r.get("domain", "")) for r in resources if isinstance(r, dict)}
    for resource in resources:
        if isinstance(resource, dict) and (
            resource.get("group", ""),
            resource.get("domain", ""),
            resource.get("version"),
            resource.get("kind"),
        ) == (short, domain, version, kind):
            return text
    api: dict[str, Any] = {"crdVersion": "v1"}
    if namespaced:
        api["namespaced"] = True
    entry: dict[str, Any] = {"api": api, "domain": domain}
    if short:
        entry["group"] = short
    entry.update(kind=kind, version=version)
    data["resources"] = [*resources, entry]
    if groups - {(short, domain)}:
        data["multigroup"] = True
    order = ("domain", "layout", "multigroup", "plugins", "projectName", "repo", "resources")
    ordered = {key: data[key] for key in order if key in data}
    ordered.update((key, value) for key, value in data.items() if key not in ordered)
    if "version" in ordered:
        ordered["version"] = ordered.pop("version")
    lines = text.splitlines(keepends=True)
    top = next((i for i, line in enumerate(lines) if not line.startswith("#")), len(lines))
    header = "".join(lines[:top])
    body = yaml.safe_dump(ordered, sort_keys=False, default_flow_style=False, width=100)
    return header + body


def multigroup(text: str) -> bool:
    """PROJECT's ``multigroup`` (kubebuilder then names a kind's files after its group too)."""
    data = yaml.safe_load(text)
    return isinstance(data, dict) and data.get("multigroup") is True
