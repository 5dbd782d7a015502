"""The command line's parser: a bad command line refused in one line, operator-sdk's spellings."""

from __future__ import annotations

import argparse
import difflib
from typing import NoReturn

from runner.ansible.interface import LogEvents


class Parser(argparse.ArgumentParser):
    """argparse, with a bad command line refused in one line (no usage block)."""

    def error(self, message: str) -> NoReturn:
        if "unrecognized arguments" in message:
            message += _nearest_flags(self, message)
        self.exit(2, f"{self.prog}: error: {message} (see {self.prog} --help)\n")


def _nearest_flags(parser: argparse.ArgumentParser, message: str) -> str:
    known: list[str] = []
    for action in parser._actions:
        known.extend(action.option_strings)
        if isinstance(action, argparse._SubParsersAction):
            for sub in action.choices.values():
                known.extend(o for a in sub._actions for o in a.option_strings)
    words = [w.split("=", 1)[0] for w in message.split(":", 1)[-1].split()]
    hints = [
        f"{w} -> {close[0]}"
        for w in words
        if (close := difflib.get_close_matches(w, known, n=1, cutoff=0.75))
    ]
    return f"; did you mean: {', '.join(hints)}?" if hints else ""


def log_events(text: str) -> LogEvents:
    """`--ansible-log-events`, in any case, as operator-sdk reads it."""
    for value in LogEvents:
        if value.value.lower() == text.strip().lower():
            return value
    raise argparse.ArgumentTypeError(
        f"invalid choice {text!r}: Tasks, Everything or Nothing (any case)"
    )
