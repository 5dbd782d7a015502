"""Names in a project: validation (one clear message each) and the derived names.

Rules as Kubernetes and Kubebuilder apply them: a domain or API group is a DNS subdomain
(RFC 1123, lower case, at most 253 characters), a version is ``v<N>`` optionally followed by
``alpha<N>`` or ``beta<N>``, a kind is PascalCase, a plural is the lower-cased kind with
English plural rules.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = [
    "ScaffoldError",
    "check_domain",
    "check_group",
    "check_kind",
    "check_project_name",
    "check_short_name",
    "check_version",
    "full_group",
    "plural",
    "snake_kind",
    "spec_var",
]


class ScaffoldError(ValueError):
    """A command cannot be carried out; the message says why and what to do. Nothing was written."""


_DNS_LABEL: Final = r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?"
_DNS_SUBDOMAIN: Final = re.compile(rf"^{_DNS_LABEL}(?:\.{_DNS_LABEL})*$")
_DNS_LABEL_ONLY: Final = re.compile(rf"^{_DNS_LABEL}$")
# Kubebuilder's pattern (pkg/model/resource: ^v\d+(?:alpha\d+|beta\d+)?$), which is also what
# Kubernetes sorts as a version (apimachinery's kube-aware order): v1alpha0 below v1alpha1.
_VERSION: Final = re.compile(r"^v[0-9]+(?:(?:alpha|beta)[0-9]+)?$")
_KIND: Final = re.compile(r"^[A-Z][A-Za-z0-9]*$")
# The namespace is <project>-system: a DNS label of at most 63 characters.
_MAX_PROJECT_NAME: Final = 63 - len("-system")


def _subdomain_problem(value: str) -> str | None:
    if not value:
        return "is empty"
    if len(value) > 253:
        return f"is {len(value)} characters long, at most 253 are allowed"
    if not _DNS_SUBDOMAIN.match(value):
        return (
            "is not a DNS subdomain: lower-case letters, digits, '-' and '.', each "
            "dot-separated part starting and ending with a letter or digit"
        )
    if any(len(part) > 63 for part in value.split(".")):
        return "has a dot-separated part longer than 63 characters"
    return None


def check_domain(domain: str) -> None:
    """``--domain``: a DNS subdomain such as ``example.com`` or ``my.domain``."""
    problem = _subdomain_problem(domain)
    if problem:
        raise ScaffoldError(f"--domain {domain!r} {problem}; e.g. --domain example.com")


def check_group(group: str) -> None:
    """``--group``: a DNS subdomain (``webapp``, or a full group such as ``cache.example.com``)."""
    problem = _subdomain_problem(group)
    if problem:
        raise ScaffoldError(
            f"--group {group!r} {problem}; e.g. --group webapp (the API group becomes "
            "webapp.<the project's domain>) or a full group such as --group webapp.example.com"
        )


def full_group(group: str, domain: str) -> str:
    """The API group: ``<group>.<domain>``, or ``group`` itself when it already has a dot."""
    return group if "." in group else f"{group}.{domain}"


def check_version(version: str) -> None:
    """``--version``: a Kubernetes API version name (``v1``, ``v1alpha1``, ``v2beta3``)."""
    if not _VERSION.match(version):
        raise ScaffoldError(
            f"--version {version!r} is not a Kubernetes API version: v<N>, optionally followed "
            "by alpha<N> or beta<N>, e.g. v1, v1alpha1, v2beta3"
        )


def check_kind(kind: str) -> None:
    """``--kind``: PascalCase, letters and digits, at most 63 characters."""
    if not _KIND.match(kind):
        raise ScaffoldError(
            f"--kind {kind!r} is not PascalCase: it must start with an upper-case letter and "
            "hold only letters and digits, e.g. --kind Guestbook or --kind EchoFlask"
        )
    if len(kind) > 63:
        raise ScaffoldError(f"--kind {kind!r} is {len(kind)} characters long; at most 63")
    if kind.endswith("List"):
        raise ScaffoldError(
            f"--kind {kind!r} ends with 'List', which Kubernetes reserves for the list kind "
            f"({kind}List would be the list of {kind}s); choose another name"
        )


def check_short_name(short_name: str) -> None:
    """``--short-name``: a DNS label (lower case), as CRD short names must be."""
    if not (len(short_name) <= 63 and _DNS_LABEL_ONLY.match(short_name)):
        raise ScaffoldError(
            f"--short-name {short_name!r} is not valid: lower-case letters, digits and '-', "
            "starting and ending with a letter or digit, e.g. --short-name gb"
        )


def check_project_name(name: str, *, from_folder: bool) -> None:
    """The project name: a DNS label (it names the namespace ``<name>-system``)."""
    if len(name) <= _MAX_PROJECT_NAME and _DNS_LABEL_ONLY.match(name):
        return
    origin = f"the folder name {name!r}" if from_folder else f"--project-name {name!r}"
    hint = "give one with --project-name" if from_folder else "e.g."
    raise ScaffoldError(
        f"{origin} is not a valid project name: lower-case letters, digits and '-', starting "
        f"and ending with a letter or digit, at most {_MAX_PROJECT_NAME} characters (it names "
        f"the namespace <name>-system and the image); {hint} --project-name guestbook-operator"
    )


def plural(kind: str) -> str:
    """The resource name of ``kind``: lower case, pluralized as Kubebuilder does.

    >>> [plural(k) for k in ("Guestbook", "Policy", "Gateway", "Class", "Box", "Match", "Wish")]
    ['guestbooks', 'policies', 'gateways', 'classes', 'boxes', 'matches', 'wishes']
    """
    lower = kind.lower()
    if lower.endswith("y") and len(lower) > 1 and lower[-2] not in "aeiou":
        return lower[:-1] + "ies"
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    return lower + "s"


def snake_kind(kind: str) -> str:
    """The role's (and playbook's) name: the kind in snake_case, as the runner converts keys.

    >>> [snake_kind(k) for k in ("Guestbook", "EchoFlask", "IPAddress", "MyURLMap")]
    ['guestbook', 'echo_flask', 'ip_address', 'my_url_map']
    """
    from runner.reconcile.snakecase import to_snake  # the runner's own conversion, not a copy

    return to_snake(kind).lstrip("_")


def spec_var(group: str, kind: str) -> str:
    """``_<group>_<kind>_spec``: the extra var holding the CR's spec as is (not snake_cased)."""
    return f"_{group}_{kind.lower()}_spec".replace(".", "_").replace("-", "_")
