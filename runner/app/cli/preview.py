"""The `preview` and `check-roles` subcommands' arguments (the work: runner/app/manager/preview.py
and runner/preview/rolescan.py).

`preview` takes every flag of `run` (so the operator's own command line and environment,
WATCH_NAMESPACE included, say what it covers) and its own: which CRs (`--kind`,
`--namespace`, `--selector`), how (`--concurrency`, `--from-line`) and what it prints
(`--output`).
"""

from __future__ import annotations

import argparse
import logging
import os
import sys
from pathlib import Path

from runner.app.cli import runflags, sdkflags, webhookflags, zapflags
from runner.util import logs, tempdirs

PREVIEW_HELP = "run every CR's role in check mode from this candidate, writing nothing"
PREVIEW_DESCRIPTION = (
    "Preview what this operator-runner (its ansible-core line, its roles, its image) would do "
    "to every CR the operator reconciles: each CR's role runs in Ansible's check mode with "
    "--diff against the live cluster, through a proxy that lets reads through and answers "
    "writes itself, so nothing is written. Per CR: unchanged, would change (the diff, Secrets "
    "masked) or fails (the task, its file and line, the message, and the ansible-core change "
    "that explains it). Takes every flag of `run` (and WATCH_NAMESPACE). Exit status: 0 no CR "
    "fails, 2 some CR fails, 3 some CR would change (with --fail-on-change), 1 usage error."
)
CHECK_HELP = "scan roles for constructs a newer ansible-core line changes (hints)"
CHECK_DESCRIPTION = (
    "Read the roles and playbooks of a project (or the paths given) and list, file:line each, "
    "the constructs that ansible-core lines up to --line change (2.19: non-boolean "
    "conditionals, templates in conditionals, templates that can render nothing, ...), with "
    "the fix. Hints: found without running anything, so some may be fine and some breakage "
    "cannot be seen; `preview` runs the roles. Exit status 0 (1 for a usage error)."
)


def _concurrency(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not 1 <= value <= 32:
        raise argparse.ArgumentTypeError(f"must be between 1 and 32, got {value}")
    return value


def _line(text: str) -> str:
    from runner.scaffold.lines import LINES

    if text not in LINES:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not an ansible-core line operator-runner runs ({', '.join(LINES)})"
        )
    return text


def add_commands(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    cmd = sub.add_parser(
        "preview", allow_abbrev=False, help=PREVIEW_HELP, description=PREVIEW_DESCRIPTION
    )
    runflags.add_flags(cmd)
    webhookflags.add_flags(cmd)
    sdkflags.add_flags(cmd)
    own = cmd.add_argument_group("preview")
    own.add_argument(
        "--kind",
        action="append",
        default=[],
        help="only CRs of this kind (Kind, kind.group, plural or short name; repeatable)",
    )
    own.add_argument(
        "-n",
        "--namespace",
        action="append",
        default=[],
        help="only CRs in this namespace (repeatable; within WATCH_NAMESPACE)",
    )
    own.add_argument(
        "-l", "--selector", default="", help="only CRs with these labels (kubectl's -l syntax)"
    )
    own.add_argument(
        "--concurrency",
        type=_concurrency,
        default=2,
        help="runs at once (default 2: a preview should go unnoticed by the cluster)",
    )
    own.add_argument(
        "--from-line",
        type=_line,
        default=None,
        help="the ansible-core line the operator runs now (default: each CR's, as its status "
        "says: the line of the operator-runner that last reconciled it)",
    )
    own.add_argument(
        "-o", "--output", choices=("table", "json"), default="table", help="default table"
    )
    own.add_argument(
        "--fail-on-change",
        action="store_true",
        help="exit 3 when some CR would change (and none fails)",
    )
    check = sub.add_parser("check-roles", help=CHECK_HELP, description=CHECK_DESCRIPTION)
    check.add_argument(
        "paths",
        nargs="*",
        type=Path,
        help="roles, playbooks or folders to scan (default: roles/ and playbooks/ beside "
        "the watches file)",
    )
    check.add_argument(
        "--watches-file", type=Path, default=Path("./watches.yaml"), help="default ./watches.yaml"
    )
    check.add_argument(
        "--line", type=_line, default="2.21", help="the line to move to (default 2.21)"
    )
    check.add_argument(
        "--from-line", type=_line, default="2.18", help="the line the roles run on (default 2.18)"
    )
    check.add_argument("-o", "--output", choices=("text", "json"), default="text")


def run_preview(args: argparse.Namespace, words: list[str]) -> int:
    from runner.app.cli.commands import watch_namespaces
    from runner.app.manager.config import OperatorConfig  # heavy imports only now
    from runner.app.manager.preview import PreviewSettings, run_preview_command

    given = sdkflags.given_flags(words)
    try:
        sdkflags.resolve(args, given, os.environ)
    except sdkflags.FlagConflict as err:
        print(f"operator-runner preview: {err}", file=sys.stderr)
        return 1
    # the report goes to stdout; the log, at warning unless asked, to stderr
    level = zapflags.level(args) if "--zap-log-level" in given else logging.WARNING
    logs.setup(zapflags.log_format(args, given), level)
    if "--zap-log-level" not in given:  # a CR's failure is the report's to say, once
        logging.getLogger("runner.reconcile").setLevel(logging.ERROR)
    keep = args.artifacts_dir is not None
    artifacts = args.artifacts_dir or tempdirs.private_dir("operator-runner-preview-")
    config = OperatorConfig(
        watches_file=args.watches_file,
        namespaces=watch_namespaces(os.environ),
        verbosity=args.ansible_verbosity,
        ansible_args=args.ansible_args,
        inject_owner_ref=args.inject_owner_ref,
        artifacts_dir=Path(artifacts),
        kubeconfig=args.kubeconfig,
        executor=args.executor,
        warm_idle_timeout=args.warm_idle_timeout,
    )
    settings = PreviewSettings(
        namespaces=tuple(args.namespace),
        kinds=tuple(args.kind),
        selector=args.selector,
        concurrency=args.concurrency,
        from_line=args.from_line,
        output=args.output,
        fail_on_change=args.fail_on_change,
        keep_artifacts=keep,
    )
    return run_preview_command(config, settings)


def run_check_roles(args: argparse.Namespace) -> int:
    from runner.preview import rolescan

    paths = list(args.paths)
    base = Path.cwd()
    if not paths:
        project = base = args.watches_file.resolve().parent
        paths = [p for p in (project / "roles", project / "playbooks") if p.is_dir()]
        if not paths:
            print(
                f"operator-runner check-roles: no roles/ or playbooks/ in {project}",
                file=sys.stderr,
            )
            return 1
    missing = [str(p) for p in paths if not p.exists()]
    if missing:
        print(
            f"operator-runner check-roles: no such file or folder: {', '.join(missing)}",
            file=sys.stderr,
        )
        return 1
    hints = rolescan.scan(paths, args.from_line, args.line)
    if args.output == "json":
        sys.stdout.write(rolescan.as_json(hints, base))
    else:
        sys.stdout.write(rolescan.as_text(hints, base, args.from_line, args.line))
    return 0
