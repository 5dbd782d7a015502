"""`operator-runner reconcile`: its arguments and the CR file it reads (no cluster)."""

from __future__ import annotations

from pathlib import Path

import pytest

from runner.app.cli import commands as cli
from runner.app.manager.oneshot import UNSAVED_UID, UsageError, _as_given, read_cr_file


def test_the_reconcile_command_parses_kind_name_and_flags() -> None:
    args = cli.build_parser().parse_args(
        ["reconcile", "echoflask/example", "-n", "ns", "--check", "--diff"]
    )
    assert (args.command, args.target, args.namespace, args.check, args.diff) == (
        "reconcile",
        "echoflask/example",
        "ns",
        True,
        True,
    )
    assert args.filename is None and args.watches_file == Path("watches.yaml")


def test_neither_or_both_of_target_and_file_is_a_usage_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert cli.main(["reconcile"]) == 1
    assert cli.main(["reconcile", "echo/x", "-f", str(tmp_path / "x.yaml")]) == 1
    assert "KIND/NAME or -f FILE" in capsys.readouterr().out


def test_a_watches_file_that_cannot_be_read_is_a_usage_error(tmp_path: Path) -> None:
    missing = tmp_path / "nope.yaml"
    assert cli.main(["reconcile", "echo/x", f"--watches-file={missing}"]) == 1


def test_read_cr_file(tmp_path: Path) -> None:
    good = tmp_path / "cr.yaml"
    good.write_text("apiVersion: app.my.domain/v1\nkind: Echo\nmetadata: {name: e}\nspec: {}\n")
    assert read_cr_file(good)["kind"] == "Echo"
    for text, message in [
        ("a: [", "is not YAML"),
        ("kind: Echo\nmetadata: {name: e}\n", "no apiVersion or kind"),
        ("apiVersion: v1\nkind: Echo\n", "no metadata.name"),
        ("---\na: 1\n---\nb: 2\n", "exactly one object"),
    ]:
        bad = tmp_path / "bad.yaml"
        bad.write_text(text)
        with pytest.raises(UsageError, match=message):
            read_cr_file(bad)
    with pytest.raises(UsageError, match="cannot read"):
        read_cr_file(tmp_path / "missing.yaml")


def test_a_file_cr_takes_the_clusters_metadata_and_keeps_its_spec() -> None:
    obj = {"apiVersion": "a/v1", "kind": "Echo", "metadata": {"name": "e"}, "spec": {"x": 2}}
    live = {"metadata": {"name": "e", "uid": "u1", "generation": 4}, "spec": {"x": 1}}
    given = _as_given(obj, live, "ns")
    assert given["spec"] == {"x": 2}
    assert given["metadata"] == {"name": "e", "uid": "u1", "generation": 4, "namespace": "ns"}
    unsaved = _as_given(obj, None, "ns")
    assert unsaved["metadata"]["uid"] == UNSAVED_UID
