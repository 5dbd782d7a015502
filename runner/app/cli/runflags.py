"""The flags of `operator-runner run` that are the runner's own (operator-sdk's others are in
sdkflags.py, the zap flags in zapflags.py)."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from runner.ansible.interface import LogEvents
from runner.app.cli import goflags, sdkflags
from runner.app.cli.parser import log_events
from runner.app.serving.bind import BindAddressError, parse_bind_address
from runner.util.durations import parse_period

_bool = goflags.go_bool


def _duration(text: str) -> float:
    try:
        return parse_period(text, "a duration")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None


def _positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


_UNITS = {"": 1, "k": 10**3, "M": 10**6, "G": 10**9, "T": 10**12}
_UNITS.update({"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40})


def byte_size(text: str) -> int:
    """A size in bytes as Kubernetes writes quantities: 1073741824, 1Gi, 500Mi, 2G; 0 = none."""
    digits = text.strip().rstrip("kMGTi")
    unit = text.strip()[len(digits) :]
    if not digits.isdigit() or unit not in _UNITS:
        raise argparse.ArgumentTypeError(f"expected a size such as 1Gi or 500Mi, got {text!r}")
    return int(digits) * _UNITS[unit]


def _count(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {value}")
    return value


def _add_artifacts_flags(run: argparse.ArgumentParser) -> None:
    """What stays of the runs across all CRs (runner/ansible/retention.py)."""
    run.add_argument(
        "--max-artifacts-bytes",
        type=byte_size,
        default=os.environ.get("OPERATOR_RUNNER_MAX_ARTIFACTS_BYTES", "1Gi"),
        help="at most this much of runs' folders under --artifacts-dir, all CRs together: the "
        "first finished go first (each CR's latest and first failed run stay); 0: no cap "
        "(default 1Gi, or $OPERATOR_RUNNER_MAX_ARTIFACTS_BYTES)",
    )
    run.add_argument(
        "--max-artifacts-runs",
        type=_count,
        default=os.environ.get("OPERATOR_RUNNER_MAX_ARTIFACTS_RUNS", "2000"),
        help="at most this many runs' folders under --artifacts-dir, all CRs together, as "
        "--max-artifacts-bytes; 0: no cap (default 2000, or $OPERATOR_RUNNER_MAX_ARTIFACTS_RUNS)",
    )
    run.add_argument(
        "--artifacts-job-events",
        type=_bool,
        nargs="?",
        const=True,
        default=os.environ.get("OPERATOR_RUNNER_ARTIFACTS_JOB_EVENTS", "true"),
        metavar="BOOL",
        help="keep ansible-runner's job_events/ (a JSON file per event, most of a run's "
        "folder) in the runs' folders; false keeps stdout, status and rc only (default true, "
        "or $OPERATOR_RUNNER_ARTIFACTS_JOB_EVENTS)",
    )


def _verbosity(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected 0-7, got {text!r}") from None
    if not 0 <= value <= 7:
        raise argparse.ArgumentTypeError(f"expected 0-7, got {value}")
    return value


def ansible_args(text: str) -> tuple[str, ...]:
    """`--ansible-args` as the arguments it stands for.

    A Deployment's `args: ["--ansible-args='--vault-password-file /opt/ansible/pwd.yml'"]`
    reaches the operator with the quotes (no shell removes them). operator-sdk strips one
    surrounding pair of quotes and splits the rest on whitespace; so do we, except that the
    rest is split as a shell would (quotes inside it group words), which is the same for
    every value operator-sdk accepts. A value that is not wrapped in one pair of quotes is
    split as a shell would, as before.
    """
    try:
        words = shlex.split(text)
        inner = text.strip()
        if len(words) == 1 and len(inner) >= 2 and inner[0] == inner[-1] and inner[0] in "'\"":
            words = shlex.split(words[0])  # the whole value was quoted once: unwrap it
    except ValueError as err:  # unbalanced quotes
        raise argparse.ArgumentTypeError(f"cannot split {text!r}: {err}") from None
    return tuple(words)


def _bind_address(text: str) -> str:
    try:
        parse_bind_address(text)
    except BindAddressError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _add_production_flags(run: argparse.ArgumentParser) -> None:
    """Metrics, health probes, leader election and sharding (runner/app/serving, leadership.py,
    runner/app/leases), as operator-sdk."""
    run.add_argument(
        "--metrics-bind-address",
        type=_bind_address,
        default=":8443",
        help="where /metrics is served: host:port or :port, 0 switches it off (default :8443, "
        "ansible-operator's; plain HTTP unless --metrics-secure)",
    )
    sdkflags.add_metrics_security_flags(run)
    run.add_argument(
        "--health-probe-bind-address",
        type=_bind_address,
        default=":6789",
        help="where /healthz and /readyz are served; 0 switches them off (default :6789)",
    )
    run.add_argument(
        "--role-metrics-bind-address",
        type=_bind_address,
        default="127.0.0.1:5050",
        help="where roles' operator_sdk.util.osdk_metric calls are received (POST /metrics, "
        "served with the operator's own on --metrics-bind-address); 0 switches it off "
        "(default 127.0.0.1:5050, operator-sdk's)",
    )
    run.add_argument(
        "--leader-elect",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="run as one of several replicas: only the holder of a Lease reconciles "
        "(default false)",
    )
    run.add_argument(
        "--sharding",
        type=_bool,
        nargs="?",
        const=True,
        default=os.environ.get("OPERATOR_RUNNER_SHARDING", "false"),
        metavar="BOOL",
        help="run as one of several replicas that divide the CRs among themselves: each "
        "announces itself with a Lease of its own (named after --leader-election-id, in "
        "--leader-election-namespace); excludes --leader-elect (default $OPERATOR_RUNNER_SHARDING "
        "or false)",
    )
    run.add_argument(
        "--leader-election-id",
        default=None,
        help="name of the Lease (default: operator-runner-<hash of the watched API groups>)",
    )
    run.add_argument(
        "--leader-election-namespace",
        default=None,
        help="namespace of the Lease (default: the pod's namespace, else $POD_NAMESPACE; "
        "required outside a cluster)",
    )
    run.add_argument(
        "--leader-elect-lease-duration",
        type=_duration,
        default=15.0,
        help="how long standbys wait after the last renewal before taking over (default 15s)",
    )
    run.add_argument(
        "--leader-elect-renew-deadline",
        type=_duration,
        default=10.0,
        help="how long the leader tries to renew before it stops and exits (default 10s)",
    )
    run.add_argument(
        "--leader-elect-retry-period",
        type=_duration,
        default=2.0,
        help="how often candidates look at the Lease and the leader renews it (default 2s)",
    )


def add_flags(run: argparse.ArgumentParser) -> None:
    run.add_argument(
        "--watches-file",
        type=Path,
        default=Path("./watches.yaml"),
        help="path to watches.yaml (default: ./watches.yaml)",
    )
    run.add_argument(
        "--max-concurrent-reconciles",
        type=_positive_int,
        default=None,
        help="runs at once per kind (default: the CPUs this process may use, "
        "from its cgroup quota and CPU affinity)",
    )
    run.add_argument(
        "--reconcile-period",
        type=_duration,
        default=None,
        help="default period of resyncs of unchanged CRs, as a Go duration "
        "(10h by default; 0 switches resync off)",
    )
    run.add_argument(
        "--ansible-verbosity",
        type=_verbosity,
        default=2,
        help="ansible-playbook verbosity, 0-7 (default 2, as operator-sdk)",
    )
    run.add_argument(
        "--ansible-args",
        type=ansible_args,
        default=(),
        help="extra arguments for ansible-playbook, e.g. '--tags foo' (one surrounding pair "
        "of quotes is removed, as operator-sdk does)",
    )
    run.add_argument(
        "--ansible-log-events",
        type=log_events,
        default=LogEvents.TASKS,
        metavar="{Tasks,Everything,Nothing}",
        help="which Ansible events go to the log, in any case (default Tasks)",
    )
    run.add_argument(
        "--inject-owner-ref",
        type=_bool,
        nargs="?",
        const=True,
        default=True,
        metavar="BOOL",
        help="add owner references to what roles create (default true)",
    )
    run.add_argument(
        "--watch-roles",
        action="store_true",
        help="live reload: when a file of a role or playbook (or of what it includes from the "
        "project) changes, re-run every CR of its kind, also healthy ones (default off; on "
        "under make run)",
    )
    run.add_argument(
        "--owner-ref-on-update",
        type=_bool,
        nargs="?",
        const=True,
        default=False,
        metavar="BOOL",
        help="also add them when a role replaces, patches or applies an object that existed "
        "before (adopting it; default false: on create only, as operator-sdk)",
    )
    run.add_argument(
        "--log-format",
        choices=("text", "json"),
        default="text",
        help="log line format (default text)",
    )
    run.add_argument(
        "--artifacts-dir",
        type=Path,
        default=None,
        help="root of the per-CR ansible-runner folders (default: operator-sdk's "
        "/tmp/ansible-operator/runner; when another operator on this host holds it, "
        "$TMPDIR/operator-runner/<hash of the watches file's absolute path>)",
    )
    run.add_argument(
        "--executor",
        choices=("warm", "plain"),
        default=os.environ.get("OPERATOR_RUNNER_EXECUTOR", "warm"),
        help="warm: ansible-playbook and modules fork from processes with Ansible and the "
        "kubernetes client already imported (much less CPU per reconcile); plain: a fresh "
        "ansible-playbook per run, as operator-sdk (default warm, or $OPERATOR_RUNNER_EXECUTOR)",
    )
    run.add_argument(
        "--warm-idle-timeout",
        type=_duration,
        default=os.environ.get("OPERATOR_RUNNER_WARM_IDLE_TIMEOUT", "120s"),
        help="stop the warm executors (~100 MB) after this long without a run; they start "
        "again with the next one (~1 s). 0 keeps them (default 120s, or "
        "$OPERATOR_RUNNER_WARM_IDLE_TIMEOUT)",
    )
    run.add_argument(
        "--graceful-shutdown-timeout",
        type=_duration,
        default=30.0,
        help="on SIGTERM, how long running reconciles may take to finish (default 30s)",
    )
    run.add_argument(
        "--kubeconfig",
        default=None,
        help="kubeconfig (default: in-cluster, else $KUBECONFIG, else ~/.kube/config)",
    )
    _add_artifacts_flags(run)
    _add_production_flags(run)
