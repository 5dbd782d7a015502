"""`operator-runner init --ansible-core LINE`: the line goes into the project it makes."""

from __future__ import annotations

import argparse
import importlib.metadata
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from runner.scaffold import cli
from runner.scaffold import lines as scaffold_lines
from runner.scaffold.lines import DEFAULT_LINE, LINES, installed_line


def run(root: Path, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="operator-runner")
    cli.add_commands(parser.add_subparsers(dest="command"))
    return cli.run(parser.parse_args(argv), root=root)


def dockerfile_check(project: Path) -> list[str]:
    """The Dockerfile's check of the base image's line, as an argv for this Python."""
    dockerfile = (project / "Dockerfile").read_text()
    match = re.search(r"^RUN python3 (-c '.*') \"\$ANSIBLE_CORE\"$", dockerfile, re.MULTILINE)
    assert match, dockerfile
    return [sys.executable, *shlex.split(match.group(1))]


@pytest.mark.parametrize("line", ["2.15", "2.21"])
def test_the_chosen_line_is_in_project_makefile_dockerfile_and_requirements(
    tmp_path: Path, line: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb",
               "--ansible-core", line) == 0  # fmt: skip
    assert f"for ansible-core {line}" in capsys.readouterr().out
    project = yaml.safe_load((tmp_path / "PROJECT").read_text())
    assert project["plugins"]["operator-runner.dev/v1"] == {"ansibleCore": line}
    assert f"\nANSIBLE_CORE = {line}\n" in (tmp_path / "Makefile").read_text()
    assert f"\nARG ANSIBLE_CORE={line}\n" in (tmp_path / "Dockerfile").read_text()
    requirements = (tmp_path / "requirements.txt").read_text().splitlines()
    package = scaffold_lines.ANSIBLE_PACKAGE[line]
    assert [r for r in requirements if r and not r.startswith("#")] == [
        f"ansible-core~={line}.0",
        f"ansible~={package}.0",
    ]
    assert f"ansible-core **{line}**" in (tmp_path / "README.md").read_text()


def test_default_is_the_installed_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb") == 0
    installed = ".".join(importlib.metadata.version("ansible-core").split(".")[:2])
    assert installed in LINES  # every venv of this repository has a supported line
    plugins = yaml.safe_load((tmp_path / "PROJECT").read_text())["plugins"]
    assert plugins["operator-runner.dev/v1"]["ansibleCore"] == installed


@pytest.mark.parametrize(
    ("version", "expected"),
    [("2.15.13", "2.15"), ("2.21.5", "2.21"), ("2.14.18", DEFAULT_LINE), ("2.22.0", DEFAULT_LINE),
     (None, DEFAULT_LINE)],
)  # fmt: skip
def test_installed_line_falls_back_to_the_default(
    monkeypatch: pytest.MonkeyPatch, version: str | None, expected: str
) -> None:
    def fake_version(name: str) -> str:
        assert name == "ansible-core"
        if version is None:
            raise importlib.metadata.PackageNotFoundError(name)
        return version

    monkeypatch.setattr(importlib.metadata, "version", fake_version)
    assert installed_line() == expected


def test_an_unknown_line_is_one_clear_line_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "init", "--domain", "example.com", "--ansible-core", "2.14") == 1
    err = capsys.readouterr().err
    assert err == (
        "operator-runner init: --ansible-core '2.14' is not an ansible-core line operator-runner "
        f"supports; the lines are {', '.join(LINES)} (default {DEFAULT_LINE})\n"
    )
    assert list(tmp_path.iterdir()) == []


def test_the_dockerfile_refuses_a_base_image_of_another_line(tmp_path: Path) -> None:
    """The check runs against the ansible-core of this Python, as it would in the base image."""
    here = installed_line()
    other = next(line for line in LINES if line != here)
    run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb", "--ansible-core", here)
    ok = subprocess.run([*dockerfile_check(tmp_path), here], capture_output=True, text=True)
    assert ok.returncode == 0, ok.stderr
    bad = subprocess.run([*dockerfile_check(tmp_path), other], capture_output=True, text=True)
    assert bad.returncode == 1
    assert bad.stderr.startswith(
        f"the operator-runner image has ansible-core {importlib.metadata.version('ansible-core')},"
        f" but this project is written for ansible-core {other}: build operator-runner with "
        f"ANSIBLE_CORE={other}"
    )
    assert bad.stderr.count("\n") == 1


@pytest.mark.skipif(shutil.which("make") is None, reason="no make")
def test_docker_build_hands_the_line_to_the_dockerfile(tmp_path: Path) -> None:
    run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb",
        "--ansible-core", "2.16")  # fmt: skip

    def make(*argv: str) -> str:
        return subprocess.run(
            ["make", *argv], cwd=tmp_path, capture_output=True, text=True, check=True, timeout=60,
            env=environ,
        ).stdout  # fmt: skip

    # operator-runner's own Makefile exports ANSIBLE_CORE (make unit, make test): the project's
    # line is its own all the same
    environ = {**os.environ, "ANSIBLE_CORE": "2.20"}
    built = make("-n", "docker-build", "IMG=reg/gb:v1")
    assert "--build-arg ANSIBLE_CORE=2.16 -t reg/gb:v1 ." in built
    assert "--build-arg ANSIBLE_CORE=2.21 " in make("-n", "docker-build", "ANSIBLE_CORE=2.21")
