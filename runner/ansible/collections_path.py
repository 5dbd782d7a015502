"""Where Ansible collections are found: the one place that knows the search path.

ansible-core reads `ANSIBLE_COLLECTIONS_PATH` (or the older `ANSIBLE_COLLECTIONS_PATHS`), which
defaults to `~/.ansible/collections:/usr/share/ansible/collections`, and then scans the Python
path. Runs get our bundled `operator_sdk.util` collection in front of that. The watches loader
(collection roles), the runs' environment and the module fork server (precompiled collection
code) all take their list from here. Stdlib only: the fork server imports it.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

BUNDLED_COLLECTIONS = Path(__file__).resolve().parent / "collections"
DEFAULT_COLLECTIONS_PATH = ("~/.ansible/collections", "/usr/share/ansible/collections")


def configured(environ: Mapping[str, str]) -> list[str]:
    """ANSIBLE_COLLECTIONS_PATH (or ANSIBLE_COLLECTIONS_PATHS) split, else Ansible's default."""
    value = environ.get("ANSIBLE_COLLECTIONS_PATH") or environ.get("ANSIBLE_COLLECTIONS_PATHS")
    if value:
        return [part for part in value.split(os.pathsep) if part]
    return list(DEFAULT_COLLECTIONS_PATH)


def runs_path(environ: Mapping[str, str]) -> str:
    """The ANSIBLE_COLLECTIONS_PATH of every run: the bundled collection first."""
    return os.pathsep.join([str(BUNDLED_COLLECTIONS), *configured(environ)])


def collection_roots(
    environ: Mapping[str, str], python_paths: Iterable[str | Path] | None = None
) -> list[Path]:
    """The directories searched, in order: the configured path (`~` from environ's HOME; left
    out without one), then `python_paths` (default: sys.path), as ansible-core does."""
    roots: list[Path] = []
    extra = sys.path if python_paths is None else python_paths
    for entry in [*configured(environ), *(str(p) for p in extra)]:
        if not entry:
            continue
        if entry.startswith("~"):
            home = environ.get("HOME")
            if not home:
                continue
            entry = home + entry[1:]
        roots.append(Path(entry))
    return roots
