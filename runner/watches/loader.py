"""load_watches: read, validate and resolve a watches file."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from pathlib import Path

from runner.watches.envexpand import expand_env
from runner.watches.fields import entry_watch
from runner.watches.goyaml import entries_of, parse_yaml, read_text
from runner.watches.messages import Where, describe, entry_label
from runner.watches.model import GVK, LoadResult, Watch, WatchesError
from runner.watches.roles import Search


def _check_duplicates(watches: Sequence[Watch], name: str) -> None:
    first_seen: dict[GVK, int] = {}
    for number, watch in enumerate(watches, start=1):
        if watch.gvk in first_seen:
            gvk = watch.gvk
            raise WatchesError(
                f"{name}: entry {number} ({gvk.api_version} {gvk.kind}): same group/version/kind "
                f"as entry {first_seen[watch.gvk]}; a resource can be watched only once, "
                "merge the two entries"
            )
        first_seen[watch.gvk] = number


def load_watches(
    path: Path,
    *,
    environ: Mapping[str, str],
    roles_paths: Sequence[Path] = (),
    collection_roots: Sequence[Path] = (),
) -> LoadResult:
    """Read, validate and resolve the watches file at ``path``.

    ``environ`` expands ``${VAR}`` references; ``roles_paths`` is ``ANSIBLE_ROLES_PATH``
    split on ``:`` (relative entries are taken from the current directory, as Ansible
    does); ``collection_roots`` are the directories searched for collection roles, in
    order (``runner.ansible.collections_path.collection_roots`` knows them).  Raises
    :class:`WatchesError` on the first problem.
    """
    name = str(path)
    warnings: list[str] = []
    text = expand_env(read_text(path, name), environ)
    entries = entries_of(parse_yaml(text, name, warnings), name, warnings)
    search = Search(
        base_dir=Path(os.path.abspath(path)).parent,
        roles_paths=tuple(Path(os.path.abspath(p)) for p in roles_paths),
        collection_roots=tuple(collection_roots),
    )
    watches = []
    for number, raw in enumerate(entries, start=1):
        if not isinstance(raw, Mapping):
            where = Where(name, number, "", warnings)
            raise where.error(None, f"must be a mapping of keys, found {describe(raw)}")
        watches.append(entry_watch(raw, search, Where(name, number, entry_label(raw), warnings)))
    _check_duplicates(watches, name)
    return LoadResult(watches=watches, warnings=warnings)
