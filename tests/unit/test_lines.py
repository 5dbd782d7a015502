"""The ansible-core lines: one list, runner/util/lines.txt, read by hack/lines.sh,
hack/install_collections.py, the warm executor's registry and `init`; the constraints files,
pyproject.toml's ranges and the base image's defaults kept to it; and the scripts refuse what
does not fit."""

from __future__ import annotations

import importlib.util
import os
import re
import subprocess
import tomllib
from pathlib import Path
from types import ModuleType

import pytest
from packaging.requirements import Requirement
from packaging.version import Version

from runner.ansible.warm.patches import registry
from runner.scaffold.lines import ANSIBLE_PACKAGE, DEFAULT_LINE, LINES
from runner.util import lines

REPO = Path(__file__).resolve().parents[2]
LINES_SH = REPO / "hack" / "lines.sh"
VENV_SH = REPO / "hack" / "venv.sh"


def lines_sh(*argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(LINES_SH), *argv], capture_output=True, text=True, timeout=30)


def install_collections() -> ModuleType:
    spec = importlib.util.spec_from_file_location(
        "install_collections", REPO / "hack" / "install_collections.py"
    )
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def pins(path: Path) -> dict[str, list[str]]:
    """package (lower case) -> its pinned versions in a constraints file."""
    found: dict[str, list[str]] = {}
    for raw in path.read_text().splitlines():
        if raw and not raw.startswith("#"):
            name, version = raw.split(";")[0].strip().split("==")
            found.setdefault(name.lower().replace("_", "-"), []).append(version)
    return found


def test_one_list_of_lines_everywhere() -> None:
    assert LINES == lines.NAMES and DEFAULT_LINE == lines.DEFAULT
    assert lines_sh("list").stdout.split() == list(LINES)
    assert lines_sh("default").stdout.strip() == DEFAULT_LINE
    assert lines_sh("ends").stdout.split() == [LINES[0], LINES[-1]]
    for line in lines.TABLE.lines:
        assert lines_sh("pythons", line.name).stdout.split() == list(line.pythons)
        assert lines_sh("debian", line.name).stdout.strip() == line.debian
        assert ANSIBLE_PACKAGE[line.name] == line.ansible_major
    table = install_collections().ANSIBLE
    assert list(table) == list(LINES)
    # a line added without verifying the warm executor's patches on it would run plain
    assert registry.CORE_LINES == LINES


def test_pyprojects_ranges_and_markers_cover_exactly_the_lines() -> None:
    """pyproject.toml cannot read the list: its ansible-core range and the `lines` marker's
    description are kept to it here."""
    project = tomllib.loads((REPO / "pyproject.toml").read_text())
    core = next(
        Requirement(r) for r in project["project"]["dependencies"] if r.startswith("ansible-core")
    )
    first, last = LINES[0], LINES[-1]
    after = f"{last.split('.')[0]}.{int(last.split('.')[1]) + 1}"
    assert str(core.specifier) == f"<{after},>={first}", core
    pythons = {python for line in lines.TABLE.lines for python in line.pythons}
    low, high = min(pythons, key=Version), max(pythons, key=Version)
    high_next = f"3.{int(high.split('.')[1]) + 1}"
    assert project["project"]["requires-python"] == f">={low},<{high_next}"
    marker = next(
        m for m in project["tool"]["pytest"]["ini_options"]["markers"] if m.startswith("lines:")
    )
    assert f"{first}, {last}" in marker, marker


def test_a_malformed_list_is_refused_naming_the_row() -> None:
    with pytest.raises(ValueError, match=r"x\.txt:2: not a line"):
        lines.parse("default 2.18\nline 2.18 3.13\n", "x.txt")
    with pytest.raises(ValueError, match=r"default line '2\.99'"):
        lines.parse("default 2.99\n", "x.txt")


@pytest.mark.parametrize("line", LINES)
def test_each_line_has_its_constraints_inside_pyprojects_ranges(line: str) -> None:
    path = REPO / lines_sh("constraints", line).stdout.strip()
    pinned = pins(path)
    assert [v for v in pinned["ansible-core"] if not v.startswith(f"{line}.")] == []
    project = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]
    requirements = [
        Requirement(r) for r in project["dependencies"] + project["optional-dependencies"]["dev"]
    ]
    for requirement in requirements:
        name = requirement.name.lower().replace("_", "-")
        assert name in pinned, f"{path.name} has no pin for {name}"
        for version in pinned[name]:
            assert Version(version) in requirement.specifier, f"{path.name}: {name}=={version}"


