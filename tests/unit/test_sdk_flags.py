"""Every flag of `ansible-operator run`, operator-sdk v1.30 to today's ansible-operator-plugins,
is accepted with its values; unknown flags stop start-up with one line."""

from __future__ import annotations

import argparse
import importlib.metadata
import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest

from runner import __version__
from runner.ansible.interface import LogEvents
from runner.app.cli import sdkflags, zapflags
from runner.app.cli.commands import build_parser

EXE = Path(sys.executable).parent / "operator-runner"

#: (flag as a Deployment passes it, the attribute, the value read). Sources:
#: ansible-operator-plugins internal/ansible/flags/flag.go (and operator-sdk v1.30's),
#: controller-runtime pkg/log/zap (BindFlags).
EVERY_FLAG: list[tuple[str, str, object]] = [
    ("--watches-file=/opt/ansible/watches.yaml", "watches_file", Path("/opt/ansible/watches.yaml")),
    ("--inject-owner-ref=false", "inject_owner_ref", False),
    ("--ansible-verbosity=4", "ansible_verbosity", 4),
    ("--ansible-roles-path=/opt/ansible/roles", "ansible_roles_path", "/opt/ansible/roles"),
    ("--ansible-collections-path=/opt/c", "ansible_collections_path", "/opt/c"),
    ("--ansible-args='--tags a'", "ansible_args", ("--tags", "a")),
    ("--reconcile-period=1m30s", "reconcile_period", 90.0),
    ("--max-concurrent-reconciles=3", "max_concurrent_reconciles", 3),
    ("--config=controller_manager_config.yaml", "config", "controller_manager_config.yaml"),
    ("--metrics-addr=127.0.0.1:8080", "metrics_addr", "127.0.0.1:8080"),
    ("--metrics-bind-address=:8443", "metrics_bind_address", ":8443"),
    ("--health-probe-bind-address=:6789", "health_probe_bind_address", ":6789"),
    ("--enable-leader-election", "enable_leader_election", True),
    ("--leader-elect", "leader_elect", True),
    ("--leader-election-id=memcached-operator", "leader_election_id", "memcached-operator"),
    ("--leader-election-namespace=ops", "leader_election_namespace", "ops"),
    (
        "--leader-elect-resource-lock=configmapsleases",
        "leader_elect_resource_lock",
        "configmapsleases",
    ),
    ("--leader-elect-lease-duration=30s", "leader_elect_lease_duration", 30.0),
    ("--leader-elect-renew-deadline=20s", "leader_elect_renew_deadline", 20.0),
    ("--graceful-shutdown-timeout=1m", "graceful_shutdown_timeout", 60.0),
    ("--ansible-log-events=tasks", "ansible_log_events", LogEvents.TASKS),
    ("--proxy-port=8888", "proxy_port", 8888),
    ("--enable-http2", "enable_http2", True),
    ("--metrics-secure", "metrics_secure", True),
    ("--metrics-require-rbac", "metrics_require_rbac", True),
    ("--zap-devel", "zap_devel", True),
    ("--zap-encoder=console", "zap_encoder", "console"),
    ("--zap-log-level=debug", "zap_log_level", logging.DEBUG),
    ("--zap-stacktrace-level=error", "zap_stacktrace_level", logging.ERROR),
    ("--zap-time-encoding=rfc3339", "zap_time_encoding", "rfc3339"),
]


def run(*args: str, exe: Path = EXE) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(exe), *args], capture_output=True, text=True, timeout=60)


@pytest.mark.parametrize(("flag", "attribute", "expected"), EVERY_FLAG)
def test_every_ansible_operator_flag_is_accepted(
    flag: str, attribute: str, expected: object
) -> None:
    args = build_parser().parse_args(["run", flag])
    assert getattr(args, attribute) == expected


def test_all_of_them_together_as_a_scaffold_passes_them() -> None:
    args = build_parser().parse_args(
        ["run", *(f for f, _, _ in EVERY_FLAG if "metrics-addr" not in f)]
    )
    assert args.metrics_secure and args.metrics_require_rbac and args.leader_elect


@pytest.mark.parametrize(
    ("text", "level"),
    [
        ("debug", logging.DEBUG),
        ("info", logging.INFO),
        ("warn", logging.WARNING),
        ("error", logging.ERROR),
        ("dpanic", logging.CRITICAL),
        ("panic", logging.CRITICAL),
        ("fatal", logging.CRITICAL),
        ("Info", logging.INFO),  # controller-runtime lower-cases the value
        ("1", logging.DEBUG),
        ("5", logging.DEBUG),
    ],
)
def test_zap_log_level_takes_every_level_zap_knows(text: str, level: int) -> None:
    assert build_parser().parse_args(["run", f"--zap-log-level={text}"]).zap_log_level == level


