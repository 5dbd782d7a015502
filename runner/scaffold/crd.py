"""The CustomResourceDefinition of a new kind, as YAML text in the project's CRD style.

apiextensions.k8s.io/v1, a structural schema (the spec's inferred from a sample, see
:mod:`.schema`), the status subresource with operator-runner's conditions, printer columns, and
a short name when given.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from .render import dump_yaml
from .schema import infer, printer_columns, status_schema

__all__ = ["CrdSpec", "render_crd"]

_NO_SAMPLE_COMMENT = """\
# No sample was given (create api --from-sample FILE), so the spec's fields are not known:
# the schema keeps whatever the spec holds. Describe each field (type, minimum, enum,
# required, default) so that the API server checks CRs before the role sees them.
"""


@dataclass(frozen=True)
class CrdSpec:
    """What the CRD of a kind is made from."""

    group: str
    version: str
    kind: str
    plural: str
    namespaced: bool
    short_name: str | None
    spec: dict[str, Any] | None  # the sample's spec; None: no sample
    require: bool
    source: str  # "roles/<name>" or "playbooks/<name>.yml", for the header
    sample_file: str | None


def _spec_schema(spec: CrdSpec) -> dict[str, Any]:
    if spec.spec is None:
        return {
            "description": f"What the {spec.kind} asks for (fields not described yet).",
            "type": "object",
            "x-kubernetes-preserve-unknown-fields": True,
        }
    schema = infer(spec.spec, require=spec.require)
    return {"description": f"What the {spec.kind} asks for.", **schema}


def crd_document(spec: CrdSpec) -> dict[str, Any]:
    spec_schema = _spec_schema(spec)
    root: dict[str, Any] = {
        "description": f"{spec.kind} is reconciled by operator-runner with {spec.source}.",
        "type": "object",
    }
    if spec.require and spec.spec is not None:
        root["required"] = ["spec"]
    root["properties"] = {
        "apiVersion": {"type": "string"},
        "kind": {"type": "string"},
        "metadata": {"type": "object"},
        "spec": spec_schema,
        "status": status_schema(),
    }
    names: dict[str, Any] = {
        "kind": spec.kind,
        "listKind": f"{spec.kind}List",
        "plural": spec.plural,
        "singular": spec.kind.lower(),
    }
    if spec.short_name:
        names["shortNames"] = [spec.short_name]
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{spec.plural}.{spec.group}"},
        "spec": {
            "group": spec.group,
            "scope": "Namespaced" if spec.namespaced else "Cluster",
            "names": names,
            "versions": [
                {
                    "name": spec.version,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": printer_columns(spec_schema),
                    "schema": {"openAPIV3Schema": root},
                }
            ],
        },
    }


def _header(spec: CrdSpec) -> str:
    get = f"`kubectl get {spec.kind.lower()}`" + (
        f" (or `{spec.short_name}`)" if spec.short_name else ""
    )
    origin = (
        f"The spec's schema was inferred from the sample {spec.sample_file}: tighten it\n"
        "# (minimum, maxLength, enum, required, default) to what the role accepts."
        if spec.sample_file
        else "No sample was given: the spec's schema accepts anything (see below)."
    )
    return (
        f"# {spec.kind} ({spec.group}/{spec.version}), made by `operator-runner create api`.\n"
        f"# Reconciled by {spec.source} (watches.yaml). {get} lists them.\n"
        f"# {origin}\n"
        "---\n"
    )


def render_crd(spec: CrdSpec) -> str:
    """The CRD file's text: a header comment, then the CRD."""
    text = dump_yaml(crd_document(spec))
    if spec.spec is None:
        # The comment goes right above the spec's schema (the first "spec:" under properties).
        match = re.search(r"^( +)spec:\n\1  description: What the", text, flags=re.MULTILINE)
        if match:
            indent = match.group(1)
            comment = "".join(f"{indent}{line}\n" for line in _NO_SAMPLE_COMMENT.splitlines())
            text = text[: match.start()] + comment + text[match.start() :]
    return _header(spec) + text
