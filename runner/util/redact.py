"""What a run must not show: the values of the Secrets its role read or wrote (pure).

The roles' API proxy adds the `data` and `stringData` of every Secret that passes through it
to the run's `SecretValues`; every text that leaves the run for the operator's log, a
condition or an Event goes through `SecretValues.redact`, which puts `MASK` in place of each
value. A value shorter than `MIN_LENGTH` characters is not collected (masking "v", "1" or
"no" everywhere would garble every message and hide nothing worth hiding). Whatever the
values, a Secret written out in a text (`kind: Secret` with its `data`/`stringData` as a JSON
or Python mapping) has its values masked too, so a Secret that never passed through the proxy
(a definition refused before it was sent) does not leak either.
"""

from __future__ import annotations

import base64
import binascii
import json
import re
import threading
from collections.abc import Iterable, Mapping
from typing import Any

MASK = "********"
#: Values shorter than this many characters are not masked.
MIN_LENGTH = 4
_DATA_KEYS = ("data", "stringData")


def value_forms(value: str) -> set[str]:
    """The ways `value` can be written in a text: as it is, escaped as a JSON or a Python
    string, line by line when it has several lines, and in base64 (a Secret's `data`)."""
    if len(value) < MIN_LENGTH:
        return set()
    forms = {value, json.dumps(value)[1:-1], repr(value)[1:-1]}
    forms.update(line for line in value.splitlines() if len(line.strip()) >= MIN_LENGTH)
    forms.add(base64.b64encode(value.encode()).decode())
    return {f for f in forms if len(f) >= MIN_LENGTH}


def encoded_forms(encoded: str) -> set[str]:
    """The forms of a `data` value (base64): the encoded text, and the decoded value's forms
    when it is text; nothing when the decoded value is shorter than MIN_LENGTH."""
    try:
        raw = base64.b64decode(encoded, validate=True)
    except (binascii.Error, ValueError):
        return value_forms(encoded)
    try:
        text = raw.decode()
    except UnicodeDecodeError:
        return {encoded} if len(raw) >= MIN_LENGTH else set()
    return value_forms(text) | ({encoded} if len(text) >= MIN_LENGTH else set())


def secret_forms(obj: Mapping[str, Any]) -> set[str]:
    """The forms of the values of one Secret object (its `data` in base64, its `stringData`)."""
    forms: set[str] = set()
    for key, read in (("data", encoded_forms), ("stringData", value_forms)):
        values = obj.get(key)
        if isinstance(values, Mapping):
            for value in values.values():
                if isinstance(value, str):
                    forms |= read(value)
    return forms


def is_secret(obj: Any) -> bool:
    return isinstance(obj, Mapping) and obj.get("kind") == "Secret"


def mask_secret_objects(value: Any) -> Any:
    """`value` with the `data`/`stringData` values of every Secret in it masked (a copy)."""
    if isinstance(value, Mapping):
        masked = {k: mask_secret_objects(v) for k, v in value.items()}
        if is_secret(value):
            for key in _DATA_KEYS:
                if isinstance(value.get(key), Mapping):
                    masked[key] = {k: MASK for k in value[key]}
        return masked
    if isinstance(value, list):
        return [mask_secret_objects(v) for v in value]
    return value


_SECRET_KIND = re.compile(r"""['"]?kind['"]?\s*[:=]\s*['"]?Secret\b""")
_DATA_MAPPING = re.compile(r"""(['"](?:data|stringData)['"]\s*:\s*)\{([^{}]*)\}""")
_QUOTED_VALUE = re.compile(r"""(['"][^'"]*['"]\s*:\s*)(['"])((?:\\.|(?!\2).)*)\2""")


def mask_secret_text(text: str) -> str:
    """`text` with the values of the `data`/`stringData` mappings masked when it holds a
    Secret written as JSON or as a Python mapping (`{"kind": "Secret", "data": {...}}`)."""
    if not _SECRET_KIND.search(text):
        return text

    def values(match: re.Match[str]) -> str:
        inner = _QUOTED_VALUE.sub(lambda m: f"{m[1]}{m[2]}{MASK}{m[2]}", match[2])
        return f"{match[1]}{{{inner}}}"

    return _DATA_MAPPING.sub(values, text)


def trie_pattern(words: Iterable[str]) -> str:
    """One regular expression that matches any of `words`, the longest where several match
    at one place, built as a trie (`pass(?:word)?`): a text is read once whatever the number
    of words, where an alternation of hundreds of values tries each of them at each place."""
    trie: dict[str, Any] = {}
    for word in words:
        node = trie
        for char in word:
            node = node.setdefault(char, {})
        node[""] = {}
    return _node_pattern(trie)


def _node_pattern(node: dict[str, Any]) -> str:
    chain = ""
    while len(node) == 1 and "" not in node:  # a run of single characters: no group
        [(char, node)] = node.items()
        chain += re.escape(char)
    branches = [re.escape(c) + _node_pattern(child) for c, child in sorted(node.items()) if c]
    if not branches:
        return chain
    group = branches[0] if len(branches) == 1 else "(?:" + "|".join(branches) + ")"
    if "" in node:  # a word ends here: the longer ones are tried first (greedy)
        group = group if len(branches) == 1 and len(group) == 1 else f"(?:{group})"
        return chain + group + "?"
    return chain + group


class SecretValues:
    """The values one run must not show. The proxy adds (on the event loop) while the
    executor's thread redacts its log lines: a lock keeps the two apart."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._lock = threading.Lock()
        self._forms: set[str] = set()
        self._pattern: re.Pattern[str] | None = None
        for value in values:
            self.add(value)

    def __len__(self) -> int:
        return len(self._forms)

    def add(self, value: str) -> None:
        """One secret value, in all its forms."""
        self.add_forms(value_forms(value))

    def add_secret(self, obj: Mapping[str, Any]) -> None:
        """The values of one Secret object."""
        self.add_forms(secret_forms(obj))

    def add_forms(self, forms: set[str]) -> None:
        with self._lock:
            if forms - self._forms:
                self._forms |= forms
                self._pattern = None

    def _compiled(self) -> re.Pattern[str] | None:
        with self._lock:
            if self._pattern is None and self._forms:
                self._pattern = re.compile(trie_pattern(self._forms))
            return self._pattern

    def redact(self, text: str) -> str:
        """`text` with every value masked, and any Secret written out in it too."""
        pattern = self._compiled()
        if pattern is not None and text:
            text = pattern.sub(MASK, text)
        return mask_secret_text(text)
