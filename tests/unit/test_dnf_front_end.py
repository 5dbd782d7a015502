"""The base image's dnf, yum and microdnf (images/operator-runner/dnf/): what each command a
Dockerfile written for operator-sdk's UBI image runs becomes in apt-get, against a plain fake of
apt's answers (which packages Debian has, which are installed, which upgrades there are). The
real thing runs in the images' builds (tests/integration/test_image.py)."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from types import ModuleType

import pytest

FRONT_END = Path(__file__).resolve().parents[2] / "images" / "operator-runner" / "dnf"
APT_GET = [
    "apt-get", "-q", "-y",
    "-o", "Dpkg::Options::=--force-confdef", "-o", "Dpkg::Options::=--force-confold",
]  # fmt: skip


@pytest.fixture(scope="module")
def dnf() -> Iterator[ModuleType]:
    sys.path.insert(0, str(FRONT_END))
    try:
        yield importlib.import_module("dnf")
    finally:
        sys.path.remove(str(FRONT_END))
        sys.modules.pop("dnf", None)
        sys.modules.pop("debnames", None)


# What Debian (bookworm) has, for these tests: a few names the cases below ask about.
DEBIAN = {
    "openssl", "git", "jq", "curl", "procps", "vim-tiny", "python3-dev", "python3-yaml",
    "python3-jmespath", "python3-pip", "libssl-dev", "libffi-dev", "libxml2-dev", "g++",
    "openjdk-17-jre-headless", "postgresql", "postgresql-15", "postgresql-client", "tar",
}  # fmt: skip


@dataclass
class FakeApt:
    installed_now: set[str] = field(default_factory=lambda: {"curl", "tar", "python3", "openssl"})
    lists: bool = True
    pending: list[tuple[str, bool]] = field(default_factory=list)

    def fresh(self) -> bool:
        return self.lists

    def known(self, names: Iterable[str]) -> set[str]:
        return set(names) & DEBIAN

    def installed(self, names: Iterable[str]) -> set[str]:
        return set(names) & self.installed_now

    def similar(self, stem: str) -> list[str]:
        return sorted(n for n in DEBIAN if n.startswith(stem))

    def upgrades(self) -> list[tuple[str, bool]]:
        return self.pending


def plan(dnf: ModuleType, command: str, apt: FakeApt | None = None, prog: str = "dnf") -> list:
    names = dnf.Names(dnf.load_names(), apt or FakeApt(), prog)
    return list(dnf.plan(dnf.parse(command.split(), prog), names))


def runs(actions: list) -> list[list[str]]:
    return [list(a.argv) for a in actions if hasattr(a, "argv")]


def notes(actions: list) -> list[str]:
    return [a.text for a in actions if hasattr(a, "text")]


def refused(dnf: ModuleType, command: str, prog: str = "dnf") -> str:
    with pytest.raises(dnf.Refused) as caught:
        plan(dnf, command, prog=prog)
    return str(caught.value)


def test_dnf_update_security_bugfix_then_install_openssl(dnf: ModuleType) -> None:
    """pulp-operator's `dnf update --security --bugfix -y && dnf install -y openssl`."""
    update = dnf.parse(["update", "--security", "--bugfix", "-y"], "dnf")
    assert dnf.refresh_first(update, FakeApt())
    actions = plan(dnf, "update --security --bugfix -y")
    assert runs(actions) == [
        [*APT_GET, "upgrade", "--no-install-recommends", "--with-new-pkgs"],
        ["apt-get", "clean"],
    ]
    assert "security and bug fixes" in notes(actions)[0]
    install = dnf.parse(["install", "-y", "openssl"], "dnf")
    assert dnf.refresh_first(install, FakeApt(lists=False))  # the base image has no lists
    assert not dnf.refresh_first(install, FakeApt(lists=True))
    assert runs(plan(dnf, "install -y openssl")) == [
        [*APT_GET, "install", "--no-install-recommends", "openssl"],
        ["apt-get", "clean"],
    ]


def test_security_alone_upgrades_from_the_security_archive_only(dnf: ModuleType) -> None:
    actions = plan(dnf, "upgrade --security -y")
    assert isinstance(actions[0], dnf.SecurityUpgrade)
    assert notes(plan(dnf, "update --enhancement -y")) == [
        "--enhancement: Debian stable gets no such updates: nothing to do"
    ]
    advisory = plan(dnf, "update --advisory=RHSA-2024:1234 -y")
    assert isinstance(advisory[-2], dnf.SecurityUpgrade)
    assert "every security update is applied instead" in notes(advisory)[0]


def test_yum_remove_of_what_is_not_installed_does_nothing(dnf: ModuleType) -> None:
    """kiali-operator's `yum remove -y subscription-manager python3-subscription-manager-rhsm`:
    neither is installed (nor has Debian either), as with dnf: nothing to do, success."""
    actions = plan(
        dnf, "remove -y subscription-manager python3-subscription-manager-rhsm", prog="yum"
    )
    assert runs(actions) == []
    assert notes(actions) == [
        "No match for argument: subscription-manager (not installed): nothing to do",
        "No match for argument: python3-subscription-manager-rhsm (not installed): nothing to do",
    ]
    assert runs(plan(dnf, "erase -y curl vim-minimal")) == [[*APT_GET, "remove", "curl"]]
    assert "what this image runs on" in refused(dnf, "remove -y python3")


