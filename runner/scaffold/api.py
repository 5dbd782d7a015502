"""``operator-runner create api``: add a kind to a project made by ``init``.

For a kind that watches.yaml has already, it adds the new version to the kind's CRD instead
(version.py). For a new kind it writes the CRD (``crds/<group>_<plural>.yaml``), the sample CR
(``config/samples/<group>_<version>_<kind>.yaml``, listed in ``config/samples/Kustomization``),
a role (``roles/<snake_kind>/``) or a playbook (``playbooks/<snake_kind>.yml``), and appends the
``watches.yaml`` entry and the kind's RBAC rules (``deploy/rbac/role.yaml``) as text. Every
check runs first: a bad name, an existing kind or file, or a sample that does not fit writes
nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from . import edits
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
from .project import in_the_way, load_project
from .render import Plan, render, template
from .sample import read_sample, sample_file_text
from .version import add_version, find_crd

__all__ = ["ApiRequest", "create_api"]

WATCHES = "watches.yaml"
SAMPLES_KUSTOMIZATION = "config/samples/Kustomization"
RBAC_ROLE = "deploy/rbac/role.yaml"
CONFIGMAP_VERBS = ["get", "list", "watch", "create", "patch"]


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
    """The files create api appends to."""
    texts = {}
    for name in (WATCHES, SAMPLES_KUSTOMIZATION, RBAC_ROLE):
        try:
            texts[name] = (root / name).read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            raise ScaffoldError(
                f"{name} cannot be read ({exc}); create api appends to it"
            ) from None
    return texts


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
        path = f"config/samples/{name}"
        if (root / path).exists():
            raise ScaffoldError(f"{path} exists already; create api does not overwrite files")
        plan.add(path, sample_file_text(sample, sample_source, api_version, request.kind))
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
        sample_file=f"config/samples/{sample_name}" if request.sample else None,
    )
    plan.add(f"crds/{group}_{values['plural']}.yaml", render_crd(crd))
    sample_text = sample_file_text(sample, sample_source, api_version, kind)
    plan.add(f"config/samples/{sample_name}", sample_text)
    content = content_files(plan, request, values, spec)
    for path in plan.files:
        if (root / path).exists() or in_the_way(root, path) is not None:
            raise ScaffoldError(f"{path} exists already; create api does not overwrite files")
    if (root / source).exists():
        raise ScaffoldError(f"{source} exists already; create api does not overwrite it")
    entry = f"- version: {request.version}\n  group: {group}\n  kind: {kind}\n  {content}\n"
    plan.add(WATCHES, edits.append_watch(texts[WATCHES], WATCHES, entry))
    plan.add(
        SAMPLES_KUSTOMIZATION,
        edits.append_sample(texts[SAMPLES_KUSTOMIZATION], SAMPLES_KUSTOMIZATION, sample_name),
    )
    rules = render(template("api/rbac.yaml"), values)
    if not edits.has_rule(texts[RBAC_ROLE], RBAC_ROLE, "", "configmaps", CONFIGMAP_VERBS):
        rules += render(template("api/rbac_configmaps.yaml"), values)
    plan.add(RBAC_ROLE, edits.append_rbac_rules(texts[RBAC_ROLE], RBAC_ROLE, rules))
    plan.write()
    return plan
