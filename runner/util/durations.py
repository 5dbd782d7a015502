"""Go durations (`30s`, `1m30s`, `1h`, `500ms`, `0`), as operator-sdk's flags, watches.yaml
and annotations take them (pure)."""

from __future__ import annotations

import math
import re
from fractions import Fraction
from typing import Final

_DURATION_UNITS_NS: Final[dict[str, int]] = {
    "ns": 1,
    "us": 1_000,
    "\u00b5s": 1_000,  # micro sign
    "\u03bcs": 1_000,  # Greek mu
    "ms": 1_000_000,
    "s": 1_000_000_000,
    "m": 60 * 1_000_000_000,
    "h": 3600 * 1_000_000_000,
}
_DURATION_PART = re.compile(r"([0-9]*(?:\.[0-9]*)?)([^0-9.]*)")
_MAX_DURATION_NS: Final = 2**63 - 1


def parse_go_duration(text: str) -> float:
    """Parse a Go duration (``1h30m``, ``1.5s``, ``-2m``, ``0``) into seconds.

    Raises ValueError with Go's wording for anything ``time.ParseDuration`` rejects.
    """
    body = text[1:] if text[:1] in "+-" else text
    sign = -1 if text.startswith("-") else 1
    if body == "0":
        return 0.0
    if not body:
        raise ValueError(f"invalid duration {text!r}")
    total = Fraction(0)
    position = 0
    while position < len(body):
        match = _DURATION_PART.match(body, position)
        assert match is not None  # the pattern matches the empty string
        number, unit = match.groups()
        if number in ("", "."):
            raise ValueError(f"invalid duration {text!r}")
        if not unit:
            raise ValueError(f"missing unit in duration {text!r}")
        if unit not in _DURATION_UNITS_NS:
            raise ValueError(f"unknown unit {unit!r} in duration {text!r}")
        total += Fraction(number if number[0] != "." else "0" + number) * _DURATION_UNITS_NS[unit]
        position = match.end()
    if total > _MAX_DURATION_NS:
        raise ValueError(f"invalid duration {text!r} (too long)")
    return sign * math.floor(total) / 1e9


def parse_period(text: str, what: str) -> float:
    """A duration that must not be negative (a period, a delay); ValueError naming `what`."""
    seconds = parse_go_duration(text)
    if seconds < 0:
        raise ValueError(f"{what} must not be negative, got {text!r}")
    return seconds
