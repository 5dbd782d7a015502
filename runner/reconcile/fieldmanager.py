"""Who wrote a CR's status, in its managedFields: the operator, and its ansible-core line.

The operator's status writes name a field manager, `operator-runner/ansible-core-<line>`
(`operator-runner/ansible-core-2.18`), which the API server records in the CR's
`metadata.managedFields`. So every CR says, to anyone who may read it, which ansible-core line
last reconciled it: `operator-runner preview` reads it there to name the line a candidate
jumps from (docs/upgrading.md). operator-sdk's ansible-operator records itself under its own
name, which says no line.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping
from typing import Any

PREFIX = "operator-runner/ansible-core-"


def installed_line() -> str | None:
    """The line (`2.18`) of the ansible-core installed beside the runner, which its runs use;
    None when there is none."""
    try:
        version = importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return None
    return ".".join(version.split(".")[:2])


def field_manager(line: str | None) -> str | None:
    """The field manager of the status writes of an operator on `line`."""
    return f"{PREFIX}{line}" if line else None


def writer_line(obj: Mapping[str, Any]) -> str | None:
    """The line of the operator that last wrote the CR's status, as its managedFields say;
    None when no operator-runner wrote it (or it does not say)."""
    newest: tuple[str, str] | None = None
    for entry in (obj.get("metadata") or {}).get("managedFields") or ():
        if not isinstance(entry, Mapping):
            continue
        manager = str(entry.get("manager") or "")
        if not manager.startswith(PREFIX) or entry.get("subresource") != "status":
            continue
        when = str(entry.get("time") or "")
        if newest is None or when >= newest[0]:
            newest = (when, manager[len(PREFIX) :])
    return newest[1] if newest else None
