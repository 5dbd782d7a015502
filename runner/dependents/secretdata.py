"""The Secrets a run reads or writes through the roles' proxy, collected for redaction (pure).

Every request on core/v1 `secrets` (get, list, watch, create, replace, patch, apply, delete)
is read on its way: the request's body and the API server's answer (one object, a list, a
Table with objects, a watch's stream of events). The values of their `data` and `stringData`
go to the run's `SecretValues` (runner/util/redact.py), which masks them in everything the
operator says about the run. JSON only: a client that asks for protobuf (none of Ansible's
modules do) is not read.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Mapping
from typing import Any

import yaml

from runner.util.redact import SecretValues, encoded_forms, value_forms

#: A response larger than this is relayed without being read to its end (its start is read).
MAX_SCANNED = 64 * 1024 * 1024


def is_secrets_path(path: str) -> bool:
    """A core/v1 `secrets` path: `/api/v1[/watch][/namespaces/<ns>]/secrets[/<name>]`."""
    parts = [p for p in path.split("?", 1)[0].split("/") if p]
    if len(parts) < 3 or parts[0] != "api":
        return False
    rest = parts[2:]
    if rest[0] == "watch":
        rest = rest[1:]
    if len(rest) >= 3 and rest[0] == "namespaces":
        rest = rest[2:]
    return len(rest) in (1, 2) and rest[0] == "secrets"


def collect(doc: Any, values: SecretValues) -> None:
    """Every Secret in `doc`: an object, a list's items, a watch event's object, a Table's
    rows' objects (an object with `data` or `stringData`: the path said they are Secrets)."""
    if isinstance(doc, Mapping):
        if isinstance(doc.get("data"), Mapping) or isinstance(doc.get("stringData"), Mapping):
            values.add_secret(doc)
        for value in doc.values():
            if isinstance(value, (Mapping, list)):
                collect(value, values)
    elif isinstance(doc, list):
        for item in doc:
            collect(item, values)


def collect_request(body: bytes, content_type: str, values: SecretValues) -> None:
    """A write's body: an object (JSON, or YAML for server-side apply), a merge patch, or a
    JSON patch whose operations set `data` or `stringData` (or one key of them)."""
    if not body:
        return
    try:
        if content_type == "application/apply-patch+yaml":
            doc = yaml.safe_load(body)
        else:
            doc = json.loads(body)
    except (ValueError, yaml.YAMLError):
        return
    if isinstance(doc, list) and all(isinstance(op, Mapping) for op in doc):
        for op in doc:
            _collect_op(op, values)
    else:
        collect(doc, values)


def _collect_op(op: Mapping[str, Any], values: SecretValues) -> None:
    path, value = str(op.get("path", "")), op.get("value")
    if path in ("/data", "/stringData") and isinstance(value, Mapping):
        values.add_secret({path[1:]: value})
    elif isinstance(value, str) and path.startswith("/data/"):
        values.add_forms(encoded_forms(value))
    elif isinstance(value, str) and path.startswith("/stringData/"):
        values.add_forms(value_forms(value))
    elif isinstance(value, (Mapping, list)):
        collect(value, values)


class StreamScanner:
    """Reads a response as it is relayed: each complete JSON document (a watch's events are
    one per line; any other answer is one document) is collected as soon as it is whole."""

    def __init__(self, values: SecretValues) -> None:
        self._values = values
        self._buffer = b""
        self._seen = 0

    def feed(self, chunk: bytes) -> None:
        self._seen += len(chunk)
        if self._seen > MAX_SCANNED:
            self._buffer = b""
            return
        self._buffer += chunk
        start = 0
        while (end := self._buffer.find(b"\n", start)) >= 0:
            try:
                doc = json.loads(self._buffer[: end + 1])
            except ValueError:  # a document written on several lines: read on
                start = end + 1
                continue
            collect(doc, self._values)
            self._buffer = self._buffer[end + 1 :]
            start = 0

    def close(self) -> None:
        if self._buffer.strip():
            with contextlib.suppress(ValueError):
                collect(json.loads(self._buffer), self._values)
        self._buffer = b""
