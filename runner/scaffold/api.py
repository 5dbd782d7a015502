"""``operator-runner create api``: add a kind to a project in operator-sdk's Ansible layout,
made by ``init`` or by operator-sdk's ``init --plugins=ansible``.

For a kind that watches.yaml has already, it adds the new version to the kind's CRD instead
(version.py). For a new kind it writes what operator-sdk's ``create api`` writes, in
operator-runner's way: the CRD (``config/crd/bases/<group>_<plural>.yaml``, its schema inferred
from a sample, listed in ``config/crd/kustomization.yaml``), the sample CR
(``config/samples/<group>_<version>_<kind>.yaml``, listed in its kustomization.yaml), a role
(``roles/<snake_kind>/``) or a playbook (``playbooks/<snake_kind>.yml``), the kind's admin,
editor and viewer ClusterRoles (``config/rbac``, listed in its kustomization.yaml), its molecule
test (``molecule/default/tasks/<kind>_test.yml``), and adds the ``watches.yaml`` entry and the
kind's least-privilege rules (``config/rbac/role.yaml``) as text, above kubebuilder's scaffold
markers, and the resource to PROJECT. Every check runs first: a bad name, an existing kind or
file, or a sample that does not fit writes nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml

from . import edits, layout
from .content import content_files
from .crd import CrdSpec, render_crd
from .names import (
    ScaffoldError,
    check_group,
    check_kind,
    check_short_name,
    check_version,
    full_group,
    plural,
    snake_kind,
    spec_var,
)
from .project import in_the_way
from .projectfile import load_project, multigroup, split_group, with_resource
from .render import Plan, render, template
from .sample import read_sample, sample_file_text
from .version import add_version, find_crd

__all__ = ["ApiRequest", "create_api"]

WATCHES = layout.WATCHES
CONFIGMAP_VERBS = ["get", "list", "watch", "create", "patch"]
# The files create api adds to, and the template of those it makes when a project has none yet
# (operator-sdk's init writes no config/crd nor config/samples: its first create api does).
_EDITED = {
    layout.PROJECT_FILE: None,
    WATCHES: None,
    layout.RBAC_ROLE: None,
    layout.RBAC_KUSTOMIZATION: None,
    layout.CRD_KUSTOMIZATION: "project/config/crd/kustomization.yaml",
    layout.SAMPLES_KUSTOMIZATION: "project/config/samples/kustomization.yaml",
}
_DEFAULT_KUSTOMIZATION = "config/default/kustomization.yaml"
_HELPER_ROLES = ("admin", "editor", "viewer")
_HELPER_ROLES_COMMENT = """\
# For each CRD, "Admin", "Editor" and "Viewer" roles are scaffolded by
# default, aiding admins in cluster management. Those roles are
# not used by the {project} itself. You can comment the following lines
# if you do not want those helpers be installed with your Project.
"""


@dataclass(frozen=True)
class ApiRequest:
    """The options of ``create api``."""

    group: str
    version: str
    kind: str
    generate_playbook: bool = False  # else a role (also without --generate-role)
    sample: Path | None = None
    short_name: str | None = None
    namespaced: bool = True
    require_sample_keys: bool = False
    storage: bool = False  # a kind that exists: the new version becomes the storage version
    new_kind_options: tuple[str, ...] = ()  # the options given that only a new kind takes


def _check(request: ApiRequest) -> None:
    check_group(request.group)
    check_version(request.version)
    check_kind(request.kind)
    if request.short_name is not None:
        check_short_name(request.short_name)


def _read_texts(root: Path) -> dict[str, str]:
    """The files create api adds to (from their template when the project has none yet)."""
    texts: dict[str, str] = {}
    for name, made_from in _EDITED.items():
        path = root / name
        if made_from is not None and not path.exists():
            texts[name] = template(made_from)
            continue
        try:
            texts[name] = path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScaffoldError(f"{name} cannot be read ({exc}); create api adds to it") from None
    return texts


def _uncomment_crd(root: Path) -> str | None:
    """config/default/kustomization.yaml with ``- ../crd`` uncommented (kubebuilder's create
    api does it), or None when there is nothing to do."""
    path = root / _DEFAULT_KUSTOMIZATION
    if not path.exists():
        return None
    text = path.read_text(encoding="utf-8")
    lines = text.splitlines(keepends=True)
    if any(line.strip() == "- ../crd" for line in lines):
        return None
    for number, line in enumerate(lines):
        if line.strip() == "#- ../crd":
            lines[number] = line.replace("#- ../crd", "- ../crd", 1)
            return "".join(lines)
    return None


def _watched_version(text: str, group: str, kind: str) -> str | None:
    """The version watches.yaml watches `kind` of `group` in; None when it is not watched."""
    for watched_group, watched_version, watched_kind in edits.watched_kinds(text, WATCHES):
        if (watched_group, watched_kind) == (group, kind):
            return watched_version
    return None


def _add_version(root: Path, request: ApiRequest, group: str, watched: str) -> Plan:
    """create api for a kind that exists: another version of its CRD (version.py)."""
    if request.new_kind_options:
        raise ScaffoldError(
            f"{request.kind} of group {group} exists (watches.yaml watches {watched}): create api "
            f"adds version {request.version} to its CRD, and {', '.join(request.new_kind_options)} "
            "only apply to a new kind; leave them out"
        )
    crd = find_crd(root, group, request.kind)
    sample, sample_source = None, None
    api_version = f"{group}/{request.version}"
    if request.sample is not None:
        sample, sample_source = read_sample(request.sample, api_version, request.kind)
    plan = Plan(root)
    add_version(
        plan,
        crd,
        request.version,
        spec_sample=sample["spec"] if sample is not None else None,
        require=request.require_sample_keys,
        storage=request.storage,
        source=f"the watch of {watched}",
    )
    if sample is not None:
        name = f"{request.group.split('.')[0]}_{request.version}_{request.kind.lower()}.yaml"
        path = f"{layout.SAMPLES}/{name}"
        if (root / path).exists():
            raise ScaffoldError(f"{path} exists already; create api does not overwrite files")
        plan.add(path, sample_file_text(sample, sample_source, api_version, request.kind))
    plan.add(
        layout.PROJECT_FILE,
        with_resource(
            (root / layout.PROJECT_FILE).read_text(encoding="utf-8"),
            group,
            request.version,
            request.kind,
            crd.document["spec"].get("scope") != "Cluster",
        ),
    )
    plan.write()
    stored = request.version if request.storage else "as before"
    plan.added_version = (
        f"added version {request.version} to {request.kind} ({crd.path}; served, storage "
        f"version {stored}); watches.yaml still reconciles {request.kind} {watched}: its role "
        f"sees objects in {watched}",
        f"next: write the conversion between the versions: operator-runner create webhook "
        f"--kind {request.kind} --convert (a role), or convert: fields: in watches.yaml when "
        "only names differ (docs/webhooks.md#conversion)",
    )
    return plan


def create_api(root: Path, request: ApiRequest) -> Plan:
    """Check everything, then add the kind to the project in ``root``; returns what was written."""
    _check(request)
    project = load_project(root)
    group = full_group(request.group, project.domain)
    check_group(group)
    api_version = f"{group}/{request.version}"
    kind, lower, snake = request.kind, request.kind.lower(), snake_kind(request.kind)
    texts = _read_texts(root)
    watched = _watched_version(texts[WATCHES], group, kind)
    if watched is not None:
        if watched == request.version:
            raise ScaffoldError(
                f"{kind} {api_version} is already in {WATCHES}; choose another kind, group or "
                "version (another version is added to the kind's CRD)"
            )
        return _add_version(root, request, group, watched)
    if request.storage:
        raise ScaffoldError(
            "--storage chooses the storage version when a version is added to a kind that "
            f"exists; {kind} of group {group} is new (its one version is stored)"
        )
    sample, sample_source = None, None
    if request.sample is not None:
        sample, sample_source = read_sample(request.sample, api_version, kind)
    spec = sample["spec"] if sample is not None else None
    source = f"playbooks/{snake}.yml" if request.generate_playbook else f"roles/{snake}"
    values = {
        "kind": kind,
        "a_kind": f"{'an' if kind[0] in 'AEIOU' else 'a'} {kind}",
        "lower_kind": lower,
        "snake_kind": snake,
        "api_version": api_version,
        "group": group,
        "plural": plural(kind),
        "project_name": project.name,
        "spec_var": spec_var(group, kind),
        "source": source,
        "namespace_expr": "{{ ansible_operator_meta.namespace }}"
        if request.namespaced
        else f"{{{{ {snake}_namespace }}}}",
    }
    plan = Plan(root)
    sample_name = f"{request.group.split('.')[0]}_{request.version}_{lower}.yaml"
    crd = CrdSpec(
        group=group,
        version=request.version,
        kind=kind,
        plural=values["plural"],
        namespaced=request.namespaced,
        short_name=request.short_name,
        spec=spec,
        require=request.require_sample_keys,
        source=source,
        sample_file=f"{layout.SAMPLES}/{sample_name}" if request.sample else None,
    )
    crd_file = f"{group}_{values['plural']}.yaml"
    plan.add(f"{layout.CRD_BASES}/{crd_file}", render_crd(crd))
    sample_text = sample_file_text(sample, sample_source, api_version, kind)
    plan.add(f"{layout.SAMPLES}/{sample_name}", sample_text)
    content = content_files(plan, request, values, spec)
    project_text = with_resource(
        texts[layout.PROJECT_FILE], group, request.version, kind, request.namespaced
    )
    # kubebuilder's names of the helper roles: the group's too in a multi-group project
    helper = (
        f"{split_group(group, project.domain)[0]}_{lower}" if multigroup(project_text) else lower
    )
    for role in _HELPER_ROLES:
        plan.add(
            f"config/rbac/{helper}_{role}_role.yaml",
            render(
                template(f"api/{role}_role.yaml"),
                {**values, "helper_role": helper.replace("_", "-")},
            ),
        )
    sample_name_in_cluster = str((yaml.safe_load(sample_text).get("metadata") or {})["name"])
    plan.add(
        f"{layout.MOLECULE_TASKS}/{lower}_test.yml",
        render(
            template("api/molecule_test.yml"), {**values, "sample_name": sample_name_in_cluster}
        ),
    )
    for path in plan.files:
        if (root / path).exists() or in_the_way(root, path) is not None:
            raise ScaffoldError(f"{path} exists already; create api does not overwrite files")
    if (root / source).exists():
        raise ScaffoldError(f"{source} exists already; create api does not overwrite it")
    entry = f"- version: {request.version}\n  group: {group}\n  kind: {kind}\n  {content}\n"
    plan.add(WATCHES, edits.append_watch(texts[WATCHES], WATCHES, entry, layout.WATCH_MARKER))
    _add_listings(plan, texts, crd_file, sample_name, helper, project.name)
    rules = render(template("api/rbac.yaml"), values)
    if not edits.has_rule(
        texts[layout.RBAC_ROLE], layout.RBAC_ROLE, "", "configmaps", CONFIGMAP_VERBS
    ):
        rules += render(template("api/rbac_configmaps.yaml"), values)
    plan.add(
        layout.RBAC_ROLE,
        edits.append_rbac_rules(
            texts[layout.RBAC_ROLE], layout.RBAC_ROLE, rules, layout.RULES_MARKER
        ),
    )
    plan.add(layout.PROJECT_FILE, project_text)
    plan.write()
    return plan


def _add_listings(
    plan: Plan,
    texts: dict[str, str],
    crd_file: str,
    sample_name: str,
    helper: str,
    project_name: str,
) -> None:
    """The kind's CRD, sample and helper roles listed in their kustomization.yaml files (made
    when the project has none yet), and config/default deploying the CRDs."""
    crds = layout.CRD_KUSTOMIZATION
    plan.add(crds, edits.append_resource(texts[crds], crds, f"bases/{crd_file}", layout.CRD_MARKER))
    samples = layout.SAMPLES_KUSTOMIZATION
    plan.add(
        samples, edits.append_resource(texts[samples], samples, sample_name, layout.SAMPLES_MARKER)
    )
    rbac = layout.RBAC_KUSTOMIZATION
    text = texts[rbac]
    comment = _HELPER_ROLES_COMMENT.format(project=project_name)
    if comment not in text:
        text = (text if text.endswith("\n") else text + "\n") + comment
    for role in _HELPER_ROLES:
        text = edits.append_resource(text, rbac, f"{helper}_{role}_role.yaml")
    plan.add(rbac, text)
    default = _uncomment_crd(plan.root)
    if default is not None:
        plan.add(_DEFAULT_KUSTOMIZATION, default)
