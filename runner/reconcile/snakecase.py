"""camelCase -> snake_case conversion of custom resource spec keys.

operator-sdk's Ansible operator hands a CR's ``spec`` to Ansible with every key
converted by ``paramconv.ToSnake`` (``internal/ansible/paramconv/paramconv.go`` in
operator-framework/ansible-operator-plugins), recursively through nested mappings
and lists (``paramconv.MapToSnake`` / ``convertMapKeys``).  Roles written for
operator-sdk rely on the exact spelling that function produces, quirks included:

* a key starting with an upper-case ASCII letter gets a leading ``_``
  (``ThisThing`` -> ``_this_thing``), unless the first word is one of the special
  words below (``URLsegress`` -> ``_urls_egress`` but ``URLegress`` -> ``url_egress``);
* letters followed by digits followed by a letter and digits get spaces inserted
  (``a1b2`` -> ``a_1_b2``), while ``sizeK8sBuckets`` -> ``size_k8s_buckets``;
* the special words ``HTTP``, ``URL`` and ``IP`` (and their plurals ``HTTPs``,
  ``URLs``, ``IPs``) are kept together (``egressIPs`` -> ``egress_ips``), except in
  keys that are entirely upper case;
* runs of upper-case letters are one word (``JSONData`` -> ``json_data``);
* ``' '``, ``'_'`` and ``'-'`` are word separators.

This module reproduces that algorithm, written afresh in Python.  Deliberate
differences, all on inputs where operator-sdk misbehaves:

* ``to_snake("")`` (or a key of only spaces) returns ``""``; Go indexes the first
  rune of the empty string and panics.
* Go walks its ``wordMapping`` map in random order; we use a fixed order
  (``HTTP``, ``URL``, ``IP``).  For every input we know of the order makes no
  difference to the result.
* When two keys of one mapping convert to the same snake_case key, the one that
  comes later in the mapping wins; in Go the winner depends on map iteration order.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

__all__ = ["snake_keys", "to_snake"]

# Go: regexp `([a-zA-Z])(\d+)([a-zA-Z](\d+))`; Go's \d is ASCII only.
_NUMBER_SEQUENCE = re.compile(r"([a-zA-Z])([0-9]+)([a-zA-Z]([0-9]+))")

# Go's wordMapping, lower-case word -> upper-case form.  Fixed iteration order.
_WORD_MAPPING: dict[str, str] = {"http": "HTTP", "url": "URL", "ip": "IP"}

_SEPARATORS = frozenset(" _-")


def _is_upper(char: str) -> bool:
    return "A" <= char <= "Z"


def _is_lower(char: str) -> bool:
    return "a" <= char <= "z"


def _go_lower(text: str) -> str:
    """Lower-case like Go's strings.ToLower: one rune in, one rune out."""
    return "".join(char.lower()[0] if char.lower() else char for char in text)


def _has_lower_case(text: str) -> bool:
    """True when Go's ``strings.ToUpper(s) != s`` (simple, one-rune case mapping)."""
    return any(len(char.upper()) == 1 and char.upper() != char for char in text)


def _add_word_boundaries_to_numbers(text: str) -> str:
    return _NUMBER_SEQUENCE.sub(r"\1 \2 \3", text)


def _isolate_special_word(value: str, word: str) -> str:
    """Surround the first occurrence of ``word`` (or its plural) with ``_``.

    A trailing ``s`` right after the word is taken as a plural and upper-cased so
    that it stays part of the word (``egressIPs`` -> ``egress_IPS``).
    """
    idx = value.find(word)
    if idx < 0:
        return value
    end = idx + len(word)
    if end == len(value):
        return value[:idx] + "_" + value[idx:]
    if value[end] == "s":
        if end == len(value) - 1:
            return value[:idx] + "_" + word + "S"
        if idx == 0:
            return word + "S_" + value[end + 1 :]
        return value[:idx] + "_" + word + "S_" + value[end + 1 :]
    if idx == 0:
        return word + "_" + value[end:]
    return value[:idx] + "_" + word + "_" + value[end:]


def _preprocess_word_mapping(value: str) -> str:
    for word in _WORD_MAPPING.values():
        value = _isolate_special_word(value, word)
    return value


def _case_changes_after(text: str, index: int) -> bool:
    """True when ``text[index]`` and the next character are letters of opposite case."""
    if index + 1 >= len(text):
        return False
    char, nxt = text[index], text[index + 1]
    return (_is_upper(char) and _is_lower(nxt)) or (_is_lower(char) and _is_upper(nxt))


def _split_words(text: str) -> list[str]:
    """The word-splitting loop of Go's ToSnake; returns the lower-cased words."""
    words: list[str] = []
    current = ""
    position = -1  # Go's iReal: index of this character within the current word
    for index, char in enumerate(text):
        position += 1
        at_boundary = position > 0 and current[-1:] != "_" and _case_changes_after(text, index)
        if at_boundary and _is_upper(char):
            # "JSONData": the D starts a new word, JSON is complete.
            words.append(_go_lower(current))
            current = char
            position = 0
        elif at_boundary and _is_lower(char):
            # "sizeK8s": the e ends the word "size".
            words.append(_go_lower(current + char))
            current = ""
            position = -1
        elif char in _SEPARATORS:
            words.append(_go_lower(current))
            current = ""
            position = -1
        else:
            current += char
    words.append(_go_lower(current))
    return words


def to_snake(name: str) -> str:
    """Convert ``name`` to snake_case exactly as operator-sdk's ``paramconv.ToSnake``.

    >>> to_snake("sizeK8sBuckets")
    'size_k8s_buckets'
    >>> to_snake("egressIPs")
    'egress_ips'
    >>> to_snake("ThisShouldHaveUnderscores")
    '_this_should_have_underscores'
    """
    text = _add_word_boundaries_to_numbers(name).strip(" ")
    if not text:
        return ""  # Go panics here.
    prefix = "_" if _is_upper(text[0]) else ""
    if _has_lower_case(text):
        text = _preprocess_word_mapping(text)
    words = _split_words(text)
    joined = "_".join(words)
    if words[0] in _WORD_MAPPING:
        return joined
    return prefix + joined


def snake_keys(value: object) -> object:
    """Return ``value`` with every mapping key converted by :func:`to_snake`.

    Like operator-sdk's ``convertMapKeys``: nested mappings and lists are walked,
    everything else (including the values themselves) is returned unchanged.  The
    input is not modified; mappings and lists are copied.  Non-string keys (which
    JSON cannot produce) are kept as they are.
    """
    if isinstance(value, Mapping):
        return {
            (to_snake(key) if isinstance(key, str) else key): snake_keys(item)
            for key, item in value.items()
        }
    if isinstance(value, list):
        return [snake_keys(item) for item in value]
    return value
