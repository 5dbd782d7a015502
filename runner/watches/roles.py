"""Where roles and playbooks named in watches.yaml are found."""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from runner.watches.messages import Where, as_text, suggestion

# ---------------------------------------------------------------------------
# Role and playbook lookup
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Search:
    """Where relative roles, collection roles and playbooks are looked up."""

    base_dir: Path
    roles_paths: tuple[Path, ...]
    collection_roots: tuple[Path, ...]


def _is_fqcn(name: str) -> bool:
    parts = name.split(".")
    return len(parts) == 3 and all(parts) and "/" not in name


def _collection_candidates(name: str, roots: Sequence[Path]) -> list[Path]:
    namespace, collection, role = name.split(".")
    candidates = []
    for root in roots:
        candidates.append(root / "ansible_collections" / namespace / collection / "roles" / role)
        if root.name == "ansible_collections":
            candidates.append(root / namespace / collection / "roles" / role)
    return candidates


def _role_candidates(name: str, search: Search) -> list[Path]:
    if os.path.isabs(name):
        return [Path(name)]
    candidates = [search.base_dir / name, search.base_dir / "roles" / name]
    for parent in search.roles_paths:
        candidates += [parent / name, parent / "roles" / name]
    return candidates


def _unique(paths: Iterable[Path]) -> list[Path]:
    result: list[Path] = []
    for path in paths:
        normal = Path(os.path.abspath(path))
        if normal not in result:
            result.append(normal)
    return result


def _near_misses(name: str, candidates: Sequence[Path], *, dirs: bool) -> str:
    """Suggest an existing directory (or file) named close to the last part of ``name``."""
    wanted = Path(name).name
    siblings: set[str] = set()
    for candidate in candidates:
        if candidate.parent.is_dir():
            siblings.update(
                entry.name for entry in candidate.parent.iterdir() if entry.is_dir() == dirs
            )
    return suggestion(wanted, sorted(siblings)) if wanted else ""


def _resolve_role(name: str, search: Search, where: Where, key: str) -> str:
    """Absolute path of role ``name``, or ``name`` itself for an installed collection role."""
    if _is_fqcn(name):
        for candidate in _collection_candidates(name, search.collection_roots):
            if candidate.is_dir():
                return name
    candidates = _unique(_role_candidates(name, search))
    for candidate in candidates:
        if candidate.is_dir():
            return str(candidate)
    looked = [*(_collection_candidates(name, search.collection_roots) if _is_fqcn(name) else [])]
    looked_in = ", ".join(str(path) for path in _unique([*looked, *candidates]))
    hint = _near_misses(name, candidates, dirs=True)
    raise where.error(
        key,
        f"role '{name}' not found{hint}; looked in {looked_in}; "
        "fix the name, give an absolute path, or add the directory holding it to "
        "ANSIBLE_ROLES_PATH (ANSIBLE_COLLECTIONS_PATH for a collection role)",
    )


def _resolve_playbook(name: str, search: Search, where: Where, key: str) -> Path:
    path = Path(os.path.abspath(search.base_dir / name))
    if path.is_file():
        return path
    problem = "is a directory, not a file" if path.is_dir() else "not found"
    hint = _near_misses(name, [path], dirs=False)
    raise where.error(
        key,
        f"playbook '{name}' {problem}{hint} (looked at {path}; a relative path is taken "
        f"from the directory of the watches file, {search.base_dir})",
    )


def role_and_playbook(
    values: Mapping[str, Any], search: Search, where: Where, prefix: str
) -> tuple[str | None, Path | None]:
    role = as_text(values["role"], where, prefix + "role") if "role" in values else ""
    playbook = (
        as_text(values["playbook"], where, prefix + "playbook") if "playbook" in values else ""
    )
    if role and playbook:
        raise where.error(
            f"{prefix}role",
            f"both '{prefix}role' and '{prefix}playbook' are set; keep only one "
            "(operator-sdk would silently ignore the role)",
        )
    resolved_role = _resolve_role(role, search, where, prefix + "role") if role else None
    resolved_playbook = (
        _resolve_playbook(playbook, search, where, prefix + "playbook") if playbook else None
    )
    return resolved_role, resolved_playbook
