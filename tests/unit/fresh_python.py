"""A probe run in a fresh Python, for what happens at import time: the test process itself has
imported everything already. Shared by the unit tests (not a test module)."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def run(probe: str) -> str:
    """Run `probe` (dedented) with this interpreter; it must exit 0. Its stdout, stripped."""
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(probe)], capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip()
