"""runner.scaffold.cli: the init and create api subcommands, their messages, their imports."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from runner.scaffold import cli


def run(root: Path, *argv: str) -> int:
    parser = argparse.ArgumentParser(prog="operator-runner")
    cli.add_commands(parser.add_subparsers(dest="command"))
    return cli.run(parser.parse_args(argv), root=root)


def test_init_then_create_api(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb") == 0
    out = capsys.readouterr().out
    assert "  watches.yaml\n" in out and "create api" in out
    assert run(tmp_path, "create", "api", "--group", "webapp", "--version", "v1",
               "--kind", "Guestbook", "--generate-role", "--short-name", "gb") == 0  # fmt: skip
    assert "  roles/guestbook/tasks/main.yml\n" in capsys.readouterr().out


def test_init_with_the_first_api_as_operator_sdks(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert run(tmp_path, "init", "--plugins=ansible", "--domain", "example.com",
               "--project-name", "gb", "--group", "cache", "--version", "v1alpha1",
               "--kind", "Memcached", "--generate-role") == 0  # fmt: skip
    out = capsys.readouterr().out
    assert "  roles/memcached/tasks/main.yml\n" in out and "  PROJECT\n" in out
    assert "with Memcached" in out
    assert (
        "- version: v1alpha1\n  group: cache.example.com\n  kind: Memcached\n  role: memcached\n"
        in (tmp_path / "watches.yaml").read_text()
    )


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["--group", "cache"], "the first API needs --version, --kind too"),
        (["--generate-playbook"], "go with --group, --version and --kind"),
        (["--plugins=go/v4"], "--plugins 'go/v4': operator-runner writes operator-sdk's Ansible"),
        (["--group", "cache", "--version", "1", "--kind", "M"], "--version '1'"),
    ],
)
def test_init_refusals_write_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], message: str
) -> None:
    assert run(tmp_path, "init", "--domain", "example.com", *argv) == 1
    assert message in capsys.readouterr().err
    assert list(tmp_path.iterdir()) == []


def test_domain_defaults_to_operator_sdks(tmp_path: Path) -> None:
    assert run(tmp_path, "init", "--project-name", "gb") == 0
    assert "domain: my.domain\n" in (tmp_path / "PROJECT").read_text()


def test_errors_are_one_line_and_exit_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert run(tmp_path, "init", "--domain", "Bad_Domain") == 1
    err = capsys.readouterr().err
    assert err.startswith("operator-runner init: --domain 'Bad_Domain' is not a DNS subdomain")
    assert err.count("\n") == 1
    assert list(tmp_path.iterdir()) == []
    assert run(tmp_path, "create", "api", "--group", "g", "--version", "v1", "--kind", "K") == 1
    assert "no PROJECT file" in capsys.readouterr().err


def test_role_and_playbook_together_are_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run(tmp_path, "init", "--domain", "example.com", "--project-name", "gb")
    with pytest.raises(SystemExit) as exit_:
        run(tmp_path, "create", "api", "--group", "g", "--version", "v1", "--kind", "K",
            "--generate-role", "--generate-playbook")  # fmt: skip
    assert exit_.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err
    assert not (tmp_path / "roles/k").exists()


def test_scaffold_imports_nothing_of_the_runtime() -> None:
    code = (
        "import sys, runner.scaffold.cli, runner.scaffold.api, runner.scaffold.project\n"
        "from runner.scaffold.names import snake_kind; snake_kind('EchoFlask')\n"
        "heavy = {'kopf', 'ansible_runner', 'kubernetes', 'ansible', 'aiohttp'}\n"
        "loaded = {m.split('.')[0] for m in sys.modules} & heavy\n"
        "runtime = {m for m in sys.modules if m.startswith('runner.')\n"
        "           and not m.startswith('runner.scaffold')\n"
        "           and m not in ('runner.reconcile', 'runner.reconcile.snakecase',\n"
        "                         'runner.util', 'runner.util.lines')}\n"
        "print(sorted(loaded | runtime))\n"
    )
    result = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    )
    assert result.stdout.strip() == "[]"


def test_the_console_script_has_init_and_create_api(tmp_path: Path) -> None:
    exe = Path(sys.executable).parent / "operator-runner"
    project = tmp_path / "guestbook-operator"
    project.mkdir()

    def command(*argv: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [str(exe), *argv], cwd=project, capture_output=True, text=True, timeout=60
        )

    assert command("init", "--domain", "example.com").returncode == 0
    assert (
        "guestbook-operator-system" in (project / "config/default/kustomization.yaml").read_text()
    )
    created = command(
        "create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook"
    )
    assert created.returncode == 0, created.stderr
    again = command("create", "api", "--group", "webapp", "--version", "v1", "--kind", "Guestbook")
    assert again.returncode == 1
    assert again.stderr.startswith(
        "operator-runner create api: Guestbook webapp.example.com/v1 is already in watches.yaml"
    )
    version = command(
        "create", "api", "--group", "webapp", "--version", "v2", "--kind", "Guestbook", "--storage"
    )
    assert version.returncode == 0, version.stderr
    assert version.stdout.splitlines() == [
        "  PROJECT",
        "  config/crd/bases/webapp.example.com_guestbooks.yaml",
        "added version v2 to Guestbook (config/crd/bases/webapp.example.com_guestbooks.yaml; "
        "served, storage "
        "version v2); watches.yaml still reconciles Guestbook v1: its role sees objects in v1; "
        "next: write the conversion between the versions: operator-runner create webhook --kind "
        "Guestbook --convert (a role), or convert: fields: in watches.yaml when only names differ "
        "(docs/webhooks.md#conversion)",
    ]
