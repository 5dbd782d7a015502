"""`operator-runner`: the command line, with operator-sdk's `ansible-operator run` flags."""

from __future__ import annotations

import argparse
import logging
import os
import shlex
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import cast

from runner import __version__
from runner.ansible.artifacts import default_artifacts_dir
from runner.ansible.interface import LogEvents
from runner.app.cli import reconcile as reconcile_cli  # reconcile KIND/NAME
from runner.app.cli import sdkflags, zapflags
from runner.app.cli.parser import Parser, log_events
from runner.app.serving.bind import BindAddressError, parse_bind_address
from runner.scaffold import cli as scaffold_cli  # init, create api
from runner.util import logs
from runner.util.durations import parse_period

log = logging.getLogger("runner.cli")


_bool = sdkflags.go_bool


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


def build_parser(prog: str = "operator-runner") -> argparse.ArgumentParser:
    parser = Parser(
        prog=prog,
        description="Run Kubernetes operators written as Ansible roles "
        "(operator-sdk's watches.yaml, kopf, ansible-runner).",
    )
    parser.add_argument("--version", action="version", version=f"operator-runner {__version__}")
    sub = cast(
        "argparse._SubParsersAction[argparse.ArgumentParser]",
        parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=Parser),
    )
    sub.add_parser("version", help="print the version")
    run = sub.add_parser(
        "run",
        allow_abbrev=False,  # as Go's flags: a flag is spelled out
        help="watch the CRs of watches.yaml and reconcile them with their roles",
        description="Watch the custom resources named in watches.yaml and run their Ansible "
        "role or playbook for every change. Takes every flag of operator-sdk's "
        "`ansible-operator run`. Environment: WATCH_NAMESPACE (comma-separated; "
        "empty = all namespaces), MAX_CONCURRENT_RECONCILES_<KIND>_<GROUP> (or "
        "WORKER_<KIND>_<GROUP>), ANSIBLE_VERBOSITY_<KIND>_<GROUP>, ANSIBLE_ROLES_PATH, "
        "ANSIBLE_COLLECTIONS_PATH, ANSIBLE_GATHERING (explicit: role runs gather no facts), "
        "ANSIBLE_DEBUG_LOGS (each run's output to the log), OPERATOR_NAME (the Lease's name).",
    )
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
    _add_production_flags(run)
    sdkflags.add_flags(run)
    reconcile_cli.add_command(sub)
    scaffold_cli.add_commands(sub)
    return parser


def watch_namespaces(environ: dict[str, str] | os._Environ[str]) -> list[str]:
    """WATCH_NAMESPACE: comma-separated namespaces; empty or unset = every namespace."""
    raw = environ.get("WATCH_NAMESPACE", "")
    return [ns.strip() for ns in raw.split(",") if ns.strip()]


def main(argv: Sequence[str] | None = None) -> int:
    words = list(sys.argv[1:] if argv is None else argv)
    prog = sdkflags.program_name(sys.argv[0])
    parser = build_parser(prog)
    args = parser.parse_args(words)
    if args.command == "version":
        print(f"{prog} {__version__}")
        return 0
    if args.command in scaffold_cli.COMMANDS:
        return scaffold_cli.run(args)
    if args.command == "reconcile":
        return reconcile_cli.run(args)
    if args.command != "run":
        parser.print_help()
        return 2
    given = sdkflags.given_flags(words)
    try:
        sdkflags.resolve(args, given, os.environ)
    except sdkflags.FlagConflict as err:
        parser.error(str(err))
    if args.sharding and args.leader_elect:
        parser.error(
            "--sharding and --leader-elect exclude each other: with --sharding every replica "
            "works (on its share of the CRs); with --leader-elect one works and the others wait"
        )
    logs.setup(
        zapflags.log_format(args, given),
        zapflags.level(args),
        args.zap_time_encoding,
        zapflags.stack_level(args),
    )
    for line in sdkflags.notes(args, given, os.environ):
        log.info("%s", line)
    return _run(args)


def _run(args: argparse.Namespace) -> int:
    from runner.app.manager.config import OperatorConfig, ProductionConfig
    from runner.app.manager.run import run_operator  # heavy imports only when running
    from runner.app.serving.metricsserver import MetricsSecurity

    production = ProductionConfig(
        metrics_bind_address=args.metrics_bind_address,
        health_probe_bind_address=args.health_probe_bind_address,
        role_metrics_bind_address=args.role_metrics_bind_address,
        leader_elect=args.leader_elect,
        sharding=args.sharding,
        leader_election_id=args.leader_election_id,
        leader_election_namespace=args.leader_election_namespace,
        lease_duration=args.leader_elect_lease_duration,
        renew_deadline=args.leader_elect_renew_deadline,
        retry_period=args.leader_elect_retry_period,
        metrics_security=MetricsSecurity(
            secure=args.metrics_secure,
            require_rbac=args.metrics_require_rbac,
            cert_dir=args.metrics_cert_path,
            cert_name=args.metrics_cert_name,
            key_name=args.metrics_cert_key,
        ),
    )
    config = OperatorConfig(
        watches_file=args.watches_file,
        namespaces=watch_namespaces(os.environ),
        max_concurrent_reconciles=args.max_concurrent_reconciles,
        reconcile_period=args.reconcile_period,
        verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        log_events=args.ansible_log_events,
        inject_owner_ref=args.inject_owner_ref,
        owner_ref_on_update=args.owner_ref_on_update,
        artifacts_dir=args.artifacts_dir or default_artifacts_dir(args.watches_file),
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        kubeconfig=args.kubeconfig,
        executor=args.executor,
        warm_idle_timeout=args.warm_idle_timeout,
        production=production,
        watch_roles=args.watch_roles,
        proxy_port=args.proxy_port or 0,
    )
    return run_operator(config)


if __name__ == "__main__":
    sys.exit(main())
