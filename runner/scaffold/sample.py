"""The sample CR of a kind: read from ``create api --from-sample`` (one custom resource whose
spec the CRD's schema is inferred from), and the file written to config/samples/.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

from .names import ScaffoldError
from .render import dump_yaml

__all__ = ["read_sample", "sample_file_text"]


def read_sample(path: Path, api_version: str, kind: str) -> tuple[dict[str, Any], str]:
    """The sample CR of ``--from-sample``, and its text."""
    try:
        text = path.read_text(encoding="utf-8")
        documents = [doc for doc in yaml.safe_load_all(text) if doc is not None]
    except OSError as exc:
        raise ScaffoldError(f"--from-sample {path}: cannot be read ({exc.strerror})") from None
    except (UnicodeDecodeError, yaml.YAMLError) as exc:
        raise ScaffoldError(f"--from-sample {path}: not valid YAML ({exc})") from None
    if len(documents) != 1 or not isinstance(documents[0], dict):
        raise ScaffoldError(
            f"--from-sample {path}: must hold one custom resource (a mapping with a 'spec'), "
            f"found {len(documents)} YAML documents"
        )
    sample = documents[0]
    for key, want in (("apiVersion", api_version), ("kind", kind)):
        if key in sample and sample[key] != want:
            raise ScaffoldError(
                f"--from-sample {path}: {key} is {sample[key]!r}, but create api makes "
                f"{want!r}; fix the sample or the options"
            )
    if not isinstance(sample.get("spec"), dict):
        raise ScaffoldError(
            f"--from-sample {path}: has no 'spec' mapping; the CRD's schema is inferred from "
            "the sample's spec, e.g. spec: {size: 3}"
        )
    metadata = sample.get("metadata")
    if metadata is not None and not isinstance(metadata, dict):
        raise ScaffoldError(f"--from-sample {path}: 'metadata' must be a mapping")
    return sample, text


def sample_file_text(
    sample: dict[str, Any] | None, text: str | None, api_version: str, kind: str
) -> str:
    """The sample file to write: the given one verbatim when it is complete, else built."""
    metadata = (sample or {}).get("metadata") or {}
    complete = sample is not None and {"apiVersion", "kind"} <= set(sample)
    if complete and text is not None and metadata.get("name"):
        return text if text.endswith("\n") else text + "\n"
    body = {
        "apiVersion": api_version,
        "kind": kind,
        "metadata": {**metadata, "name": metadata.get("name") or f"{kind.lower()}-sample"},
    }
    head = dump_yaml(body)
    if sample is None:
        return head + "spec:\n  # Add fields here (the CRD's schema keeps any spec).\n  {}\n"
    return head + dump_yaml({"spec": sample["spec"]})
