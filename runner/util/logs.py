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
OTHER_KEYS = ("ansible_event", "file")


def cr_fields(kind: str, namespace: str | None, name: str) -> dict[str, Any]:
    return {"cr_kind": kind, "cr_namespace": namespace, "cr_name": name}


def _stamp(record: logging.LogRecord) -> str:
    return datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds")


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
        return json.dumps(entry, default=str)


def setup(fmt: str = "text", level: int = logging.INFO) -> None:
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    root.handlers[:] = [handler]
    root.setLevel(level)
    for noisy in ("kopf", "asyncio", "urllib3", "kubernetes"):
        logging.getLogger(noisy).setLevel(max(level, logging.WARNING))
