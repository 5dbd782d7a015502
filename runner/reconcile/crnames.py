"""A CR's names where its runs and log lines carry them: the run's environment (for modules
that default to the CR being reconciled) and the log line's fields."""

from __future__ import annotations

from typing import Any

from runner.kube.resources import ObjectRef
from runner.util.logs import cr_fields


def cr_log_fields(ref: ObjectRef) -> dict[str, Any]:
    return cr_fields(ref.resource.kind, ref.namespace, ref.name)


def cr_env(ref: ObjectRef, unsaved: bool = False) -> dict[str, str]:
    """Names of the CR being reconciled, for modules that default to it (k8s_status);
    `unsaved`: a check-mode run of a CR given from a file, which may not be in the cluster."""
    env = {
        "OPERATOR_RUNNER_CR_API_VERSION": ref.resource.api_version,
        "OPERATOR_RUNNER_CR_KIND": ref.resource.kind,
        "OPERATOR_RUNNER_CR_PLURAL": ref.resource.plural,
        "OPERATOR_RUNNER_CR_NAME": ref.name,
        "OPERATOR_RUNNER_CR_NAMESPACE": ref.namespace or "",
    }
    if unsaved:
        env["OPERATOR_RUNNER_CR_UNSAVED"] = "1"
    return env
