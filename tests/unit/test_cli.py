"""The command line: help, version, and start-up refusing a bad watches.yaml clearly."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from runner import __version__

EXE = Path(sys.executable).parent / "operator-runner"


def run(*args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(EXE), *args], capture_output=True, text=True, timeout=60, cwd=cwd)


def test_version_and_help() -> None:
    assert run("--version").stdout.strip() == f"operator-runner {__version__}"
    assert run("version").stdout.strip() == f"operator-runner {__version__}"
    help_text = run("run", "--help").stdout
    for flag in (
        "--watches-file",
        "--max-concurrent-reconciles",
        "--reconcile-period",
        "--ansible-verbosity",
        "--ansible-args",
        "--ansible-log-events",
        "--inject-owner-ref",
        "--log-format",
    ):
        assert flag in help_text


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        (
            "- version: v1\n  group: a.b\n  kind: K\n  role: nowhere\n",
            ["watches.yaml", "entry 1", "'role'", "nowhere"],
        ),
        (
            "- version: v1\n  group: a.b\n  kind: K\n  role: r\n  manageStatus: 'yes'\n",
            ["watches.yaml", "entry 1", "manageStatus"],
        ),
        (
            "- version: v1\n  group: a.b\n  kind: K\n  role: r\n"
            "- version: v1\n  group: a.b\n  kind: K\n  role: r\n",
            ["watches.yaml", "entry 2", "same group/version/kind as entry 1"],
        ),
        (
            "- version: v1\n  group: a.b\n  kind: K\n  role: r\n  finalizer:\n    role: r\n",
            ["watches.yaml", "entry 1", "finalizer", "name"],
        ),
    ],
)
def test_bad_watches_file_stops_start_up_naming_file_entry_and_key(
    tmp_path: Path, text: str, expected: list[str]
) -> None:
    (tmp_path / "roles" / "r" / "tasks").mkdir(parents=True)
    (tmp_path / "roles" / "r" / "tasks" / "main.yml").write_text("[]\n")
    (tmp_path / "watches.yaml").write_text(text)
    proc = run("run", f"--watches-file={tmp_path / 'watches.yaml'}", cwd=tmp_path)
    assert proc.returncode == 1
    for word in expected:
        assert word.lower() in proc.stderr.lower(), proc.stderr


def test_missing_watches_file(tmp_path: Path) -> None:
    proc = run("run", f"--watches-file={tmp_path / 'nope.yaml'}")
    assert proc.returncode == 1
    assert "nope.yaml" in proc.stderr


@pytest.mark.parametrize(
    "flag",
    [
        "--reconcile-period=abc",
        "--ansible-verbosity=9",
        "--max-concurrent-reconciles=0",
        "--log-format=xml",
    ],
)
def test_bad_flags_are_refused(flag: str) -> None:
    proc = run("run", flag)
    assert proc.returncode == 2
    assert flag.split("=")[0] in proc.stderr


@pytest.mark.parametrize(
    ("argv_value", "expected"),
    [
        # what a Deployment's `args` passes: no shell took the quotes off
        (
            "'--vault-password-file /opt/ansible/pwd.yml'",
            ("--vault-password-file", "/opt/ansible/pwd.yml"),
        ),
        ('"--tags foo --skip-tags bar"', ("--tags", "foo", "--skip-tags", "bar")),
        ("'--extra-vars=from_args=yes'", ("--extra-vars=from_args=yes",)),
        # what a shell passes after taking its quotes off: split as before
        ("--tags foo", ("--tags", "foo")),
        ("--extra-vars 'msg=a b'", ("--extra-vars", "msg=a b")),
        ("\"--extra-vars 'msg=a b'\"", ("--extra-vars", "msg=a b")),
        ("'--check' '--diff'", ("--check", "--diff")),
        ("", ()),
    ],
)
def test_ansible_args_strip_one_pair_of_quotes_then_split(
    argv_value: str, expected: tuple[str, ...]
) -> None:
    from runner.app.cli.commands import build_parser

    args = build_parser().parse_args(["run", f"--ansible-args={argv_value}"])
    assert args.ansible_args == expected


def test_ansible_args_with_unbalanced_quotes_is_refused() -> None:
    proc = run("run", "--ansible-args='--tags foo")
    assert proc.returncode == 2
    assert "--ansible-args" in proc.stderr and "cannot split" in proc.stderr
