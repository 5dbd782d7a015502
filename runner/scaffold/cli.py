"""The ``init``, ``create api`` and ``create webhook`` subcommands of ``operator-runner``.

runner/app/cli/commands.py registers them with :func:`add_commands` and hands them to
:func:`run`; this module keeps everything else about them.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .layout import ANSIBLE_LAYOUT
from .lines import LINES, installed_line
from .names import ScaffoldError

if TYPE_CHECKING:
    from .api import ApiRequest
    from .render import Plan

__all__ = ["COMMANDS", "add_commands", "run"]

COMMANDS = ("init", "create")


def add_commands(sub: Any) -> None:
    """Add ``init`` and ``create api`` to the subparsers ``sub`` (``add_subparsers()``)."""
    init = sub.add_parser(
        "init",
        help="write a new operator project into the current (empty) folder",
        description="Write a new operator project into the current folder in operator-sdk's "
        "Ansible layout (what `operator-sdk init --plugins=ansible` writes, so that "
        "operator-sdk's CLI works on it too): PROJECT, watches.yaml, roles/, playbooks/, "
        "config/ (crd, default, manager, manifests, network-policy, prometheus, rbac, samples, "
        "scorecard, testing, webhook), molecule/default and molecule/kind, Dockerfile, "
        "Makefile, requirements.yml, requirements.txt, README.md. With --group, --version and "
        "--kind it creates the first API at once, as create api does.",
    )
    init.add_argument(
        "--plugins",
        default=None,
        help="operator-sdk's option, for its command lines: ansible (or "
        f"{ANSIBLE_LAYOUT}), the only layout operator-runner writes",
    )
    init.add_argument(
        "--domain", default="my.domain", help="domain of the API groups (default my.domain)"
    )
    init.add_argument(
        "--project-name",
        default=None,
        help="name of the project (namespace <name>-system, image); default: the folder's name",
    )
    init.add_argument(
        "--ansible-core",
        default=None,
        metavar="LINE",
        help="the ansible-core line the roles are written for, one of "
        f"{', '.join(LINES)}; it goes into PROJECT, the Makefile and Dockerfile (the image's "
        "ANSIBLE_CORE build argument) and requirements.txt. Default: the line installed with "
        f"operator-runner ({installed_line()} here)",
    )
    init.add_argument(
        "--force",
        action="store_true",
        help="write into a folder that is not empty, overwriting the files init writes",
    )
    first = init.add_argument_group(
        "the first API", "as operator-sdk's init: give all three to run create api at once"
    )
    first.add_argument("--group", default=None, help="API group of the first kind")
    first.add_argument("--version", default=None, help="its API version, e.g. v1alpha1")
    first.add_argument("--kind", default=None, help="its kind, in PascalCase")
    content = first.add_mutually_exclusive_group()
    content.add_argument("--generate-role", action="store_true", help="a role for it (the default)")
    content.add_argument("--generate-playbook", action="store_true", help="a playbook for it")
    create = sub.add_parser("create", help="add something to a project made by init")
    what = create.add_subparsers(dest="create_command", metavar="WHAT", required=True)
    api = what.add_parser(
        "api",
        help="add a kind (CRD, watches.yaml entry, role or playbook, sample, RBAC), or a "
        "version of a kind that exists",
        description="Add a kind to the project in the current folder (operator-runner's init "
        "or operator-sdk's init --plugins=ansible): its CRD in config/crd/bases/ (the "
        "spec's schema inferred from --from-sample), its watches.yaml entry, a role (default) "
        "or a playbook, a sample CR in config/samples/, its rules in config/rbac/role.yaml, its "
        "admin, editor and viewer roles, its molecule test and the resource in PROJECT. "
        "For a kind that exists (another --version), the version is added to its CRD, served, "
        "with the schema of the stored version or the one inferred from --from-sample; the "
        "storage version stays unless --storage, and the watch keeps its version (its role sees "
        "objects in that version): write the conversion next (create webhook --convert).",
    )
    api.add_argument(
        "--group", required=True, help="API group: webapp (-> webapp.<domain>) or a full group"
    )
    api.add_argument("--version", required=True, help="API version, e.g. v1alpha1")
    api.add_argument("--kind", required=True, help="kind, in PascalCase, e.g. Guestbook")
    content = api.add_mutually_exclusive_group()
    content.add_argument(
        "--generate-role",
        action="store_true",
        help="write roles/<kind>/ and watch with role: (the default)",
    )
    content.add_argument(
        "--generate-playbook",
        action="store_true",
        help="write playbooks/<kind>.yml and watch with playbook:",
    )
    api.add_argument(
        "--from-sample",
        type=Path,
        default=None,
        metavar="FILE",
        help="a sample CR: the CRD's spec schema is inferred from its spec, and it becomes the "
        "kind's sample",
    )
    api.add_argument("--short-name", default=None, help="short name for kubectl, e.g. gb")
    scope = api.add_mutually_exclusive_group()
    scope.add_argument(
        "--namespaced",
        dest="namespaced",
        action="store_true",
        default=True,
        help="the kind's objects live in namespaces (default)",
    )
    scope.add_argument(
        "--cluster", dest="namespaced", action="store_false", help="the kind is cluster-scoped"
    )
    api.add_argument(
        "--require-sample-keys",
        action="store_true",
        help="make every key of the sample's spec required in the schema",
    )
    api.add_argument(
        "--storage",
        action="store_true",
        help="a version added to a kind that exists becomes the CRD's storage version",
    )
    webhook = what.add_parser(
        "webhook",
        help="add webhooks written as Ansible to a kind: roles, watches.yaml keys",
        description="Add webhooks to a kind of the project in the current folder: "
        "roles/<kind>_validate/ (--validate: refuse at kubectl apply) and roles/<kind>_mutate/ "
        "(--mutate: change the object before it is stored), the kind's validate:/mutate: keys "
        "in watches.yaml and the webhooks in config/webhook/manifests.yaml (config/webhook made "
        "first on a project operator-sdk made); --convert: "
        "roles/<kind>_convert/ (convert between the versions of the kind's CRD), its convert: "
        "key, the CRD's spec.conversion and the RBAC that keeps it written.",
    )
    webhook.add_argument("--kind", required=True, help="the kind, as in watches.yaml")
    webhook.add_argument(
        "--group", default=None, help="its group, when the kind is watched in several"
    )
    webhook.add_argument(
        "--version", default=None, help="its version, when the kind is watched in several"
    )
    webhook.add_argument("--validate", action="store_true", help="a validating webhook")
    webhook.add_argument("--mutate", action="store_true", help="a mutating webhook")
    webhook.add_argument(
        "--convert", action="store_true", help="a conversion webhook (between versions)"
    )


def _first_api(args: argparse.Namespace) -> ApiRequest | None:
    """init's --group/--version/--kind as the create api it runs; None without them."""
    from .api import ApiRequest
    from .names import check_group, check_kind, check_version

    given = {"--group": args.group, "--version": args.version, "--kind": args.kind}
    if not any(given.values()):
        if args.generate_role or args.generate_playbook:
            raise ScaffoldError(
                "--generate-role and --generate-playbook go with --group, --version and --kind"
            )
        return None
    missing = [flag for flag, value in given.items() if not value]
    if missing:
        raise ScaffoldError(
            f"the first API needs {', '.join(missing)} too (--group, --version and --kind "
            "together, as create api)"
        )
    check_group(args.group)
    check_version(args.version)
    check_kind(args.kind)
    return ApiRequest(
        group=args.group,
        version=args.version,
        kind=args.kind,
        generate_playbook=args.generate_playbook,
    )


