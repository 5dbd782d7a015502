"""`operator-runner`'s commands (run, reconcile, preview, check-roles, init, create api,
version) and `main`: a command line in, the manager's configuration out (run's own flags in
runflags.py, operator-sdk's in sdkflags.py)."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import platform
import sys
from collections.abc import Sequence
from typing import cast

from runner import __version__
from runner.ansible.artifacts import default_artifacts_dir
from runner.ansible.retention import Caps
from runner.app.cli import preview as preview_cli  # preview, check-roles
from runner.app.cli import reconcile as reconcile_cli  # reconcile KIND/NAME
from runner.app.cli import runflags, sdkflags, webhookflags, zapflags
from runner.app.cli.parser import Parser
from runner.scaffold import cli as scaffold_cli  # init, create api
from runner.util import logs

log = logging.getLogger("runner.cli")


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
    runflags.add_flags(run)
    webhookflags.add_flags(run)
    sdkflags.add_flags(run)
    reconcile_cli.add_command(sub)
    preview_cli.add_commands(sub)
    scaffold_cli.add_commands(sub)
    return parser


def version_line(prog: str) -> str:
    """`version`: as operator-sdk's `ansible-operator version` prints it when called by that
    name (its first field is what scripts read), else `operator-runner <version>`."""
    if prog != "ansible-operator":
        return f"{prog} {__version__}"
    fields = {
        "ansible-operator version": f"v{__version__}",
        "commit": "unknown",
        "kubernetes version": "unknown",
        "python version": platform.python_version(),
        "ansible-core version": _distribution_version("ansible-core"),
        "GOOS": sys.platform,
        "GOARCH": _goarch(platform.machine()),
    }
    return ", ".join(f'{name}: "{value}"' for name, value in fields.items())


def _distribution_version(name: str) -> str:
    try:
        return importlib.metadata.version(name)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _goarch(machine: str) -> str:
    """Go's name of the machine (amd64, arm64), as operator-sdk's prints GOARCH."""
    return {"x86_64": "amd64", "aarch64": "arm64"}.get(machine.lower(), machine.lower())


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
        print(version_line(prog))
        return 0
    if args.command in scaffold_cli.COMMANDS:
        return scaffold_cli.run(args)
    if args.command == "reconcile":
        return reconcile_cli.run(args)
    if args.command == "preview":
        return preview_cli.run_preview(args, words)
    if args.command == "check-roles":
        return preview_cli.run_check_roles(args)
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
    from runner.app.manager.config import OperatorConfig, ProductionConfig, WebhookConfig
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
        artifacts_caps=Caps(
            args.max_artifacts_bytes, args.max_artifacts_runs, args.artifacts_job_events
        ),
        graceful_shutdown_timeout=args.graceful_shutdown_timeout,
        kubeconfig=args.kubeconfig,
        executor=args.executor,
        warm_idle_timeout=args.warm_idle_timeout,
        production=production,
        webhooks=WebhookConfig(
            bind_address=args.webhook_bind_address,
            cert_dir=args.webhook_cert_dir,
            service=args.webhook_service,
            url=args.webhook_url,
            configuration_name=args.webhook_configuration_name,
            ca_validity=args.webhook_ca_validity,
            cert_validity=args.webhook_cert_validity,
        ),
        watch_roles=args.watch_roles,
        proxy_port=args.proxy_port or 0,
    )
    return run_operator(config)


if __name__ == "__main__":
    sys.exit(main())
