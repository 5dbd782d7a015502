"""Read ``watches.yaml``: which custom resources to watch and what Ansible content to run.

The file format is operator-sdk's (``internal/ansible/watches/watches.go`` in
operator-framework/ansible-operator-plugins, ansible-operator v1.42).  What operator-sdk
does, and what we reproduce:

* The whole file text goes through environment expansion first (Go ``os.Expand``):
  ``${NAME}`` and ``$NAME`` are replaced by the variable's value; references to unset
  variables are kept.
* The top level is a list of entries; a missing/empty file body means no watches.
* ``version`` and ``kind`` are required, ``group`` may be empty (core resources).
* Every key is matched case-insensitively (Go's encoding/json), so ``ManageStatus``
  works like ``manageStatus``; unknown keys are ignored.  We accept both too, with a
  warning.
* Scalars land in string fields as text (``version: 1`` is ``"1"``, a label value
  ``true`` is ``"true"``), booleans follow YAML 1.1 (``yes``, ``on``, ``y`` are true),
  and a key given twice in one mapping keeps its last value.
* Defaults: ``manageStatus`` true, ``watchDependentResources`` true,
  ``watchClusterScopedResources`` false, ``snakeCaseParameters`` true,
  ``watchAnnotationsChanges`` false, ``maxRunnerArtifacts`` 20 (0 also means 20),
  ``reconcilePeriod`` unset (operator-sdk then uses its ``--reconcile-period`` flag,
  default 10h), empty ``blacklist``, ``vars`` and ``selector``.
* ``reconcilePeriod`` is a Go duration string (``30s``, ``1m30s``, ``1.5h``, ``500ms``).
* A finalizer needs a ``name`` and a ``role``, a ``playbook`` or non-empty ``vars``
  (vars alone re-run the watch's own role/playbook with those vars on top).
* Two entries with the same group/version/kind are an error.

Where we differ on purpose:

* ``markUnsafe`` defaults to **true** (operator-sdk: false): a CR's spec must never be
  able to run Jinja in the operator.
* ``reconcilePeriod`` distinguishes "not set" (``None``: use the CLI default) from
  ``0`` (``0.0``: periodic reconciliation off).  operator-sdk treats 0 as "not set"
  and cannot turn periodic reconciliation off; a negative period, which it accepts
  and which silently disables requeueing there, is an error here.  A plain integer
  is taken as seconds (operator-sdk rejects it).
* Relative roles and playbooks are looked up from the watches file's directory, not
  from the process's working directory (the same thing in operator-sdk's images,
  where both are ``/opt/ansible``).  Role lookup order: absolute path; then
  ``<dir>/<name>``, ``<dir>/roles/<name>``, then ``<p>/<name>`` and
  ``<p>/roles/<name>`` for each ``p`` of ``roles_paths`` (``ANSIBLE_ROLES_PATH``).
  A name ``ns.coll.role`` is first looked up as a collection role under each
  collections directory (``ANSIBLE_COLLECTIONS_PATH`` or, when unset,
  ``~/.ansible/collections`` and ``/usr/share/ansible/collections``, then the Python
  path, which is where ansible-core also looks); such a role is kept as its FQCN.
* What operator-sdk lets through or only finds out later is an error at load time
  here, with a message naming the file, the entry and the key: a finalizer role or
  playbook that does not exist (accepted there when the finalizer has vars), an
  invalid label selector (fatal there when the controller starts), both ``role`` and
  ``playbook`` (it silently prefers the playbook), a blacklist entry without version
  or kind (it could never match anything).
* Undefined ``$NAME`` references are kept exactly as written (Go rewrites ``$NAME``
  as ``${NAME}``), and malformed ``${`` is kept rather than dropped.
* YAML with several documents is an error (operator-sdk reads the first one only);
  so are floating-point numbers in text fields (quote them) and one key written two
  ways in one entry (``role`` and ``Role``: operator-sdk keeps the last).
"""

from __future__ import annotations

import difflib
import os
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, Final

import yaml

from runner.kube.paths import api_version
from runner.util.durations import parse_go_duration