@pytest.mark.parametrize("value", ["Tasks", "tasks", "TASKS", "everything", "Nothing"])
def test_ansible_log_events_in_any_case(value: str) -> None:
    args = build_parser().parse_args(["run", f"--ansible-log-events={value}"])
    assert args.ansible_log_events.value.lower() == value.lower()


@pytest.mark.parametrize("value", ["epoch", "millis", "nano", "nanos", "iso8601", "rfc3339nano"])
def test_zap_time_encodings(value: str) -> None:
    args = build_parser().parse_args(["run", f"--zap-time-encoding={value}"])
    assert args.zap_time_encoding == ("nanos" if value == "nano" else value)


@pytest.mark.parametrize(
    "flag",
    [
        "--zap-log-level=0",
        "--zap-log-level=verbose",
        "--zap-encoder=xml",
        "--zap-time-encoding=unix",
        "--ansible-log-events=some",
        "--leader-elect-resource-lock=endpoints",
        "--proxy-port=70000",
        "--metrics-secure=maybe",
        "--zap-devel=bogus",
    ],
)
def test_bad_values_stop_start_up_with_one_line(flag: str) -> None:
    proc = run("run", flag)
    assert proc.returncode == 2
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and flag.split("=")[0] in lines[0], proc.stderr


def test_an_unknown_flag_is_one_line_with_the_nearest_flag() -> None:
    proc = run("run", "--metrics-secur", "--leader-elect")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert "unrecognized arguments: --metrics-secur" in line
    assert "--metrics-secure" in line and "--help" in line
    proc = run("run", "--totally-unknown=1")
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1


def test_flags_are_not_abbreviated() -> None:
    """Go's flags are spelled out; an abbreviation is an unknown flag, not a guess."""
    proc = run("run", "--watches=watches.yaml")
    assert proc.returncode == 2 and "unrecognized arguments: --watches" in proc.stderr


def test_the_cli_works_under_the_name_ansible_operator(tmp_path: Path) -> None:
    exe = tmp_path / "ansible-operator"
    exe.symlink_to(EXE)
    version = run("version", exe=exe).stdout.strip()
    # operator-sdk's shape: `ansible-operator version: "v1.38.0", commit: "...", ...`
    assert version.startswith(f'ansible-operator version: "v{__version__}", commit: "unknown", ')
    assert 'GOOS: "linux"' in version and "ansible-core version: " in version
    assert run("version").stdout.strip() == f"operator-runner {__version__}"
    proc = run("run", "--nope", exe=exe)
    assert proc.returncode == 2 and proc.stderr.startswith("ansible-operator")
    assert "unrecognized arguments: --nope" in proc.stderr
    assert "--metrics-require-rbac" in run("run", "--help", exe=exe).stdout


def test_pip_installs_ansible_operator_as_the_same_program() -> None:
    """`pip install operator-runner` puts `ansible-operator` on PATH beside `operator-runner`,
    where an operator-sdk project's Makefile looks for it."""
    scripts = {e.name: e.value for e in importlib.metadata.entry_points(group="console_scripts")}
    assert scripts["ansible-operator"] == scripts["operator-runner"] == "runner.app.cli:main"
    exe = EXE.parent / "ansible-operator"
    assert run("version", exe=exe).stdout.startswith('ansible-operator version: "v')


def test_metrics_require_rbac_without_metrics_secure_is_refused_as_operator_sdk_does() -> None:
    """ansible-operator's `run` refuses it before it starts (a command-line error)."""
    message = "--metrics-secure flag is required when --metrics-require-rbac is present"
    with pytest.raises(sdkflags.FlagConflict, match=message):
        resolved("--metrics-require-rbac")
    with pytest.raises(sdkflags.FlagConflict, match=message):
        resolved("--metrics-require-rbac", "--metrics-secure=false")
    assert resolved("--metrics-require-rbac", "--metrics-secure").metrics_require_rbac
    assert not resolved("--metrics-secure").metrics_require_rbac
    proc = run("run", "--metrics-require-rbac")
    assert proc.returncode == 2
    [line] = proc.stderr.strip().splitlines()
    assert line == f"operator-runner: error: {message} (see operator-runner --help)"