def test_the_images_default_line_is_the_default_line_on_its_python() -> None:
    """images/operator-runner/Dockerfile's build arguments: ANSIBLE_CORE defaults to the default
    line, PYTHON_IMAGE to that line's base; each line's base is the Debian of its debootstrap
    base (hack/image.sh), whose python3 the line runs on."""
    dockerfile = (REPO / "images" / "operator-runner" / "Dockerfile").read_text()
    defaults = dict(re.findall(r"^ARG (\w+)=(\S+)$", dockerfile, re.MULTILINE))
    assert defaults["ANSIBLE_CORE"] == DEFAULT_LINE
    assert defaults["PYTHON_IMAGE"] == lines_sh("python-image", DEFAULT_LINE).stdout.strip()
    for line in LINES:
        image = lines_sh("python-image", line).stdout.strip()
        match = re.fullmatch(r"debian:(\w+)-slim", image)
        assert match, image
        assert match[1] == lines_sh("debian", line).stdout.strip()
        python = lines.TABLE.debian_python[match[1]]
        assert python in lines_sh("pythons", line).stdout.split(), (line, image)


@pytest.mark.parametrize(
    ("line", "python", "supported"),
    [("2.15", "3.11", True), ("2.15", "3.12", False), ("2.20", "3.11", False),
     ("2.18", "3.13", True), ("2.17", "3.13", False), ("2.21", "3.12", True)],
)  # fmt: skip
def test_a_python_the_line_does_not_run_on_is_refused_in_one_line(
    line: str, python: str, supported: bool
) -> None:
    proc = lines_sh("check", line, python)
    assert (proc.returncode == 0) == supported
    if not supported:
        pythons = ", ".join(lines_sh("pythons", line).stdout.split())
        assert proc.stderr == (
            f"ansible-core {line} does not run on Python {python}; it runs on Python {pythons} "
            "(name one with PYTHON=/path/to/python3.x, or pick another line with "
            "ANSIBLE_CORE=...).\n"
        )


def test_an_unknown_line_is_refused_naming_the_lines() -> None:
    proc = lines_sh("check", "2.14")
    assert proc.returncode == 1
    assert proc.stderr == (
        f"ANSIBLE_CORE=2.14 is not an ansible-core line operator-runner supports; the lines are: "
        f"{', '.join(LINES)} (default {DEFAULT_LINE}).\n"
    )


def test_venv_refuses_a_python_the_line_does_not_run_on(tmp_path: Path) -> None:
    python = subprocess.run(
        [str(REPO / "hack" / "find-python.sh"), "3.11"], capture_output=True, text=True
    ).stdout.strip()
    if not python:
        pytest.skip("no Python 3.11 on this machine")
    proc = subprocess.run(
        [str(VENV_SH), python, str(tmp_path / "venv"), "2.21"],
        capture_output=True, text=True, env=dict(os.environ), timeout=60,
    )  # fmt: skip
    assert proc.returncode == 1
    assert proc.stderr == (
        f"venv: '{python}' is Python 3.11, but ansible-core 2.21 does not run on Python 3.11; "
        "it runs on Python 3.13, 3.12 (name one with PYTHON=/path/to/python3.x, or pick another "
        "line with ANSIBLE_CORE=...).\n"
    )
    assert not (tmp_path / "venv").exists()


def test_makefile_picks_the_lines_venv_and_refuses_an_unknown_line() -> None:
    def make(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["make", "-n", *argv], cwd=REPO, capture_output=True, text=True, timeout=60
        )

    assert re.search(r"hack/venv.sh \S+ \.venv 2\.18$", make("venv").stdout, re.MULTILINE)
    assert re.search(
        r"hack/venv.sh \S+ \.venv-ansible-2\.15 2\.15$",
        make("venv", "ANSIBLE_CORE=2.15").stdout,
        re.MULTILINE,
    )
    bad = make("venv", "ANSIBLE_CORE=2.9")
    assert bad.returncode != 0
    assert "ANSIBLE_CORE=2.9 is not an ansible-core line operator-runner supports" in bad.stderr