__all__ = [
    "DEFAULT_MAX_RUNNER_ARTIFACTS",
    "GVK",
    "Finalizer",
    "LoadResult",
    "Watch",
    "WatchesError",
    "expand_env",
    "load_watches",
    "parse_go_duration",
]

DEFAULT_MAX_RUNNER_ARTIFACTS: Final = 20


class WatchesError(ValueError):
    """watches.yaml cannot be used; the message says where, what and how to fix it."""


@dataclass(frozen=True)
class GVK:
    """A Kubernetes group/version/kind; ``group`` is ``""`` for core resources."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return api_version(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True)
class Finalizer:
    """What to run when a watched resource carrying finalizer ``name`` is deleted.

    ``role``/``playbook`` both ``None`` means: run the watch's own role or playbook,
    with ``vars`` on top of the usual extra vars.
    """

    name: str
    role: str | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)


@dataclass(frozen=True)
class Watch:
    """One entry of watches.yaml, validated, with its role or playbook located.

    ``role`` is an absolute directory path, or a collection role's FQCN
    (``ns.coll.role``, see :attr:`is_collection_role`).  ``reconcile_period`` is in
    seconds: ``None`` = not set in the file (use the CLI default), ``0.0`` = no
    periodic reconciliation.  ``selector`` is a metav1.LabelSelector as a dict with
    ``matchLabels`` and/or ``matchExpressions``; empty selects everything.
    """

    gvk: GVK
    role: str | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)
    reconcile_period: float | None = None
    manage_status: bool = True
    watch_dependent_resources: bool = True
    watch_cluster_scoped_resources: bool = False
    snake_case_parameters: bool = True
    watch_annotations_changes: bool = False
    mark_unsafe: bool = True
    selector: dict[str, Any] = field(default_factory=dict, hash=False)
    blacklist: tuple[GVK, ...] = ()
    finalizer: Finalizer | None = None
    max_runner_artifacts: int = DEFAULT_MAX_RUNNER_ARTIFACTS

    @property
    def is_collection_role(self) -> bool:
        """True when :attr:`role` is a collection FQCN rather than a directory."""
        return self.role is not None and not os.path.isabs(self.role)


@dataclass(frozen=True)
class LoadResult:
    """The watches of a file, in file order, and the warnings met while reading it."""

    watches: list[Watch]
    warnings: list[str]


# ---------------------------------------------------------------------------
# Environment expansion (Go os.Expand, as operator-sdk's replaceEnvVariables)
# ---------------------------------------------------------------------------

_ENV_REFERENCE = re.compile(r"\$(?:\{([^}]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([*#$@!?\-0-9]))")


def expand_env(text: str, environ: Mapping[str, str]) -> str:
    """Replace ``${NAME}`` and ``$NAME`` by ``environ[NAME]``; keep unknown references."""

    def replace(match: re.Match[str]) -> str:
        name = next((group for group in match.groups() if group is not None), "")
        if name and name in environ:
            return environ[name]
        return match.group(0)

    return _ENV_REFERENCE.sub(replace, text)


# ---------------------------------------------------------------------------
# Go durations (time.ParseDuration, used by metav1.Duration)
# ---------------------------------------------------------------------------


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
# Keys
# ---------------------------------------------------------------------------

_ENTRY_KEYS: Final = (
    "group",
    "version",
    "kind",
    "role",
    "playbook",
    "vars",
    "reconcilePeriod",
    "manageStatus",
    "watchDependentResources",
    "watchClusterScopedResources",
    "snakeCaseParameters",
    "watchAnnotationsChanges",
    "markUnsafe",
    "selector",
    "blacklist",
    "finalizer",
    "maxRunnerArtifacts",
)
_FINALIZER_KEYS: Final = ("name", "role", "playbook", "vars")
_GVK_KEYS: Final = ("group", "version", "kind")
_SELECTOR_KEYS: Final = ("matchLabels", "matchExpressions")
_EXPRESSION_KEYS: Final = ("key", "operator", "values")
_SELECTOR_OPERATORS: Final = ("In", "NotIn", "Exists", "DoesNotExist")


def _suggestion(word: str, known: Iterable[str]) -> str:
    """`` (did you mean 'x'?)`` for the known word closest to ``word``, else ``""``."""
    by_folded = {candidate.casefold(): candidate for candidate in known}
    close = difflib.get_close_matches(word.casefold(), list(by_folded), n=1, cutoff=0.6)
    return f" (did you mean '{by_folded[close[0]]}'?)" if close else ""


def _go_text(value: object) -> str | None:
    """The text sigs.k8s.io/yaml puts into a Go string field; None if we refuse the value.

    null is "", booleans are "true"/"false", integers their digits.  Floats are refused
    (their Go spelling, e.g. ``1e+06``, is rarely what was meant).
    """
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | str):
        return str(value)
    return None


def _describe(value: object) -> str:
    names = {dict: "a mapping", list: "a list", str: "a string", bool: "a boolean"}
    if value is None:
        return "empty (null)"
    kind = names.get(type(value), type(value).__name__)
    return f"{kind} ({value!r})" if isinstance(value, str | int | float) else kind


# ---------------------------------------------------------------------------
# Location of a problem, and the messages
# ---------------------------------------------------------------------------


@dataclass
class _Where:
    """One entry of the file: builds messages naming file, entry and key."""

    file: str
    index: int  # 1-based
    label: str
    warnings: list[str]

    def _prefix(self, key: str | None) -> str:
        entry = f"entry {self.index}" + (f" ({self.label})" if self.label else "")
        return f"{self.file}: {entry}: " + (f"key '{key}': " if key else "")

    def error(self, key: str | None, message: str) -> WatchesError:
        return WatchesError(self._prefix(key) + message)

    def warn(self, key: str | None, message: str) -> None:
        self.warnings.append(self._prefix(key) + message)


def _entry_label(raw: Mapping[Any, Any]) -> str:
    """``group/version Kind`` from an unvalidated entry, for messages."""
    found = {
        key.casefold(): _go_text(value)
        for key, value in raw.items()
        if isinstance(key, str) and key.casefold() in _GVK_KEYS
    }
    group = found.get("group") or ""
    version = found.get("version") or "?"
    kind = found.get("kind") or "?"
    if version == "?" and kind == "?":
        return ""
    return f"{group}/{version} {kind}" if group else f"{version} {kind}"


def _canonical_keys(
    raw: Mapping[Any, Any], known: Sequence[str], where: _Where, prefix: str
) -> dict[str, Any]:
    """Map keys to their known spelling (case-insensitively, like Go); warn about others.

    Null values are dropped: in operator-sdk a null is the same as a missing key.
    """
    by_folded = {name.casefold(): name for name in known}
    result: dict[str, Any] = {}
    origin: dict[str, str] = {}
    for key, value in raw.items():
        shown = f"{prefix}{key}"
        canonical = by_folded.get(key.casefold()) if isinstance(key, str) else None
        if canonical is None:
            hint = _suggestion(str(key), known)
            where.warn(None, f"unknown key '{shown}' ignored{hint}")
            continue
        if canonical in origin:
            raise where.error(
                f"{prefix}{canonical}",
                f"given twice, as '{prefix}{origin[canonical]}' and '{shown}'; keep one",
            )
        if canonical != key:
            where.warn(
                None,
                f"key '{shown}' read as '{prefix}{canonical}' (keys are matched "
                f"case-insensitively, as in operator-sdk); write '{prefix}{canonical}'",
            )
        origin[canonical] = key
        if value is not None:
            result[canonical] = value
    return result


def _mapping(value: object, where: _Where, key: str) -> Mapping[Any, Any]:
    if not isinstance(value, Mapping):
        raise where.error(key, f"must be a mapping, found {_describe(value)}")
    return value


def _text(value: object, where: _Where, key: str) -> str:
    text = _go_text(value)
    if text is None:
        raise where.error(key, f"must be a string, found {_describe(value)}; quote it")
    return text


def _flag(values: Mapping[str, Any], key: str, default: bool, where: _Where) -> bool:
    value = values.get(key, default)
    if not isinstance(value, bool):
        raise where.error(
            key, f"must be true or false, found {_describe(value)}; write {key}: true or false"
        )
    return value


# ---------------------------------------------------------------------------
# vars
# ---------------------------------------------------------------------------


def _string_keys(value: Any, where: _Where, key: str) -> Any:
    """Copy ``value`` turning integer/boolean mapping keys into text, as Go does."""
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for item_key, item in value.items():
            text = _go_text(item_key) if item_key is not None else None
            if text is None:
                raise where.error(
                    key, f"mapping key {item_key!r} is not text; quote it (e.g. '\"1.5\": ...')"
                )
            result[text] = _string_keys(item, where, key)
        return result
    if isinstance(value, list):
        return [_string_keys(item, where, key) for item in value]
    return value


def _vars(values: Mapping[str, Any], where: _Where, prefix: str) -> dict[str, Any]:
    """The ``vars`` mapping (``{}`` when absent), with text keys."""
    if "vars" not in values:
        return {}
    key = prefix + "vars"
    converted: dict[str, Any] = _string_keys(_mapping(values["vars"], where, key), where, key)
    return converted


# ---------------------------------------------------------------------------
# Role and playbook lookup
# ---------------------------------------------------------------------------


@dataclass(frozen=True)
class _Search:
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


def _role_candidates(name: str, search: _Search) -> list[Path]:
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
    return _suggestion(wanted, sorted(siblings)) if wanted else ""


def _resolve_role(name: str, search: _Search, where: _Where, key: str) -> str:
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


def _resolve_playbook(name: str, search: _Search, where: _Where, key: str) -> Path:
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


def _role_and_playbook(
    values: Mapping[str, Any], search: _Search, where: _Where, prefix: str
) -> tuple[str | None, Path | None]:
    role = _text(values["role"], where, prefix + "role") if "role" in values else ""
    playbook = _text(values["playbook"], where, prefix + "playbook") if "playbook" in values else ""
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


# ---------------------------------------------------------------------------
# Other entry keys
# ---------------------------------------------------------------------------


def _gvk(values: Mapping[str, Any], where: _Where) -> GVK:
    group, version, kind = (_text(values.get(key), where, key) for key in _GVK_KEYS)
    for key, text in (("version", version), ("kind", kind)):
        if not text:
            raise where.error(
                key,
                f"missing; every entry needs 'version' and 'kind' "
                f"('group' may be left out for core resources), e.g. {key}: "
                + ("v1alpha1" if key == "version" else "Memcached"),
            )
    return GVK(group, version, kind)


def _reconcile_period(values: Mapping[str, Any], where: _Where) -> float | None:
    key = "reconcilePeriod"
    if key not in values:
        return None
    value = values[key]
    if isinstance(value, int) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str):
        try:
            seconds = parse_go_duration(value)
        except ValueError as exc:
            raise where.error(
                key, f"{exc}; write a Go duration such as 30s, 1m30s, 1h or 500ms"
            ) from None
    else:
        raise where.error(
            key, f"must be a duration such as 30s, 1m30s or 1h, found {_describe(value)}"
        )
    if seconds < 0:
        raise where.error(key, f"must not be negative ({value!r}); use 0 to turn it off")
    if seconds == 0:
        where.warn(
            key,
            "0 turns periodic reconciliation off (operator-sdk would instead use its "
            "--reconcile-period default); leave the key out to use the default",
        )
    return seconds


def _max_runner_artifacts(values: Mapping[str, Any], where: _Where) -> int:
    key = "maxRunnerArtifacts"
    value = values.get(key, DEFAULT_MAX_RUNNER_ARTIFACTS)
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, bool) or not isinstance(value, int):
        raise where.error(key, f"must be a whole number, found {_describe(value)}")
    if value < 0:
        raise where.error(key, f"must not be negative, found {value}")
    if value == 0:
        where.warn(
            key,
            f"0 means the default ({DEFAULT_MAX_RUNNER_ARTIFACTS}), as in operator-sdk; "
            "to keep every artifact set the annotation "
            "ansible.sdk.operatorframework.io/max-runner-artifacts: '0' on the resource",
        )
        return DEFAULT_MAX_RUNNER_ARTIFACTS
    return value


def _blacklist(values: Mapping[str, Any], where: _Where) -> tuple[GVK, ...]:
    raw = values.get("blacklist", [])
    if not isinstance(raw, list):
        raise where.error(
            "blacklist",
            f"must be a list of {{group, version, kind}} mappings, found {_describe(raw)}",
        )
    result = []
    for number, item in enumerate(raw, start=1):
        key = f"blacklist[{number}]"
        fields = _canonical_keys(_mapping(item, where, key), _GVK_KEYS, where, key + ".")
        group, version, kind = (_text(fields.get(k), where, f"{key}.{k}") for k in _GVK_KEYS)
        if not version or not kind:
            raise where.error(
                key,
                "needs 'version' and 'kind' ('group' may be empty for core resources); "
                "a blacklist entry matches one exact group/version/kind",
            )
        result.append(GVK(group, version, kind))
    return tuple(result)


# ---------------------------------------------------------------------------
# Label selector (metav1.LabelSelector, validated like LabelSelectorAsSelector)
# ---------------------------------------------------------------------------

_LABEL_NAME = re.compile(r"^(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_DNS_SUBDOMAIN = re.compile(
    r"^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*$"
)


def _label_key_problem(key: str) -> str | None:
    prefix, slash, name = key.rpartition("/")
    if slash and not (len(prefix) <= 253 and _DNS_SUBDOMAIN.match(prefix)):
        return f"label key prefix {prefix!r} is not a DNS subdomain (e.g. example.com)"
    if not (len(name) <= 63 and _LABEL_NAME.match(name)):
        return (
            f"label key {key!r} is not valid: at most 63 letters, digits, '-', '_' or '.', "
            "starting and ending with a letter or digit, optionally after 'prefix/'"
        )
    return None


def _label_value_problem(value: str) -> str | None:
    if value == "" or (len(value) <= 63 and _LABEL_NAME.match(value)):
        return None
    unset = " (is an environment variable it names unset?)" if "$" in value else ""
    return (
        f"label value {value!r} is not valid{unset}: at most 63 letters, digits, '-', '_' "
        "or '.', starting and ending with a letter or digit"
    )


def _match_labels(raw: object, where: _Where, key: str) -> dict[str, str]:
    labels: dict[str, str] = {}
    for label_key, label_value in _mapping(raw, where, key).items():
        text_key = _text(label_key, where, key)
        text_value = _text(label_value, where, f"{key}.{text_key}")
        problem = _label_key_problem(text_key) or _label_value_problem(text_value)
        if problem:
            raise where.error(key, problem)
        labels[text_key] = text_value
    return labels


def _expression(raw: object, where: _Where, key: str) -> dict[str, Any]:
    fields = _canonical_keys(_mapping(raw, where, key), _EXPRESSION_KEYS, where, key + ".")
    label_key = _text(fields.get("key"), where, f"{key}.key")
    operator = _text(fields.get("operator"), where, f"{key}.operator")
    values_raw = fields.get("values", [])
    if not isinstance(values_raw, list):
        raise where.error(f"{key}.values", f"must be a list, found {_describe(values_raw)}")
    values = [_text(value, where, f"{key}.values") for value in values_raw]
    problem = _label_key_problem(label_key) or next(
        (p for p in map(_label_value_problem, values) if p), None
    )
    if operator not in _SELECTOR_OPERATORS:
        problem = f"operator {operator!r} is not one of {', '.join(_SELECTOR_OPERATORS)}"
    elif operator in ("In", "NotIn") and not values:
        problem = problem or f"operator {operator} needs a non-empty 'values' list"
    elif operator in ("Exists", "DoesNotExist") and values:
        problem = problem or f"operator {operator} takes no 'values'"
    if problem:
        raise where.error(key, problem)
    return {"key": label_key, "operator": operator, "values": values}


def _selector(values: Mapping[str, Any], where: _Where) -> dict[str, Any]:
    if "selector" not in values:
        return {}
    fields = _canonical_keys(
        _mapping(values["selector"], where, "selector"), _SELECTOR_KEYS, where, "selector."
    )
    selector: dict[str, Any] = {}
    labels = _match_labels(fields.get("matchLabels", {}), where, "selector.matchLabels")
    if labels:
        selector["matchLabels"] = labels
    raw_expressions = fields.get("matchExpressions", [])
    if not isinstance(raw_expressions, list):
        raise where.error(
            "selector.matchExpressions",
            f"must be a list of {{key, operator, values}}, found {_describe(raw_expressions)}",
        )
    expressions = [
        _expression(item, where, f"selector.matchExpressions[{number}]")
        for number, item in enumerate(raw_expressions, start=1)
    ]
    if expressions:
        selector["matchExpressions"] = expressions
    return selector


# ---------------------------------------------------------------------------
# Finalizer and entry
# ---------------------------------------------------------------------------


def _finalizer(values: Mapping[str, Any], search: _Search, where: _Where) -> Finalizer | None:
    if "finalizer" not in values:
        return None
    fields = _canonical_keys(
        _mapping(values["finalizer"], where, "finalizer"), _FINALIZER_KEYS, where, "finalizer."
    )
    name = _text(fields.get("name"), where, "finalizer.name")
    if not name:
        raise where.error(
            "finalizer.name", "missing; a finalizer needs a name, e.g. name: example.com/finalizer"
        )
    role, playbook = _role_and_playbook(fields, search, where, "finalizer.")
    finalizer_vars = _vars(fields, where, "finalizer.")
    if role is None and playbook is None and not finalizer_vars:
        raise where.error(
            "finalizer",
            "needs a 'role', a 'playbook' or non-empty 'vars' (vars alone re-run the "
            "watch's own role or playbook with those vars)",
        )
    return Finalizer(name=name, role=role, playbook=playbook, vars=finalizer_vars)


def _watch(raw: Mapping[Any, Any], search: _Search, where: _Where) -> Watch:
    values = _canonical_keys(raw, _ENTRY_KEYS, where, "")
    gvk = _gvk(values, where)
    role, playbook = _role_and_playbook(values, search, where, "")
    if role is None and playbook is None:
        raise where.error(
            "role",
            "missing; set 'role' (a role name or path) or 'playbook' (a playbook path)",
        )
    return Watch(
        gvk=gvk,
        role=role,
        playbook=playbook,
        vars=_vars(values, where, ""),
        reconcile_period=_reconcile_period(values, where),
        manage_status=_flag(values, "manageStatus", True, where),
        watch_dependent_resources=_flag(values, "watchDependentResources", True, where),
        watch_cluster_scoped_resources=_flag(values, "watchClusterScopedResources", False, where),
        snake_case_parameters=_flag(values, "snakeCaseParameters", True, where),
        watch_annotations_changes=_flag(values, "watchAnnotationsChanges", False, where),
        mark_unsafe=_flag(values, "markUnsafe", True, where),
        selector=_selector(values, where),
        blacklist=_blacklist(values, where),
        finalizer=_finalizer(values, search, where),
        max_runner_artifacts=_max_runner_artifacts(values, where),
    )


# ---------------------------------------------------------------------------
# File
# ---------------------------------------------------------------------------


def _read_text(path: Path, name: str) -> str:
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


def _parse_yaml(text: str, name: str, warnings: list[str]) -> object:
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


def _entries(document: object, name: str, warnings: list[str]) -> list[object]:
    if document is None:
        warnings.append(f"{name}: no entries; nothing will be watched")
        return []
    if not isinstance(document, list):
        raise WatchesError(
            f"{name}: the top level must be a list of entries (each starting with '- '), "
            f"found {_describe(document)}"
        )
    return document


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
    text = expand_env(_read_text(path, name), environ)
    entries = _entries(_parse_yaml(text, name, warnings), name, warnings)
    search = _Search(
        base_dir=Path(os.path.abspath(path)).parent,
        roles_paths=tuple(Path(os.path.abspath(p)) for p in roles_paths),
        collection_roots=tuple(collection_roots),
    )
    watches = []
    for number, raw in enumerate(entries, start=1):
        if not isinstance(raw, Mapping):
            where = _Where(name, number, "", warnings)
            raise where.error(None, f"must be a mapping of keys, found {_describe(raw)}")
        watches.append(_watch(raw, search, _Where(name, number, _entry_label(raw), warnings)))
    _check_duplicates(watches, name)
    return LoadResult(watches=watches, warnings=warnings)
