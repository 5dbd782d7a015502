"""Throwaway namespaces: one context manager, and the `namespace` fixture built on it."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from ..conftest import Cluster


@contextmanager
def temporary_namespace(cluster: Cluster, prefix: str = "t") -> Iterator[str]:
    """A new namespace `<prefix>-<random>`, deleted (without waiting) afterwards."""
    name = f"{prefix}-{uuid.uuid4().hex[:8]}"
    cluster.kubectl("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl(
            "delete", "namespace", name, "--wait=false", "--ignore-not-found", check=False
        )


@pytest.fixture
def namespace(cluster: Cluster) -> Iterator[str]:
    """A namespace of its own for one test (exposed to every test by conftest.py)."""
    with temporary_namespace(cluster) as name:
        yield name
