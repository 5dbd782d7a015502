"""What every integration test uses: the operator launcher and `Env`, namespaces, waits; and a
fault-injecting proxy between the operator and the API server (faultproxy.py)."""

from .env import CrKind, Env, completion, or_none
from .faultproxy import FaultProxy, Sent, fault_proxy
from .namespaces import namespace, temporary_namespace
from .operator import (
    PROJECT,
    RunningOperator,
    condition,
    crd,
    install_crd,
    launch,
    line_at,
    logged,
    logged_at,
    operator,
    wait_logged,
)
from .waiting import wait_for

__all__ = [
    "PROJECT",
    "CrKind",
    "Env",
    "FaultProxy",
    "RunningOperator",
    "Sent",
    "completion",
    "condition",
    "crd",
    "fault_proxy",
    "install_crd",
    "launch",
    "line_at",
    "logged",
    "logged_at",
    "namespace",
    "operator",
    "or_none",
    "temporary_namespace",
    "wait_for",
    "wait_logged",
]
