"""controller-runtime's zap flags (pkg/log/zap: BindFlags), mapped onto the runner's logging.

- `--zap-devel`: development defaults (console encoder, level debug, stack traces from warn);
  without it production defaults, which here are ours: text lines (zap's are JSON; say
  `--zap-encoder=json` or `--log-format=json`), level info, no stack traces.
- `--zap-encoder json|console`: `--log-format json|text`.
- `--zap-log-level`: debug, info, warn, error, dpanic, panic, fatal (controller-runtime accepts
  debug, info, error; zap the others), or an integer > 0: a more verbose debug level, which is
  debug here (the runner has one).
- `--zap-stacktrace-level`: log lines at and above that level carry the stack of where they
  were logged (as zap's do); without the flag none do (expected conditions are one line).
- `--zap-time-encoding`: epoch, millis, nano(s), iso8601, rfc3339, rfc3339nano: the time field's
  format (default: ours, ISO 8601 with milliseconds).
"""

from __future__ import annotations

import argparse
import logging

from runner.app.cli.goflags import add_bool

#: zap's level names, as Python logging levels (dpanic, panic and fatal are above error).
LEVELS = {
    "debug": logging.DEBUG,
    "info": logging.INFO,
    "warn": logging.WARNING,
    "error": logging.ERROR,
    "dpanic": logging.CRITICAL,
    "panic": logging.CRITICAL,
    "fatal": logging.CRITICAL,
}
TIME_ENCODINGS = ("epoch", "millis", "nano", "nanos", "iso8601", "rfc3339", "rfc3339nano")


def log_level(text: str) -> int:
    """`--zap-log-level`: a level name (any case) or an integer > 0 (verbose debug)."""
    value = text.strip().lower()
    if value in LEVELS:
        return LEVELS[value]
    try:
        number = int(value)
    except ValueError:
        number = 0
    if number > 0:
        return logging.DEBUG
    raise argparse.ArgumentTypeError(
        f"invalid log level {text!r}: one of {', '.join(LEVELS)}, or an integer > 0"
    )


def _encoder(text: str) -> str:
    value = text.strip().lower()
    if value not in ("json", "console"):
        raise argparse.ArgumentTypeError(f"invalid encoder {text!r}: json or console")
    return value


def _time_encoding(text: str) -> str:
    value = text.strip().lower()
    if value not in TIME_ENCODINGS:
        raise argparse.ArgumentTypeError(
            f"invalid time encoding {text!r}: one of {', '.join(TIME_ENCODINGS)}"
        )
    return "nanos" if value == "nano" else value


def add_flags(run: argparse.ArgumentParser) -> None:
    zap = run.add_argument_group("logging (controller-runtime's zap flags)")
    add_bool(zap, "--zap-devel", False, "development defaults: level debug, stack traces from warn")
    zap.add_argument("--zap-encoder", type=_encoder, default=None, help="json or console")
    zap.add_argument(
        "--zap-log-level",
        type=log_level,
        default=None,
        metavar="LEVEL",
        help="debug, info (default), warn, error, dpanic, panic, fatal, or an integer > 0 "
        "(debug). info: task results that changed or failed, runs that changed something; "
        "debug adds every task and every run",
    )
    zap.add_argument(
        "--zap-stacktrace-level",
        type=log_level,
        default=None,
        metavar="LEVEL",
        help="log lines at or above this level carry the stack where they were logged "
        "(default: none)",
    )
    zap.add_argument(
        "--zap-time-encoding",
        type=_time_encoding,
        default=None,
        metavar="ENCODING",
        help=f"the time field: {', '.join(TIME_ENCODINGS)} (default: ISO 8601, milliseconds)",
    )


def level(args: argparse.Namespace) -> int:
    if args.zap_log_level is not None:
        return int(args.zap_log_level)
    return logging.DEBUG if args.zap_devel else logging.INFO


def stack_level(args: argparse.Namespace) -> int | None:
    if args.zap_stacktrace_level is not None:
        return int(args.zap_stacktrace_level)
    return logging.WARNING if args.zap_devel else None


def log_format(args: argparse.Namespace, given: set[str]) -> str:
    """`--log-format` when given, else `--zap-encoder`'s, else text."""
    if "--log-format" in given or args.zap_encoder is None:
        return str(args.log_format)
    return "json" if args.zap_encoder == "json" else "text"


def notes(args: argparse.Namespace, given: set[str]) -> list[str]:
    if "--log-format" in given and args.zap_encoder is not None:
        return [f"--zap-encoder={args.zap_encoder} is overridden by --log-format={args.log_format}"]
    return []
