"""Kubernetes timestamps (RFC 3339), read (pure)."""

from __future__ import annotations

from datetime import UTC, datetime


def parse_time(text: object) -> datetime | None:
    if not isinstance(text, str) or not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        return None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
