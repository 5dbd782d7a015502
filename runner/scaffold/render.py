"""Templates (package data under templates/) and writing a set of files all or nothing.

Templates hold ``@name@`` placeholders, replaced by :func:`render`; everything else (Jinja's
``{{ }}``, make's ``$(...)``, shell) passes through untouched. A :class:`Plan` collects the
files a command writes; nothing is written until every check has passed.
"""

from __future__ import annotations

import os
import re
import tempfile
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from typing import Any, Final

import yaml

__all__ = ["Plan", "dump_yaml", "project_templates", "render", "template"]

_PLACEHOLDER: Final = re.compile(r"@([a-z_]+)@")


def _root() -> Traversable:
    return resources.files("runner.scaffold").joinpath("templates")


def template(name: str) -> str:
    """The text of ``templates/<name>`` (``name`` with ``/`` separators)."""
    node = _root()
    for part in name.split("/"):
        node = node.joinpath(part)
    return node.read_text(encoding="utf-8")


def _walk(node: Traversable, prefix: str) -> Iterator[str]:
    for child in sorted(node.iterdir(), key=lambda item: item.name):
        if child.name == "__pycache__":
            continue
        if child.is_dir():
            yield from _walk(child, f"{prefix}{child.name}/")
        else:
            yield f"{prefix}{child.name}"


def project_templates() -> list[str]:
    """Paths (relative, ``/``-separated) of the files under ``templates/project``."""
    return list(_walk(_root().joinpath("project"), ""))


def render(text: str, values: Mapping[str, str]) -> str:
    """Replace every ``@name@`` of ``text``; a placeholder without a value is a bug."""

    def replace(match: re.Match[str]) -> str:
        return values[match.group(1)]

    return _PLACEHOLDER.sub(replace, text)


class _Dumper(yaml.SafeDumper):
    """Block style with indented lists, as the project's other YAML files."""

    def increase_indent(self, flow: bool = False, indentless: bool = False) -> None:
        super().increase_indent(flow, False)


def dump_yaml(data: Any) -> str:
    """``data`` as block-style YAML, keys in their order, lists indented."""
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=False, width=100)


@dataclass
class Plan:
    """The files a command writes under ``root``: relative path -> whole new content."""

    root: Path
    files: dict[str, str] = field(default_factory=dict)
    added_version: tuple[str, str] | None = None  # create api of a kind that exists: what, next

    def add(self, path: str, content: str) -> None:
        self.files[path] = content

    def write(self) -> list[str]:
        """Write every file (each one atomically: a temporary file renamed over it)."""
        for path, content in self.files.items():
            target = self.root / path
            target.parent.mkdir(parents=True, exist_ok=True)
            handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.")
            try:
                with os.fdopen(handle, "w", encoding="utf-8") as stream:
                    stream.write(content)
                mode = target.stat().st_mode & 0o777 if target.exists() else 0o644
                os.chmod(temporary, mode)
                os.replace(temporary, target)
            except BaseException:
                Path(temporary).unlink(missing_ok=True)
                raise
        return sorted(self.files)
