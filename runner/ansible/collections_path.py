"""Where Ansible collections are found: the one place that knows the search path.

ansible-core reads `ANSIBLE_COLLECTIONS_PATH` (or the older `ANSIBLE_COLLECTIONS_PATHS`), which
defaults to `~/.ansible/collections:/usr/share/ansible/collections`, and then scans the Python
path. Runs get our bundled `operator_sdk.util` collection in front of that, unless an
`operator_sdk.util` of a newer version is installed there (or on the Python path): then the
bundled one is left out and the installed one is used, as a user who installs a newer release
expects. The watches loader (collection roles), the runs' environment and the module fork
server (precompiled collection code) all take their list from here. Stdlib only: the fork server
imports it.
"""

from __future__ import annotations

import json
import os
import re
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


def version_of(collection: Path) -> tuple[int, ...] | None:
    """The version of the collection installed in folder `collection` (MANIFEST.json of an
    installed collection, else galaxy.yml of a source tree); None when unknown."""
    try:
        manifest = json.loads((collection / "MANIFEST.json").read_text(encoding="utf-8"))
        text = str(manifest["collection_info"]["version"])
    except (OSError, ValueError, KeyError, TypeError):
        try:
            galaxy = (collection / "galaxy.yml").read_text(encoding="utf-8")
        except OSError:
            return None
        found = re.search(r"^version:\s*['\"]?([0-9][^'\"\s#]*)", galaxy, re.MULTILINE)
        if not found:
            return None
        text = found.group(1)
    numbers = re.match(r"(\d+)(?:\.(\d+))?(?:\.(\d+))?", text)
    if not numbers:
        return None
    return tuple(int(n or 0) for n in numbers.groups())


BUNDLED_UTIL = BUNDLED_COLLECTIONS / "ansible_collections" / "operator_sdk" / "util"


def newer_util_installed(
    environ: Mapping[str, str], python_paths: Iterable[str | Path] | None = None
) -> Path | None:
    """The folder of an installed `operator_sdk.util` newer than the bundled one, if any."""
    ours = version_of(BUNDLED_UTIL) or (0,)
    for root in collection_roots(environ, python_paths):
        candidate = root / "ansible_collections" / "operator_sdk" / "util"
        if candidate.resolve() == BUNDLED_UTIL.resolve() or not candidate.is_dir():
            continue
        version = version_of(candidate)
        if version is not None and version > ours:
            return candidate
    return None


def runs_path(environ: Mapping[str, str], python_paths: Iterable[str | Path] | None = None) -> str:
    """The ANSIBLE_COLLECTIONS_PATH of every run: the bundled collection first, or not at all
    when a newer `operator_sdk.util` is installed (which Ansible then finds)."""
    paths = configured(environ)
    if newer_util_installed(environ, python_paths) is None:
        paths = [str(BUNDLED_COLLECTIONS), *paths]
    return os.pathsep.join(paths)


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