def _init(args: argparse.Namespace, folder: Path) -> tuple[Plan, str, str]:
    from .api import create_api
    from .project import init

    if args.plugins is not None and args.plugins not in ("ansible", ANSIBLE_LAYOUT):
        raise ScaffoldError(
            f"--plugins {args.plugins!r}: operator-runner writes operator-sdk's Ansible layout "
            f"only (--plugins=ansible, {ANSIBLE_LAYOUT})"
        )
    first = _first_api(args)
    line = args.ansible_core or installed_line()
    plan = init(folder, args.domain, args.project_name, args.force, ansible_core=line)
    done = f"wrote a new project for ansible-core {line} into {folder}"
    after = "next: operator-runner create api --group G --version v1alpha1 --kind K"
    if first is not None:
        api = create_api(folder, first)
        plan.files.update(api.files)
        done += f", with {first.kind}"
        after = "next: write the role, then make install run (or make molecule)"
    return plan, done, after


def run(args: argparse.Namespace, root: Path | None = None) -> int:
    """Carry out ``init`` or ``create api``; errors are one line on stderr and exit code 1."""
    from .api import ApiRequest, create_api
    from .webhook import WebhookRequest, create_webhook

    folder = root if root is not None else Path.cwd()
    try:
        if args.command == "init":
            plan, done, after = _init(args, folder)
        elif args.create_command == "webhook":
            plan = create_webhook(
                folder,
                WebhookRequest(
                    kind=args.kind,
                    group=args.group,
                    version=args.version,
                    validate=args.validate,
                    mutate=args.mutate,
                    convert=args.convert,
                ),
            )
            done = f"added webhooks to {args.kind}"
            after = "next: write the roles, then make install run"
        else:
            request = ApiRequest(
                group=args.group,
                version=args.version,
                kind=args.kind,
                generate_playbook=args.generate_playbook,
                sample=args.from_sample,
                short_name=args.short_name,
                namespaced=args.namespaced,
                require_sample_keys=args.require_sample_keys,
                storage=args.storage,
                new_kind_options=tuple(
                    flag
                    for flag, given in (
                        ("--generate-role", args.generate_role),
                        ("--generate-playbook", args.generate_playbook),
                        ("--short-name", args.short_name is not None),
                        ("--cluster", not args.namespaced),
                    )
                    if given
                ),
            )
            plan = create_api(folder, request)
            if plan.added_version is not None:
                done, after = plan.added_version
            else:
                done = f"added {args.kind}"
                after = "next: write the role, then make install run (or make molecule)"
    except ScaffoldError as exc:
        command = "init" if args.command == "init" else f"create {args.create_command}"
        print(f"operator-runner {command}: {exc}", file=sys.stderr)
        return 1
    for path in sorted(plan.files):
        print(f"  {path}")
    print(f"{done}; {after}")
    return 0