def test_yum_update_install_and_clean_all(dnf: ModuleType) -> None:
    assert runs(plan(dnf, "update -y", prog="yum")) == [
        [*APT_GET, "upgrade", "--no-install-recommends", "--with-new-pkgs"],
        ["apt-get", "clean"],
    ]
    assert runs(plan(dnf, "install -y git", prog="yum"))[0][-1] == "git"
    clean = plan(dnf, "clean all", prog="yum")
    assert runs(clean) == [["apt-get", "clean"]] and isinstance(clean[-1], dnf.DropLists)
    assert [type(a).__name__ for a in plan(dnf, "clean metadata")] == ["DropLists"]
    assert "say all, metadata" in refused(dnf, "clean everything")
    assert runs(plan(dnf, "update -y curl openssl")) == [
        [*APT_GET, "install", "--no-install-recommends", "--only-upgrade", "curl", "openssl"],
        ["apt-get", "clean"],
    ]


def test_microdnf_with_its_usual_options(dnf: ModuleType) -> None:
    actions = plan(
        dnf, "install -y --nodocs --setopt=install_weak_deps=0 jq procps-ng", prog="microdnf"
    )
    assert runs(actions)[0] == [*APT_GET, "install", "--no-install-recommends", "jq", "procps"]
    weak = plan(dnf, "--setopt=install_weak_deps=True install jq", prog="microdnf")
    assert runs(weak)[0] == [*APT_GET, "install", "jq"]  # Debian's Recommends: weak deps


@pytest.mark.parametrize(
    ("rhel", "debian"),
    [("openssl", "openssl"), ("procps-ng", "procps"), ("vim-minimal", "vim-tiny"),
     ("openssl-devel", "libssl-dev"), ("libffi-devel", "libffi-dev"),
     ("libxml2-devel", "libxml2-dev"), ("gcc-c++", "g++"), ("python3-devel", "python3-dev"),
     ("python39-devel", "python3-dev"), ("python3.11-pip", "python3-pip"),
     ("python3-PyYAML", "python3-yaml"), ("python3-jmespath", "python3-jmespath"),
     ("curl.x86_64", "curl"), ("openssl-3.0.7-27.el9", "openssl"),
     ("java-17-openjdk-headless", "openjdk-17-jre-headless")],
)  # fmt: skip
def test_rhel_names_become_debians(dnf: ModuleType, rhel: str, debian: str) -> None:
    assert runs(plan(dnf, f"install -y {rhel}"))[0][-1] == debian


def test_what_needs_nothing_on_debian_is_a_note(dnf: ModuleType) -> None:
    for name in ("epel-release", "subscription-manager", "dnf-plugins-core"):
        actions = plan(dnf, f"install -y {name}")
        assert runs(actions) == [] and notes(actions), name
    url = "https://dl.fedoraproject.org/pub/epel/epel-release-latest-9.noarch.rpm"
    assert "EPEL" in notes(plan(dnf, f"install -y {url}"))[0]
    assert notes(plan(dnf, "config-manager --set-enabled crb"))
    assert notes(plan(dnf, "module enable -y nodejs:18"))


def test_a_name_with_no_equivalent_stops_naming_the_apt_package(dnf: ModuleType) -> None:
    java = refused(dnf, "install -y java-11-openjdk-headless")
    assert "apt-get install -y openjdk-17-jre-headless" in java
    unknown = refused(dnf, "install -y postgresql15-server", prog="yum")
    assert unknown.startswith("no Debian package for RHEL's postgresql15-server; Debian has ")
    assert "postgresql-15" in unknown and "apt-get install -y <package>" in unknown
    assert "an .rpm package cannot be installed" in refused(dnf, "install -y ./tool-1.0.rpm")
    assert "package groups" in refused(dnf, "install -y @development")
    assert "option --downloadonly has no meaning" in refused(dnf, "install --downloadonly jq")
    assert refused(dnf, "history undo 3").startswith("history: not available on Debian")
    assert "name the packages" in refused(dnf, "install -y")


def test_repository_options_are_accepted_with_a_note(dnf: ModuleType) -> None:
    actions = plan(dnf, "--disablerepo=* --enablerepo ubi-9-appstream install -y jq")
    assert runs(actions)[0][-1] == "jq"
    assert notes(actions) == [
        "--disablerepo=*: the repositories are Debian's apt sources",
        "--enablerepo=ubi-9-appstream: the repositories are Debian's apt sources",
    ]


def test_apts_answers_are_read(dnf: ModuleType) -> None:
    debnames = sys.modules["debnames"]
    policy = (
        "openssl:\n  Installed: 3.0.15-1~deb12u1\n  Candidate: 3.0.17-1~deb12u2\n"
        "  Version table:\nmail-transport-agent:\n  Installed: (none)\n  Candidate: (none)\n"
    )
    assert debnames.with_candidate(policy) == {"openssl"}
    simulation = (
        "Inst libssl3 [3.0.15-1~deb12u1] (3.0.17-1~deb12u2 Debian-Security:12/stable-security"
        " [amd64])\nInst tzdata [2024a-0+deb12u1] (2025b-0+deb12u1 Debian:12.11/stable [all])\n"
        "Conf libssl3 (3.0.17-1~deb12u2 Debian-Security:12/stable-security [amd64])\n"
    )
    assert debnames.simulated_upgrades(simulation) == [("libssl3", True), ("tzdata", False)]


def test_not_root_is_refused_as_dnf_refuses_it(
    dnf: ModuleType, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(dnf.os, "geteuid", lambda: 1001)
    assert dnf.main(["/usr/local/bin/yum", "install", "-y", "git"]) == 1
    assert capsys.readouterr().err == dnf.ROOT_ERROR + "\n"
    assert dnf.main(["/usr/local/bin/yum", "--version"]) == 0  # no root needed
