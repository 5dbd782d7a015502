"""`operator-runner preview` and `check-roles`: their command lines, and what the preview makes
sure of before any run (runner/app/cli/preview.py, runner/app/manager/preview.py)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Mapping
from pathlib import Path

import pytest

from runner.app.cli.commands import build_parser, main
from runner.app.manager.oneshot import UsageError
from runner.app.manager.preview import (
    CHANGES,
    FAILURES,
    OK,
    ReadOnly,
    WriteRefused,
    exit_code,
    scrub,
    state_of,
)
from runner.app.manager.previewtargets import namespaces_of
from runner.preview.outcome import CrPreview

PROJECT = Path(__file__).resolve().parents[1] / "integration" / "project"


def test_preview_takes_runs_flags_and_its_own() -> None:
    """The operator's own command line (its Deployment's args) works for a preview."""
    args = build_parser().parse_args(
        [
            "preview",
            "--watches-file=./watches.yaml",
            "--reconcile-period=0s",
            "--leader-elect",
            "--max-concurrent-reconciles=4",
            "--ansible-args=--tags x",
            "--kind",
            "Echo",
            "--kind=echoflask",
            "-n",
            "a",
            "-l",
            "tier=web",
            "-o",
            "json",
            "--concurrency=3",
            "--from-line=2.18",
        ]
    )
    assert args.kind == ["Echo", "echoflask"] and args.namespace == ["a"]
    assert args.selector == "tier=web" and args.output == "json" and args.concurrency == 3
    assert args.from_line == "2.18" and args.ansible_args == ("--tags", "x")


@pytest.mark.parametrize("bad", ["--concurrency=0", "--concurrency=x", "--from-line=2.9"])
def test_preview_refuses_a_bad_flag_in_one_line(
    bad: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exit:
        main(["preview", bad])
    assert exit.value.code == 2
    assert len(capsys.readouterr().err.strip().splitlines()) == 1


def test_check_roles_lists_hints_with_file_and_line(capsys: pytest.CaptureFixture[str]) -> None:
    code = main(["check-roles", "--line=2.19", "-o", "json", str(PROJECT / "roles" / "embedded")])
    assert code == 0
    [hint] = json.loads(capsys.readouterr().out)
    assert hint["location"].endswith("roles/embedded/tasks/main.yml:13")
    assert hint["change"] == "template-in-expression" and hint["line"] == "2.19"
    assert main(["check-roles", str(PROJECT / "no-such-role")]) == 1


def test_the_runs_get_no_credentials_of_their_own() -> None:
    environ = {
        "K8S_AUTH_HOST": "https://api",
        "K8S_AUTH_API_KEY": "t",
        "KUBERNETES_SERVICE_HOST": "10.0.0.1",
        "KUBERNETES_SERVICE_PORT": "443",
        "KUBERNETES_PORT_443_TCP": "tcp://10.0.0.1:443",
        "PATH": "/bin",
        "ANSIBLE_ROLES_PATH": "/r",
    }
    removed = scrub(environ)
    assert environ == {"PATH": "/bin", "ANSIBLE_ROLES_PATH": "/r"}
    assert "K8S_AUTH_API_KEY" in removed and "KUBERNETES_SERVICE_HOST" in removed


def test_the_previews_client_sends_reads_only() -> None:
    sent: list[str] = []

    async def transport(
        method: str, url: str, body: str | None, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str, str]:
        sent.append(method)
        return 200, "OK", "{}"

    read_only = ReadOnly(transport)
    assert asyncio.run(read_only("GET", "/api/v1/x", None, {}, 1.0))[0] == 200
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        with pytest.raises(WriteRefused):
            asyncio.run(read_only(method, "/api/v1/x", "{}", {}, 1.0))
    assert sent == ["GET"]


def test_namespaces_narrow_watch_namespace() -> None:
    assert namespaces_of([], []) == [None]
    assert namespaces_of(["a", "b"], []) == ["a", "b"]
    assert namespaces_of(["a", "b"], ["b"]) == ["b"]
    assert namespaces_of([], ["c", "c"]) == ["c"]
    with pytest.raises(UsageError, match="not watched"):
        namespaces_of(["a"], ["c"])


def test_the_exit_code_fails_a_ci_step_when_a_cr_fails() -> None:
    def one(outcome: str) -> CrPreview:
        return CrPreview("K", "g", "v1", "ns", outcome, outcome=outcome)

    assert exit_code([one("unchanged"), one("changed")], False) == OK
    assert exit_code([one("unchanged"), one("changed")], True) == CHANGES
    assert exit_code([one("changed"), one("failed")], True) == FAILURES
    assert exit_code([], True) == OK


def test_a_crs_state_before_is_its_last_verdict() -> None:
    def with_conditions(*conditions: tuple[str, str]) -> dict[str, object]:
        return {"status": {"conditions": [{"type": t, "status": s} for t, s in conditions]}}

    assert state_of(with_conditions(("Successful", "True"), ("Failure", "False"))) == "Successful"
    assert state_of(with_conditions(("Successful", "False"), ("Failure", "True"))) == "Failure"
    assert state_of({}) == ""
