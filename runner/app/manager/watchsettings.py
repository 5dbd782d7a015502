"""The settings of one watch's reconciles: flags, operator-sdk's per-kind environment
variables (`<PREFIX>_<KIND>_<GROUP>`), and watches.yaml."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import TYPE_CHECKING

from runner.ansible.interface import skip_facts
from runner.app.process.capacity import default_concurrency
from runner.app.process.limits import memory_limit_bytes, usable_cpus
from runner.reconcile import fieldmanager
from runner.reconcile.reconciler import Options
from runner.watches import Watch

if TYPE_CHECKING:
    from runner.app.manager.config import OperatorConfig

log = logging.getLogger("runner.manager")

DEFAULT_RECONCILE_PERIOD = 10 * 3600.0  # operator-sdk's --reconcile-period default


def kind_env_name(prefix: str, watch: Watch) -> str:
    """operator-sdk's per-kind variable: `<PREFIX>_<KIND>_<GROUP>`, dots as underscores."""
    group = watch.gvk.group.replace(".", "_").upper()
    return f"{prefix}_{watch.gvk.kind.upper()}_{group}"


def _env_int(environ: Mapping[str, str], name: str, minimum: int, maximum: int) -> int | None:
    raw = environ.get(name)
    if raw is None or raw == "":
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SystemExit(f"operator-runner: {name}={raw!r} is not an integer") from None
    if not minimum <= value <= maximum:
        raise SystemExit(f"operator-runner: {name}={value} must be between {minimum} and {maximum}")
    return value


def watch_options(config: OperatorConfig, watch: Watch, environ: Mapping[str, str]) -> Options:
    period = watch.reconcile_period
    if period is None:
        period = config.reconcile_period
    if period is None:
        period = DEFAULT_RECONCILE_PERIOD
    verbosity = _env_int(environ, kind_env_name("ANSIBLE_VERBOSITY", watch), 0, 7)
    return Options(
        reconcile_period=period or None,
        verbosity=config.verbosity if verbosity is None else verbosity,
        ansible_args=config.ansible_args,
        log_events=config.log_events,
        skip_facts=skip_facts(environ),
        debug_logs=debug_logs(environ),
        field_manager=fieldmanager.field_manager(fieldmanager.installed_line()),
    )


def debug_logs(environ: Mapping[str, str]) -> bool:
    """ANSIBLE_DEBUG_LOGS, read as operator-sdk reads it (Go's strconv.ParseBool; anything else
    is false, with one log line)."""
    raw = environ.get("ANSIBLE_DEBUG_LOGS")
    if raw is None:
        return False
    if raw in ("1", "t", "T", "TRUE", "true", "True"):
        return True
    if raw not in ("0", "f", "F", "FALSE", "false", "False"):
        log.warning("ANSIBLE_DEBUG_LOGS=%r is not a boolean: runs' output is not logged", raw)
    return False


def watch_workers(config: OperatorConfig, watch: Watch, environ: Mapping[str, str]) -> int:
    """MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP>, else operator-sdk's older name for it,
    WORKER_<KIND>_<GROUP>, else the flag, else what the pod's CPUs and memory allow."""
    for prefix in ("MAX_CONCURRENT_RECONCILES", "WORKER"):
        from_env = _env_int(environ, kind_env_name(prefix, watch), 1, 10_000)
        if from_env is not None:
            return from_env
    return config.max_concurrent_reconciles or default_concurrency(
        usable_cpus(), memory_limit_bytes()
    )
