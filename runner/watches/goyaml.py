"""Reading the watches file as YAML the way go-yaml v2 (behind sigs.k8s.io/yaml) does."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, ClassVar

import yaml

from runner.watches.messages import describe
from runner.watches.model import WatchesError

# ---------------------------------------------------------------------------
# YAML loading, resolving scalars like go-yaml v2 (behind sigs.k8s.io/yaml)
# ---------------------------------------------------------------------------

_BOOL_TAG = "tag:yaml.org,2002:bool"
_INT_TAG = "tag:yaml.org,2002:int"
_FLOAT_TAG = "tag:yaml.org,2002:float"
_REPLACED_TAGS = frozenset(
    {_BOOL_TAG, _INT_TAG, _FLOAT_TAG, "tag:yaml.org,2002:timestamp", "tag:yaml.org,2002:value"}
)


class _GoYamlLoader(yaml.SafeLoader):
    """SafeLoader with go-yaml v2's implicit types: ``y``/``n`` are booleans,
    ``1e3`` and ``0o17`` are numbers, ``12:30`` and ``2024-01-02`` stay text.

    It also records keys that appear twice in one mapping (last one wins, as in Go).
    """

    bool_values: ClassVar[dict[str, bool]] = {
        **yaml.SafeLoader.bool_values,
        "y": True,
        "n": False,
    }

    def __init__(self, stream: str) -> None:
        super().__init__(stream)
        self.duplicate_keys: list[tuple[str, int]] = []

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict[Any, Any]:
        seen: set[str] = set()
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and key_node.tag != "tag:yaml.org,2002:merge":
                if key_node.value in seen:
                    self.duplicate_keys.append((key_node.value, key_node.start_mark.line + 1))
                seen.add(key_node.value)
        return super().construct_mapping(node, deep=deep)


def _configure_go_yaml_loader() -> None:
    _GoYamlLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in _REPLACED_TAGS]
        for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
    }
    _GoYamlLoader.add_implicit_resolver(
        _BOOL_TAG,
        re.compile(
            r"^(?:y|Y|yes|Yes|YES|n|N|no|No|NO|true|True|TRUE|false|False|FALSE"
            r"|on|On|ON|off|Off|OFF)$"
        ),
        list("yYnNtTfFoO"),
    )
    _GoYamlLoader.add_implicit_resolver(  # before float: "10" is an int
        _INT_TAG,
        re.compile(
            r"^(?:[-+]?0b[0-1_]+|[-+]?0o?[0-7_]+|[-+]?(?:0|[1-9][0-9_]*)|[-+]?0x[0-9a-fA-F_]+)$"
        ),
        list("-+0123456789"),
    )
    _GoYamlLoader.add_implicit_resolver(
        _FLOAT_TAG,
        re.compile(
            r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
            r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$"
        ),
        list("-+0123456789."),
    )


_configure_go_yaml_loader()


# ---------------------------------------------------------------------------
# File
# ---------------------------------------------------------------------------


def read_text(path: Path, name: str) -> str:
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise WatchesError(
            f"{name}: file not found; create it or point the operator at the right file"
        ) from None
    except IsADirectoryError:
        raise WatchesError(f"{name}: is a directory; give the path of the watches file") from None
    except UnicodeDecodeError as exc:
        raise WatchesError(f"{name}: not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise WatchesError(f"{name}: cannot be read: {exc.strerror or exc}") from None


def parse_yaml(text: str, name: str, warnings: list[str]) -> object:
    loader = _GoYamlLoader(text)
    try:
        document = loader.get_single_data()
    except yaml.composer.ComposerError as exc:
        if "single document" in str(exc):
            raise WatchesError(
                f"{name}: holds several YAML documents ('---'); put all entries in one list"
            ) from None
        raise WatchesError(f"{name}: not valid YAML: {exc}") from None
    except yaml.YAMLError as exc:
        raise WatchesError(f"{name}: not valid YAML: {exc}") from None
    finally:
        loader.dispose()
    for key, line in loader.duplicate_keys:
        warnings.append(
            f"{name}: line {line}: key '{key}' appears twice in the same mapping; "
            "the last one wins (as in operator-sdk); remove one"
        )
    return document


def entries_of(document: object, name: str, warnings: list[str]) -> list[object]:
    if document is None:
        warnings.append(f"{name}: no entries; nothing will be watched")
        return []
    if not isinstance(document, list):
        raise WatchesError(
            f"{name}: the top level must be a list of entries (each starting with '- '), "
            f"found {describe(document)}"
        )
    return document