def resolved(*flags: str, environ: dict[str, str] | None = None) -> argparse.Namespace:
    words = ["run", *flags]
    args = build_parser().parse_args(words)
    env = {} if environ is None else environ
    sdkflags.resolve(args, sdkflags.given_flags(words), env)
    return args


def test_deprecated_spellings_mean_the_same() -> None:
    args = resolved("--metrics-addr=127.0.0.1:8080", "--enable-leader-election")
    assert (args.metrics_bind_address, args.leader_elect) == ("127.0.0.1:8080", True)
    notes = sdkflags.notes(args, {"--metrics-addr", "--enable-leader-election"}, {})
    assert any("--metrics-addr is deprecated" in n for n in notes)
    assert any("--enable-leader-election is deprecated" in n for n in notes)


@pytest.mark.parametrize(
    "pair",
    [
        ("--metrics-addr=:1", "--metrics-bind-address=:2"),
        ("--enable-leader-election", "--leader-elect"),
    ],
)
def test_both_spellings_together_are_refused(pair: tuple[str, str]) -> None:
    with pytest.raises(sdkflags.FlagConflict, match="only one of"):
        resolved(*pair)
    proc = run("run", *pair)
    assert proc.returncode == 2 and "only one of" in proc.stderr


def test_path_flags_set_their_environment_variables() -> None:
    env: dict[str, str] = {"ANSIBLE_ROLES_PATH": "/old"}
    resolved("--ansible-roles-path=/opt/roles", "--ansible-collections-path=/opt/c", environ=env)
    assert env == {"ANSIBLE_ROLES_PATH": "/opt/roles", "ANSIBLE_COLLECTIONS_PATH": "/opt/c"}


def test_operator_name_names_the_lease_unless_the_flag_does() -> None:
    assert resolved(environ={"OPERATOR_NAME": "memcached"}).leader_election_id == "memcached"
    args = resolved("--leader-election-id=x", environ={"OPERATOR_NAME": "memcached"})
    assert args.leader_election_id == "x"
    notes = sdkflags.notes(args, {"--leader-election-id"}, {"OPERATOR_NAME": "memcached"})
    assert "OPERATOR_NAME is ignored: --leader-election-id is set" in notes


def test_flags_without_effect_say_so_in_one_line_each() -> None:
    flags = ["--enable-http2", "--config=c.yaml", "--leader-elect-resource-lock=configmapsleases"]
    args = resolved(*flags)
    notes = sdkflags.notes(args, sdkflags.given_flags(flags), {})
    assert len(notes) == 3
    assert any("--enable-http2 has no effect" in n for n in notes)
    assert any("--config=c.yaml is not read" in n for n in notes)
    assert any("uses a Lease" in n for n in notes)
    assert sdkflags.notes(resolved("--leader-elect-resource-lock=leases"), set(), {}) == []


def test_zap_flags_map_onto_the_logging() -> None:
    args = resolved("--zap-devel")
    assert (zapflags.level(args), zapflags.stack_level(args)) == (logging.DEBUG, logging.WARNING)
    args = resolved("--zap-devel", "--zap-log-level=error")
    assert zapflags.level(args) == logging.ERROR
    assert zapflags.log_format(resolved("--zap-encoder=json"), {"--zap-encoder"}) == "json"
    assert zapflags.log_format(resolved("--zap-encoder=console"), {"--zap-encoder"}) == "text"
    both = resolved("--zap-encoder=json", "--log-format=text")
    assert zapflags.log_format(both, {"--zap-encoder", "--log-format"}) == "text"
    plain = resolved()
    assert (zapflags.level(plain), zapflags.stack_level(plain)) == (logging.INFO, None)
    off = resolved("--zap-devel=false")
    assert (zapflags.level(off), zapflags.stack_level(off)) == (logging.INFO, None)


def test_the_log_lines_follow_time_encoding_and_stacktrace_level() -> None:
    code = (
        "import logging\n"
        "from runner.util import logs\n"
        "logs.setup('json', logging.INFO, 'epoch', logging.ERROR)\n"
        "logging.getLogger('x').info('calm')\n"
        "logging.getLogger('x').error('alarm')\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=os.environ
    )
    import json

    calm, alarm = (json.loads(line) for line in proc.stderr.strip().splitlines())
    assert float(calm["ts"]) > 1.7e9 and "stacktrace" not in calm
    assert (
        "Stack (most recent call last)" in alarm["stacktrace"] and "<string>" in alarm["stacktrace"]
    )
