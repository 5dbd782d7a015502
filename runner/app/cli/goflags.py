"""Boolean flags as Go's pflag reads them (`--flag`, `--flag=true`, `--flag=false`), for the
flags operator-sdk's `ansible-operator run` and controller-runtime define."""

from __future__ import annotations

import argparse
from typing import Any, Protocol


class Arguments(Protocol):
    """A parser or one of its argument groups."""

    def add_argument(self, *args: Any, **kwargs: Any) -> argparse.Action: ...


def go_bool(text: str) -> bool:
    """A flag's boolean as Go's strconv.ParseBool reads it (plus yes/no/on/off)."""
    value = text.strip().lower()
    if value in ("1", "t", "true", "yes", "on"):
        return True
    if value in ("0", "f", "false", "no", "off"):
        return False
    raise argparse.ArgumentTypeError(f"expected true or false, got {text!r}")


def add_bool(parser: Arguments, flag: str, default: bool | None, text: str) -> None:
    """A boolean flag as pflag takes it: `--flag`, `--flag=true`, `--flag=false`."""
    parser.add_argument(
        flag, type=go_bool, nargs="?", const=True, default=default, metavar="BOOL", help=text
    )
