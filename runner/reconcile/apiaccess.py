"""What a reconcile's run reaches the API through, and what it read followed: protocols that the
app fills in (the roles' proxy and the read-following watches of runner/dependents)."""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Protocol

from runner.dependents.ownership import Owner
from runner.kube.resources import ObjectRef
from runner.util.redact import SecretValues


class RunAccess(Protocol):
    """How a run reaches the API: runner.dependents.proxy.Proxy (a kubeconfig per run)."""

    def run_env(
        self, owner: Owner, values: SecretValues | None = None
    ) -> AbstractContextManager[dict[str, str]]: ...


class ReadFollowing(Protocol):
    """What a run read, followed (`watchReads`): runner.dependents.references.References."""

    def settle(self, ref: ObjectRef, succeeded: bool) -> None: ...

    def forget(self, ref: ObjectRef) -> None: ...
