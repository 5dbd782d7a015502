"""Wait for a condition, with a timeout: never a bare sleep standing in for one."""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def wait_for(
    probe: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.2
) -> T:
    """Call `probe` until it returns something truthy; return that. Fail after `timeout` s."""
    deadline = time.monotonic() + timeout
    last: T | None = None
    while True:
        last = probe()
        if last:
            return last
        if time.monotonic() > deadline:
            raise AssertionError(
                f"timed out after {timeout:.0f} s waiting for {what}; last: {last!r}"
            )
        time.sleep(interval)
