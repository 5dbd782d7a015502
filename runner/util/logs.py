"""Log lines: human text by default, one JSON object per line with `--log-format json`.

Every line about a CR carries its kind, namespace and name: pass `extra=cr_fields(...)`
(stored as `cr_kind`, `cr_namespace`, `cr_name`, since LogRecord owns `name`).
"""

from __future__ import annotations

import json
import logging
import sys
from datetime import UTC, datetime
from typing import Any

CR_KEYS = ("kind", "namespace", "name")
LEVELS = {"debug": logging.DEBUG, "info": logging.INFO, "error": logging.ERROR}
OTHER_KEYS = ("ansible_event", "file", "operation", "dry_run", "seconds")
#: The time field's formats (controller-runtime's --zap-time-encoding); None: ISO 8601, ms.
TIME_FORMATS = ("epoch", "millis", "nanos", "iso8601", "rfc3339", "rfc3339nano")


def cr_fields(kind: str, namespace: str | None, name: str) -> dict[str, Any]:
    return {"cr_kind": kind, "cr_namespace": namespace, "cr_name": name}


_time_format: str | None = None


def _stamp(record: logging.LogRecord) -> str:
    moment = datetime.fromtimestamp(record.created, UTC)
    if _time_format is None:
        return moment.isoformat(timespec="milliseconds")
    if _time_format == "epoch":
        return f"{record.created:.6f}"
    if _time_format == "millis":
        return f"{record.created * 1000:.3f}"
    if _time_format == "nanos":
        return str(int(record.created * 1_000_000_000))
    if _time_format == "iso8601":
        return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{moment.microsecond // 1000:03d}Z"
    if _time_format == "rfc3339":
        return moment.strftime("%Y-%m-%dT%H:%M:%SZ")
    return moment.isoformat(timespec="microseconds").replace("+00:00", "Z")  # rfc3339nano


class _StackFrom(logging.Filter):
    """Lines at or above `level` carry the stack where they were logged (zap's stacktraces)."""

    def __init__(self, level: int) -> None:
        super().__init__()
        self.level = level

    def filter(self, record: logging.LogRecord) -> bool:
        if record.levelno >= self.level and not record.exc_info and not record.stack_info:
            import traceback

            frames = traceback.format_stack()[:-6]  # without logging's own frames
            record.stack_info = "Stack (most recent call last):\n" + "".join(frames).rstrip()
        return True


class TextFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        about = ""
        if fields.get("cr_kind"):
            ns = fields.get("cr_namespace")
            about = f" [{fields['cr_kind']} {ns + '/' if ns else ''}{fields.get('cr_name')}]"
        line = f"{_stamp(record)} {record.levelname:<7} {record.name}{about} {record.getMessage()}"
        if record.exc_info:
            line += "\n" + self.formatException(record.exc_info)
        if record.stack_info:
            line += "\n" + record.stack_info
        return line


class JsonFormatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        fields = record.__dict__
        entry: dict[str, object] = {
            "ts": _stamp(record),
            "level": record.levelname.lower(),
            "logger": record.name,
            "msg": record.getMessage(),
        }
        for key in CR_KEYS:
            if fields.get(f"cr_{key}") is not None:
                entry[key] = fields[f"cr_{key}"]
        for key in OTHER_KEYS:
            if fields.get(key) is not None:
                entry[key] = fields[key]
        if record.exc_info:
            entry["error"] = self.formatException(record.exc_info)
        if record.stack_info:
            entry["stacktrace"] = record.stack_info
        return json.dumps(entry, default=str)


def setup(
    fmt: str = "text",
    level: int = logging.INFO,
    time_format: str | None = None,
    stack_level: int | None = None,
) -> None:
    """Log lines to stderr: `fmt` text or json, at `level` and above; `time_format` one of
    TIME_FORMATS (None: ISO 8601 with milliseconds); `stack_level`: lines at or above it carry
    the stack where they were logged."""
    global _time_format
    _time_format = time_format
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    if stack_level is not None:
        handler.addFilter(_StackFrom(stack_level))
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kopf", "asyncio", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
