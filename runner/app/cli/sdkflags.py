"""operator-sdk's `ansible-operator run` flags that are not the runner's own, and what they mean.

Every flag of `ansible-operator run` from operator-sdk v1.30 to today's ansible-operator-plugins
(internal/ansible/flags/flag.go, internal/cmd/ansible-operator/run/cmd.go, and
controller-runtime's zap flags) is accepted. The ones registered here:

- aliases: `--metrics-addr` (for `--metrics-bind-address`), `--enable-leader-election` (for
  `--leader-elect`), deprecated there too; giving both spellings is an error, as there;
- `--ansible-roles-path`, `--ansible-collections-path`: set ANSIBLE_ROLES_PATH /
  ANSIBLE_COLLECTIONS_PATH before anything reads them, as operator-sdk does;
- `--proxy-port`: the port of the roles' API proxy (operator-sdk's default 8888; here a free
  port unless given, so two operators on one host never collide);
- `--metrics-secure`, `--metrics-require-rbac` and the certificate folder flags (metricsauth.py,
  metricstls.py);
- `--leader-elect-resource-lock`: Leases only, as ansible-operator since it hard-coded them;
- `--enable-http2`, `--config`: accepted; what they do not do here is logged (one line each);
- the zap flags (zapflags.py).

`notes(args)` returns the log lines about these flags (deprecations, no effect), logged once
logging is set up.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import MutableMapping

from runner.app.cli import zapflags
from runner.app.cli.goflags import add_bool

#: The lock types client-go knew; ansible-operator now uses Leases whatever is given.
RESOURCE_LOCKS = ("leases", "endpointsleases", "configmapsleases")


def _resource_lock(text: str) -> str:
    value = text.strip().lower()
    if value not in RESOURCE_LOCKS:
        raise argparse.ArgumentTypeError(
            f"{text!r} is not a lock type: leader election uses a Lease (leases; "
            "endpointsleases and configmapsleases are read as leases, as ansible-operator does)"
        )
    return value


def _port(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a port number, got {text!r}") from None
    if not 0 <= value <= 65535:
        raise argparse.ArgumentTypeError(f"expected a port number 0-65535, got {value}")
    return value


def add_flags(run: argparse.ArgumentParser) -> None:
    sdk = run.add_argument_group(
        "operator-sdk compatibility",
        "flags of `ansible-operator run` (operator-sdk v1.30 to today's ansible-operator-plugins)",
    )
    sdk.add_argument(
        "--metrics-addr",
        default=None,
        metavar="ADDRESS",
        help="deprecated spelling of --metrics-bind-address (as in operator-sdk)",
    )
    add_bool(
        sdk,
        "--enable-leader-election",
        None,
        "deprecated spelling of --leader-elect (as in operator-sdk)",
    )
    sdk.add_argument(
        "--leader-elect-resource-lock",
        type=_resource_lock,
        default=None,
        metavar="LOCK",
        help="leases (endpointsleases and configmapsleases are read as leases, as "
        "ansible-operator does)",
    )
    sdk.add_argument(
        "--ansible-roles-path",
        default=None,
        metavar="PATH",
        help="sets ANSIBLE_ROLES_PATH for the operator and its runs",
    )
    sdk.add_argument(
        "--ansible-collections-path",
        default=None,
        metavar="PATH",
        help="sets ANSIBLE_COLLECTIONS_PATH (collections in PATH/ansible_collections/)",
    )
    sdk.add_argument(
        "--proxy-port",
        type=_port,
        default=None,
        metavar="PORT",
        help="port of the roles' API proxy on 127.0.0.1 (default: a free port; operator-sdk's "
        "is 8888)",
    )
    add_bool(
        sdk,
        "--enable-http2",
        False,
        "accepted; the endpoints speak HTTP/1.1 (operator-sdk's default too)",
    )
    sdk.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="controller-runtime's manager config file (operator-sdk <= v1.3x): not read here; "
        "give its settings as flags",
    )
    zapflags.add_flags(run)


def add_metrics_security_flags(run: argparse.ArgumentParser) -> None:
    add_bool(
        run,
        "--metrics-secure",
        False,
        "serve /metrics over HTTPS: a certificate from --metrics-cert-path, else a "
        "self-signed one made at start-up, as controller-runtime",
    )
    add_bool(
        run,
        "--metrics-require-rbac",
        False,
        "only callers whose bearer token passes a TokenReview and who may `get` the "
        "non-resource URL /metrics (SubjectAccessReview) read /metrics (controller-runtime's "
        "WithAuthenticationAndAuthorization)",
    )
    run.add_argument(
        "--metrics-cert-path",
        default=None,
        metavar="DIR",
        help="folder with the metrics server's certificate and key (default: "
        "$TMPDIR/k8s-metrics-server/serving-certs, controller-runtime's, used when both files "
        "are there; otherwise a self-signed certificate)",
    )
    run.add_argument(
        "--metrics-cert-name", default="tls.crt", help="certificate file (default tls.crt)"
    )
    run.add_argument("--metrics-cert-key", default="tls.key", help="key file (default tls.key)")


class FlagConflict(ValueError):
    """Flags that do not go together: two spellings of one flag, or `--metrics-require-rbac`
    without `--metrics-secure` (as operator-sdk, an error)."""


def resolve(args: argparse.Namespace, given: set[str], environ: MutableMapping[str, str]) -> None:
    """Fold the aliases into the runner's own settings; set the path variables.

    `given` are the flags on the command line (to tell a default from a choice)."""
    if "--metrics-addr" in given and "--metrics-bind-address" in given:
        raise FlagConflict("only one of --metrics-addr and --metrics-bind-address may be set")
    if "--enable-leader-election" in given and "--leader-elect" in given:
        raise FlagConflict("only one of --leader-elect and --enable-leader-election may be set")
    if args.metrics_require_rbac and not args.metrics_secure:
        # operator-sdk's `run` refuses it before it starts (its command's argument check):
        # bearer tokens would reach /metrics in clear text
        raise FlagConflict(
            "--metrics-secure flag is required when --metrics-require-rbac is present"
        )
    if args.metrics_addr is not None:
        args.metrics_bind_address = args.metrics_addr
    if args.enable_leader_election is not None:
        args.leader_elect = args.enable_leader_election
    if args.ansible_roles_path:
        environ["ANSIBLE_ROLES_PATH"] = args.ansible_roles_path
    if args.ansible_collections_path:
        environ["ANSIBLE_COLLECTIONS_PATH"] = args.ansible_collections_path
    operator_name = environ.get("OPERATOR_NAME")
    if operator_name and args.leader_election_id is None:
        args.leader_election_id = operator_name  # operator-sdk's legacy name for it


def notes(
    args: argparse.Namespace, given: set[str], environ: MutableMapping[str, str]
) -> list[str]:
    """One log line per compatibility flag given whose effect the user should know about."""
    lines: list[str] = []
    if "--metrics-addr" in given:
        lines.append("--metrics-addr is deprecated: use --metrics-bind-address (same meaning)")
    if "--enable-leader-election" in given:
        lines.append("--enable-leader-election is deprecated: use --leader-elect (same meaning)")
    if args.leader_elect_resource_lock not in (None, "leases"):
        lines.append(
            f"--leader-elect-resource-lock={args.leader_elect_resource_lock}: leader election "
            "uses a Lease (coordination.k8s.io), as ansible-operator does today"
        )
    if "--enable-http2" in given and args.enable_http2:
        lines.append(
            "--enable-http2 has no effect: the metrics and health endpoints speak HTTP/1.1 "
            "(operator-sdk's default; clients fall back to it)"
        )
    if args.config:
        lines.append(
            f"--config={args.config} is not read: operator-runner takes the manager's settings "
            "from flags (--metrics-bind-address, --health-probe-bind-address, --leader-elect, "
            "--leader-election-id, ...)"
        )
    for name in ("ANSIBLE_ROLES_PATH", "ANSIBLE_COLLECTIONS_PATH"):
        flag = "--" + name.lower().replace("_", "-")
        if flag in given:
            lines.append(f"{flag}: {name}={environ.get(name, '')}")
    if environ.get("OPERATOR_NAME"):
        if "--leader-election-id" in given:
            lines.append("OPERATOR_NAME is ignored: --leader-election-id is set")
        else:
            lines.append(
                "OPERATOR_NAME is deprecated (as in operator-sdk): it names the leader election "
                "Lease; use --leader-election-id"
            )
    lines.extend(zapflags.notes(args, given))
    return lines


def given_flags(argv: list[str]) -> set[str]:
    """The long flags on a command line (`--name` of `--name=value` and `--name value`)."""
    return {word.split("=", 1)[0] for word in argv if word.startswith("--")}


def program_name(argv0: str) -> str:
    """`ansible-operator` when called by that name (operator-sdk's images' entry point)."""
    name = os.path.basename(argv0)
    return name if name == "ansible-operator" else "operator-runner"
