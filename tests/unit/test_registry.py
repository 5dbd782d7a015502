"""The warm executor's patch registry and how the server applies it
(runner/ansible/warm/patches/registry.py, apply.py): a patch installs only on the lines it is
verified on, any failure names the patch, the start-up report says what was done."""

from __future__ import annotations

import json
import types
from pathlib import Path

import pytest

from runner.ansible.warm.jobenv import TEST_RENAME_ENV
from runner.ansible.warm.patches import apply, registry
from runner.ansible.warm.patches.registry import Patch

CALLS: list[str] = []


def install_ok() -> None:
    CALLS.append("install")


def install_not_here() -> bool:
    return False


def install_broken() -> None:
    raise AttributeError("type object 'Connection' has no attribute 'exec_command'")


def check_ok() -> None:
    CALLS.append("check")


def check_broken() -> None:
    raise AssertionError("not wrapped")


HERE = f"{__name__}:"  # as pytest imported this file


class Base:
    def inherited(self) -> None:
        pass


class Owner(Base):
    def method(self) -> None:
        pass


@pytest.fixture
def patches(monkeypatch: pytest.MonkeyPatch) -> dict[str, Patch]:
    table = {
        "ok": Patch(
            "ok",
            "playbook",
            (f"{__name__}:Owner.method", "target a, described"),
            ("2.18",),
            HERE + "install_ok",
            HERE + "check_ok",
        ),
        "old": Patch(
            "old",
            "playbook",
            (f"{__name__}:Owner.method", "target b, described"),
            ("2.15",),
            HERE + "install_broken",
            HERE + "x",
        ),
        "unused": Patch(
            "unused",
            "any",
            (f"{__name__}:Owner.method", "target c, described"),
            ("2.18",),
            HERE + "install_not_here",
            "",
        ),
        "module": Patch(
            "module",
            "module",
            (f"{__name__}:Owner.method", "target d, described"),
            ("2.18",),
            HERE + "install_broken",
            "",
        ),
        "broken": Patch(
            "broken",
            "playbook",
            (f"{__name__}:Owner.method", "target e, described"),
            ("2.18",),
            HERE + "install_broken",
            "",
        ),
        "unchecked": Patch(
            "unchecked",
            "playbook",
            (f"{__name__}:Owner.method", "target f, described"),
            ("2.18",),
            HERE + "install_ok",
            HERE + "check_broken",
        ),
    }
    monkeypatch.setattr(apply, "BY_NAME", table)
    CALLS.clear()
    return table


def test_a_versions_line() -> None:
    assert registry.line_of("2.18.19") == "2.18"
    assert registry.line_of("2.20.0rc1") == "2.20"
    assert registry.line_of("2.9.27") == "2.9"
    assert registry.verified("2.15") and registry.verified("2.21")
    assert not registry.verified("2.22") and not registry.verified("2.14")


def test_every_patch_is_registered_once_with_its_lines() -> None:
    names = [patch.name for patch in registry.PATCHES]
    assert len(names) == len(set(names))
    for patch in registry.PATCHES:
        assert patch.lines and set(patch.lines) <= set(registry.CORE_LINES), patch.name
        assert patch.kind in ("playbook", "module", "any"), patch.name
        assert patch.targets and ":" in patch.install and ":" in patch.check, patch.name


def test_a_line_outside_the_core_is_refused_naming_the_version(patches: dict[str, Patch]) -> None:
    with pytest.raises(apply.PatchFailed) as failed:
        apply.start(["playbook"], version="2.22.0")
    assert failed.value.patch == "core"
    assert "ansible-core 2.22.0" in failed.value.error and "2.15 to 2.21" in failed.value.error


def test_patches_install_on_their_lines_only(patches: dict[str, Patch], tmp_path: Path) -> None:
    applied = apply.start(["playbook"], version="2.18.19")
    assert apply.install("ok") and CALLS == ["install"]
    assert not apply.install("old")  # verified on 2.15 only: not installed (would raise)
    assert not apply.install("unused")  # it says it does not apply here
    assert not apply.install("module")  # no module kind served
    apply.check_all()
    assert CALLS == ["install", "check"]
    assert (applied.installed, applied.skipped, applied.unused) == (["ok"], ["old"], ["unused"])
    status = tmp_path / "status.json"
    apply.report(str(status), None)
    assert json.loads(status.read_text()) == {
        "ansible": "2.18.19",
        "line": "2.18",
        "installed": ["ok"],
        "skipped": ["old"],
        "failed": None,
    }


def test_a_failing_install_or_check_names_the_patch(
    patches: dict[str, Patch], tmp_path: Path
) -> None:
    apply.start(["playbook"], version="2.18.19")
    with pytest.raises(apply.PatchFailed) as failed:
        apply.install("broken")
    assert failed.value.patch == "broken"
    assert "install: AttributeError" in failed.value.error and "exec_command" in failed.value.error
    assert apply.install("unchecked")
    with pytest.raises(apply.PatchFailed) as failed:
        apply.check_all()
    assert (failed.value.patch, failed.value.error) == (
        "unchecked",
        "check: AssertionError: not wrapped",
    )
    status = tmp_path / "status.json"
    apply.report(str(status), failed.value)
    assert json.loads(status.read_text())["failed"] == {
        "patch": "unchecked",
        "error": "check: AssertionError: not wrapped",
    }


def test_the_test_rename_hook(monkeypatch: pytest.MonkeyPatch) -> None:
    target = types.SimpleNamespace(Inner=types.SimpleNamespace(method=len))
    monkeypatch.setattr(apply.importlib, "import_module", lambda name: target)
    apply.rename_for_test("server", {TEST_RENAME_ENV: "job:m:Inner.method"})
    assert target.Inner.method is len  # another phase: untouched
    apply.rename_for_test("job", {TEST_RENAME_ENV: "job:m:Inner.method"})
    assert not hasattr(target.Inner, "method") and target.Inner.method_renamed is len


def test_a_target_that_is_not_there_fails_the_install(patches: dict[str, Patch]) -> None:
    apply.start(["playbook"], version="2.18.19")
    for target in (f"{__name__}:Owner.gone", f"{__name__}:Owner.inherited", "no_such_module:x"):
        patches["ok"] = Patch("ok", "playbook", (target,), ("2.18",), HERE + "install_ok", "")
        with pytest.raises(apply.PatchFailed) as failed:
            apply.install("ok")
        assert failed.value.patch == "ok" and "install:" in failed.value.error, target
    assert CALLS == []  # never installed
