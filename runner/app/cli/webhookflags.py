"""The flags of the webhook server (`validate:`, `mutate:` and conversion webhooks): where it
listens, its certificates, and how the API server reaches it (runner/app/webhooks/assembly.py).
controller-runtime's names where it has them (`--webhook-bind-address` is its `:9443`,
`--webhook-cert-dir` its certificate folder)."""

from __future__ import annotations

import argparse
from pathlib import Path

from runner.app.serving.bind import BindAddressError, parse_bind_address
from runner.app.webhooks.certificates import DEFAULT_CERT_DIR
from runner.util.durations import parse_period


def _bind_address(text: str) -> str:
    try:
        parse_bind_address(text)
    except BindAddressError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    return text


def _duration(text: str) -> float:
    try:
        seconds = parse_period(text, "a duration")
    except ValueError as err:
        raise argparse.ArgumentTypeError(str(err)) from None
    if seconds < 10:
        raise argparse.ArgumentTypeError(f"must be at least 10s, got {text!r}")
    return seconds


def _service(text: str) -> str:
    namespace, _, name = text.rpartition("/")
    if not name or "/" in namespace:
        raise argparse.ArgumentTypeError(f"expected NAME or NAMESPACE/NAME, got {text!r}")
    return text


def _url(text: str) -> str:
    if not text.startswith("https://"):
        raise argparse.ArgumentTypeError(
            f"the API server calls webhooks over HTTPS: expected https://HOST[:PORT], got {text!r}"
        )
    return text.rstrip("/")


def add_flags(run: argparse.ArgumentParser) -> None:
    group = run.add_argument_group(
        "webhooks",
        "the admission (validate:, mutate: in watches.yaml) and conversion webhooks, served "
        "over HTTPS when some watch has them (docs/webhooks.md)",
    )
    group.add_argument(
        "--webhook-bind-address",
        type=_bind_address,
        default=":9443",
        help="where the webhooks are served; 0 switches them off (default :9443, "
        "controller-runtime's)",
    )
    group.add_argument(
        "--webhook-cert-dir",
        type=Path,
        default=DEFAULT_CERT_DIR,
        metavar="DIR",
        help="a folder with tls.crt and tls.key to serve (cert-manager's Secret, mounted; read "
        "again when they change; the caBundle is then cert-manager's to write). Without them "
        "the operator makes and rotates a CA and certificates itself (default "
        f"{DEFAULT_CERT_DIR}, controller-runtime's)",
    )
    group.add_argument(
        "--webhook-service",
        type=_service,
        default=None,
        metavar="[NAMESPACE/]NAME",
        help="the Service the API server calls the webhooks through (deployed; NAMESPACE "
        "defaults to the pod's); the certificates are kept in the Secret "
        "<configuration name>-cert there. Without it (make run) the webhooks are registered as "
        "URLs (--webhook-url)",
    )
    group.add_argument(
        "--webhook-url",
        type=_url,
        default=None,
        metavar="https://HOST[:PORT]",
        help="where the API server calls the webhooks without --webhook-service (default "
        "https://127.0.0.1:<the port served>: the local cluster's API server runs on this host)",
    )
    group.add_argument(
        "--webhook-configuration-name",
        default=None,
        metavar="NAME",
        help="name of the ValidatingWebhookConfiguration and MutatingWebhookConfiguration the "
        "operator keeps written (default: --leader-election-id's default, "
        "operator-runner-<hash of the watched API groups>)",
    )
    group.add_argument(
        "--webhook-ca-validity",
        type=_duration,
        default=3 * 365 * 86400.0,
        metavar="DURATION",
        help="lifetime of the CA the operator makes; it is replaced with a third of it left "
        "(default 26280h, 3 years)",
    )
    group.add_argument(
        "--webhook-cert-validity",
        type=_duration,
        default=365 * 86400.0,
        metavar="DURATION",
        help="lifetime of the serving certificate; it is renewed with a third of it left "
        "(default 8760h, a year)",
    )
