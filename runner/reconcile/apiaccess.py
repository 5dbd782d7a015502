"""What a reconcile's run reaches the API through: protocols that the app fills in (the roles'
proxy of runner/dependents)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from runner.dependents.ownership import Owner
from runner.util.redact import SecretValues


class RunAccess(Protocol):
    """How a run reaches the API: runner.dependents.proxy.Proxy (a kubeconfig per run)."""

    def run_env(
        self, owner: Owner, values: SecretValues | None = None
    ) -> AbstractContextManager[dict[str, str]]: ...
