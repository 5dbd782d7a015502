"""The watches.yaml model: what one entry says, validated and resolved."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from runner.kube.paths import api_version

DEFAULT_MAX_RUNNER_ARTIFACTS: Final = 20


class WatchesError(ValueError):
    """watches.yaml cannot be used; the message says where, what and how to fix it."""


@dataclass(frozen=True)
class GVK:
    """A Kubernetes group/version/kind; ``group`` is ``""`` for core resources."""

    group: str
    version: str
    kind: str

    @property
    def api_version(self) -> str:
        """``group/version``, or just ``version`` for the core group."""
        return api_version(self.group, self.version)

    def __str__(self) -> str:
        return f"{self.api_version}, Kind={self.kind}"


@dataclass(frozen=True)
class Finalizer:
    """What to run when a watched resource carrying finalizer ``name`` is deleted.

    ``role``/``playbook`` both ``None`` means: run the watch's own role or playbook,
    with ``vars`` on top of the usual extra vars.
    """

    name: str
    role: str | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)


#: What the API server may send an admission webhook (admissionregistration.k8s.io/v1).
OPERATIONS: Final = ("CREATE", "UPDATE", "DELETE", "CONNECT")


@dataclass(frozen=True)
class Admission:
    """A watch's `validate:` or `mutate:`: the role or playbook that answers the API server's
    AdmissionReviews of its kind, and the webhook's settings (runner/watches/admission.py)."""

    role: str | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)
    failure_policy: str = "Fail"  # Fail | Ignore: when no answer comes in time
    timeout_seconds: int = 10  # the API server's wait, 1..30
    operations: tuple[str, ...] = ("CREATE", "UPDATE")

    @property
    def is_collection_role(self) -> bool:
        return self.role is not None and not os.path.isabs(self.role)


@dataclass(frozen=True)
class FieldMap:
    """One field of a kind under its path in each version that has it (``convert.fields``):
    ``(("v1alpha1", ("spec", "size")), ("v1beta1", ("spec", "replicas")))``."""

    paths: tuple[tuple[str, tuple[str, ...]], ...]

    def path(self, version: str) -> tuple[str, ...] | None:
        """The field's path in ``version``; None when the item does not name that version."""
        for name, path in self.paths:
            if name == version:
                return path
        return None


@dataclass(frozen=True)
class Convert:
    """How the objects of a watched kind are converted between the CRD's versions: a role or a
    playbook run for each ConversionReview, or a declarative map of renamed fields
    (``fields``), applied by the runner itself."""

    role: str | None = None
    playbook: Path | None = None
    fields: tuple[FieldMap, ...] = ()
    vars: dict[str, Any] = field(default_factory=dict, hash=False)

    @property
    def by_ansible(self) -> bool:
        """True when a role or playbook converts (False: the field map)."""
        return self.role is not None or self.playbook is not None


@dataclass(frozen=True)
class Watch:
    """One entry of watches.yaml, validated, with its role or playbook located.

    ``role`` is an absolute directory path, or a collection role's FQCN
    (``ns.coll.role``, see :attr:`is_collection_role`).  ``reconcile_period`` is in
    seconds: ``None`` = not set in the file (use the CLI default), ``0.0`` = no
    periodic reconciliation.  ``selector`` is a metav1.LabelSelector as a dict with
    ``matchLabels`` and/or ``matchExpressions``; empty selects everything.  ``watch_reads``
    (ours, ``watchReads``): the kinds whose objects, once a run of a CR read them through the
    proxy, reconcile that CR when they change (runner/dependents/references.py).  ``convert``
    (ours, not operator-sdk's): the kind's conversion webhook, see :class:`Convert`.
    """

    gvk: GVK
    role: str | None = None
    playbook: Path | None = None
    vars: dict[str, Any] = field(default_factory=dict, hash=False)
    reconcile_period: float | None = None
    manage_status: bool = True
    watch_dependent_resources: bool = True
    watch_cluster_scoped_resources: bool = False
    snake_case_parameters: bool = True
    watch_annotations_changes: bool = False
    mark_unsafe: bool = True
    selector: dict[str, Any] = field(default_factory=dict, hash=False)
    blacklist: tuple[GVK, ...] = ()
    watch_reads: tuple[GVK, ...] = ()
    finalizer: Finalizer | None = None
    max_runner_artifacts: int = DEFAULT_MAX_RUNNER_ARTIFACTS
    validate: Admission | None = None
    mutate: Admission | None = None
    convert: Convert | None = None

    @property
    def is_collection_role(self) -> bool:
        """True when :attr:`role` is a collection FQCN rather than a directory."""
        return self.role is not None and not os.path.isabs(self.role)


@dataclass(frozen=True)
class LoadResult:
    """The watches of a file, in file order, and the warnings met while reading it."""

    watches: list[Watch]
    warnings: list[str]
