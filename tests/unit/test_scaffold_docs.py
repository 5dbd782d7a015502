"""docs/watches.md documents every key runner/watches/ reads."""

from __future__ import annotations

import re
from pathlib import Path

from runner.watches.messages import ENTRY_KEYS, FINALIZER_KEYS

DOC = Path(__file__).resolve().parents[2] / "docs" / "watches.md"


def test_every_watches_key_is_documented() -> None:
    text = DOC.read_text()
    rows = re.findall(r"^\| `(\w+)` \|", text, flags=re.MULTILINE)
    assert sorted(rows) == sorted(ENTRY_KEYS)
    for key in FINALIZER_KEYS:
        assert f"`{key}`" in text
