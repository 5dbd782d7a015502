"""The `reconcile` subcommand's arguments (the work is in runner/app/manager/oneshot.py)."""

from __future__ import annotations

import argparse
import os
import shlex
from pathlib import Path

from runner.ansible.artifacts import default_artifacts_dir
from runner.util import logs

HELP = "run the role of one CR once, in the foreground, and print each task's result"
DESCRIPTION = (
    "Run the role or playbook mapped to one CR once, as the operator would (same extra vars, "
    "owner references and status), and print each task's result. --check changes nothing in "
    "the cluster; --diff shows what the role would change. Exit status: 0 success, 2 the run "
    "failed, 1 usage error (unknown kind, CR not found, bad file)."
)


def add_command(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser("reconcile", help=HELP, description=DESCRIPTION)
    cmd.add_argument(
        "target",
        nargs="?",
        metavar="KIND/NAME",
        help="the CR, as kubectl names it (Kind, kind.group, plural, short name)",
    )
    cmd.add_argument("-n", "--namespace", default=None, help="the CR's namespace")
    cmd.add_argument(
        "-f",
        "--filename",
        type=Path,
        default=None,
        help="the CR from a file; with --check its spec is used as written, and it need not "
        "be in the cluster",
    )
    cmd.add_argument(
        "--watches-file",
        type=Path,
        default=Path("./watches.yaml"),
        help="path to watches.yaml (default: ./watches.yaml)",
    )
    cmd.add_argument(
        "--check",
        action="store_true",
        help="Ansible check mode: change nothing in the cluster (no status, no finalizer)",
    )
    cmd.add_argument(
        "--diff", action="store_true", help="show the diff of every object the role changes"
    )
    cmd.add_argument(
        "--ansible-verbosity",
        type=int,
        choices=range(8),
        default=0,
        metavar="0-7",
        help="ansible-playbook verbosity (default 0)",
    )
    cmd.add_argument("--ansible-args", default="", help="extra arguments for ansible-playbook")
    cmd.add_argument("--kubeconfig", default=None, help="kubeconfig (default as kubectl)")
    cmd.add_argument(
        "--artifacts-dir",
        type=Path,
        default=None,
        help="root of the ansible-runner folders (default: the operator's, see `run --help`)",
    )


def run(args: argparse.Namespace) -> int:
    if bool(args.target) == bool(args.filename):
        print("operator-runner reconcile: give KIND/NAME or -f FILE (one of them)")
        return 1
    logs.setup("text")
    from runner.app.manager.config import OperatorConfig  # heavy imports only now
    from runner.app.manager.oneshot import run_reconcile_command

    config = OperatorConfig(
        watches_file=args.watches_file,
        verbosity=args.ansible_verbosity,
        ansible_args=tuple(shlex.split(args.ansible_args)),
        artifacts_dir=args.artifacts_dir or default_artifacts_dir(args.watches_file),
        executor=os.environ.get("OPERATOR_RUNNER_EXECUTOR", "plain"),
        kubeconfig=args.kubeconfig,
    )
    return run_reconcile_command(
        config,
        target=args.target,
        namespace=args.namespace,
        cr_file=args.filename,
        check=args.check,
        diff=args.diff,
    )
