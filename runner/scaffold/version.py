"""``operator-runner create api`` for a kind that exists: another version of its CRD.

The new version is appended to the CRD's ``versions`` (as text: comments stay), served, with the
schema, subresources and printer columns of the storage version, or with the spec's schema
inferred from ``--from-sample``. The storage version stays where it was unless ``--storage``.
watches.yaml is left as it is: the watch keeps reconciling the version it names (its roles see
objects in that version) and the operator converts (``create webhook --convert`` scaffolds the
conversion; a CRD whose versions differ needs one). A sample in the new version is written when
one is given, but not listed in the samples' kustomization.yaml: it would be the same object as the
other version's sample.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from .crd import CrdSpec, crd_document
from .layout import CRD_BASES
from .names import ScaffoldError
from .render import Plan, dump_yaml


@dataclass(frozen=True)
class KindCrd:
    """A kind's CRD file in config/crd/bases: its path (relative), text and document."""

    path: str
    text: str
    document: dict[str, Any]


def find_crd(root: Path, group: str, kind: str) -> KindCrd:
    """The CRD of `kind` in `group` among config/crd/bases/*.yaml."""
    for path in sorted((root / CRD_BASES).glob("*.yaml")):
        text = path.read_text(encoding="utf-8")
        try:
            documents = list(yaml.safe_load_all(text))
        except yaml.YAMLError as exc:
            raise ScaffoldError(f"{path.relative_to(root)} is not valid YAML ({exc})") from None
        for document in documents:
            spec = document.get("spec") if isinstance(document, dict) else None
            if (
                isinstance(spec, dict)
                and spec.get("group") == group
                and (spec.get("names") or {}).get("kind") == kind
            ):
                if len(documents) != 1:
                    raise ScaffoldError(
                        f"{path.relative_to(root)} holds several documents; create api adds a "
                        "version to a CRD file of its own: add it by hand"
                    )
                return KindCrd(str(path.relative_to(root)), text, document)
    raise ScaffoldError(
        f"{kind} of group {group} is in watches.yaml but no CRD in {CRD_BASES}/ defines it; "
        "create api adds a version to that CRD"
    )


def _versions_node(text: str, name: str) -> yaml.SequenceNode:
    root = yaml.compose(text)
    spec = _child(root, "spec")
    versions = _child(spec, "versions") if spec is not None else None
    if not isinstance(versions, yaml.SequenceNode) or not versions.value:
        raise ScaffoldError(f"{name}: spec.versions is not a list of versions; fix it first")
    return versions


def _child(node: yaml.Node | None, key: str) -> yaml.Node | None:
    if not isinstance(node, yaml.MappingNode):
        return None
    for key_node, value in node.value:
        if isinstance(key_node, yaml.ScalarNode) and key_node.value == key:
            return value if isinstance(value, yaml.Node) else None
    return None


def _storage_to_false(text: str, name: str) -> str:
    """The text with the storage version's `storage: true` made `false`."""
    edits = []
    for item in _versions_node(text, name).value:
        node = _child(item, "storage")
        if isinstance(node, yaml.ScalarNode) and yaml.safe_load(node.value) is True:
            edits.append(node)
    if len(edits) != 1:
        raise ScaffoldError(f"{name}: no one version has 'storage: true'; fix it first")
    node = edits[0]
    return text[: node.start_mark.index] + "false" + text[node.end_mark.index :]


def _append_version(text: str, name: str, version: dict[str, Any]) -> str:
    """The text with `version` appended to spec.versions (the file must end with that list)."""
    versions = _versions_node(text, name)
    indent = versions.value[0].start_mark.column  # of the items' content, after "- "
    item = dump_yaml([version])
    lines = item.splitlines(keepends=True)
    pad = " " * (indent - 2)
    addition = "".join(pad + line if line.strip() else line for line in lines)
    new = (text if text.endswith("\n") else text + "\n") + addition
    problem = (
        f"{name}: cannot append version {version['name']} as text (the file must end with "
        f"spec.versions); add it by hand:\n{addition}"
    )
    try:
        after = yaml.safe_load(new)
    except yaml.YAMLError:
        raise ScaffoldError(problem) from None
    listed = (after.get("spec") or {}).get("versions") if isinstance(after, dict) else None
    if not isinstance(listed, list) or listed[-1] != version:
        raise ScaffoldError(problem)
    return new


def new_version(
    crd: KindCrd,
    version: str,
    spec_sample: dict[str, Any] | None,
    require: bool,
    storage: bool,
    source: str,
) -> dict[str, Any]:
    """The version entry: the storage version's, renamed, or with the sample's spec schema."""
    versions = crd.document["spec"]["versions"]
    if any(v.get("name") == version for v in versions):
        raise ScaffoldError(f"{crd.path} has version {version} already")
    stored = next((v for v in versions if v.get("storage")), versions[-1])
    entry = copy.deepcopy(stored)
    entry["name"] = version
    entry["served"] = True
    entry["storage"] = storage
    if spec_sample is not None:
        spec = crd.document["spec"]
        inferred = crd_document(
            CrdSpec(
                group=spec["group"],
                version=version,
                kind=spec["names"]["kind"],
                plural=spec["names"]["plural"],
                namespaced=spec.get("scope") != "Cluster",
                short_name=None,
                spec=spec_sample,
                require=require,
                source=source,
                sample_file=None,
            )
        )["spec"]["versions"][0]
        schema = entry.setdefault("schema", {}).setdefault("openAPIV3Schema", {})
        schema.setdefault("properties", {})["spec"] = inferred["schema"]["openAPIV3Schema"][
            "properties"
        ]["spec"]
        entry["additionalPrinterColumns"] = inferred["additionalPrinterColumns"]
    head = {key: entry.pop(key) for key in ("name", "served", "storage")}
    return {**head, **entry}


def add_version(
    plan: Plan,
    crd: KindCrd,
    version: str,
    *,
    spec_sample: dict[str, Any] | None,
    require: bool,
    storage: bool,
    source: str,
) -> None:
    """Add the CRD's new `version` to `plan` (see the module)."""
    entry = new_version(crd, version, spec_sample, require, storage, source)
    text = _storage_to_false(crd.text, crd.path) if storage else crd.text
    plan.add(crd.path, _append_version(text, crd.path, entry))
