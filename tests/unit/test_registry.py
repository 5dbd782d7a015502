"""The warm executor's patch registry and how the server applies it
(runner/ansible/warm/patches/registry.py, apply.py): a patch installs only on the lines it is
verified on, any failure names the patch, the start-up report says what was done."""

from __future__ import annotations

import ast
import json
import types
from pathlib import Path

import pytest

from runner.ansible.warm.jobenv import TEST_RENAME_ENV
from runner.ansible.warm.patches import apply, registry
from runner.ansible.warm.patches.registry import Patch, Target
from runner.util import lines

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


def fake(
    name: str,
    install: str,
    check: str = "",
    lines: str = "2.18",
    phase: str = "playbook-warmed",
    targets: tuple[str | Target, ...] = (f"{__name__}:Owner.method",),
    absent: str = "",
) -> Patch:
    return Patch(
        name, phase, 1, "what", targets, lines, HERE + install, HERE + check, absent=absent
    )


@pytest.fixture
def patches(monkeypatch: pytest.MonkeyPatch) -> dict[str, Patch]:
    table = {
        "ok": fake("ok", "install_ok", "check_ok"),
        "old": fake("old", "install_broken", lines="2.15"),  # would fail: not installed
        "gone": fake("gone", "install_broken", lines="2.19", absent="2.18"),  # nothing to do
        "unused": fake("unused", "install_not_here", phase="sealed"),
        "module": fake("module", "install_broken", phase="module-imported"),
        "broken": fake("broken", "install_broken"),
        "unchecked": fake("unchecked", "install_ok", "check_broken"),
    }
    monkeypatch.setattr(apply, "BY_NAME", table)
    monkeypatch.setattr(registry, "PATCHES", tuple(table.values()))
    CALLS.clear()
    return table


def test_a_versions_line() -> None:
    assert registry.line_of("2.18.19") == "2.18"
    assert registry.line_of("2.20.0rc1") == "2.20"
    assert registry.line_of("2.9.27") == "2.9"
    assert registry.verified("2.15") and registry.verified("2.21")
    assert not registry.verified("2.22") and not registry.verified("2.14")


def test_every_patch_is_registered_once_in_a_phase_with_checked_targets() -> None:
    names = [patch.name for patch in registry.PATCHES]
    assert len(names) == len(set(names))
    phases = [phase for phase, _, _ in registry.PHASES]
    for patch in registry.PATCHES:
        assert patch.phase in phases, patch.name
        assert patch.targets and patch.what, patch.name
        assert ":" in patch.install and ":" in patch.check, patch.name
        assert patch.install.startswith("runner.ansible.warm.patches."), patch.name  # patches/
        for line in lines.NAMES:
            for target in patch.targets_on(line):
                assert registry.TARGET.match(target), (patch.name, target)
    for phase in phases:
        orders = [patch.order for patch in registry.in_phase(phase)]
        assert orders == sorted(set(orders)), phase


def test_every_line_is_decided_by_every_patch_and_listed_never_implied() -> None:
    """The verification the registry asks for when a line is added to runner/util/lines.txt:
    each patch lists it among the lines it is verified on, or those it has nothing to do on
    (docs/contributing-lines-and-patches.md). Listed in the patch itself, as a literal."""
    for patch in registry.PATCHES:
        assert not set(patch.verified_on) & set(patch.absent_on), patch.name
        for line in lines.NAMES:
            assert line in patch.verified_on + patch.absent_on, (
                f"patch {patch.name} says nothing of ansible-core {line}: verify it there and "
                "list the line in its `lines` (or `absent`)"
            )
        for target in patch.targets:
            if isinstance(target, Target):
                assert set(target.lines.split()) <= set(patch.verified_on), patch.name
    assert registry.CORE_LINES == lines.NAMES
    tree = ast.parse(Path(registry.__file__).read_text(encoding="utf-8"))
    calls = [
        node
        for node in ast.walk(tree)
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") in ("Patch", "Target")
    ]
    assert len([c for c in calls if getattr(c.func, "id", "") == "Patch"]) == len(registry.PATCHES)
    for call in calls:
        listed = [*call.args[-1:]] if getattr(call.func, "id", "") == "Target" else []
        if getattr(call.func, "id", "") == "Patch":
            listed = [call.args[5], *(k.value for k in call.keywords if k.arg == "absent")]
        for node in listed:
            assert isinstance(node, ast.Constant) and isinstance(node.value, str), ast.dump(node)


def test_a_line_outside_the_core_is_refused_naming_the_version(patches: dict[str, Patch]) -> None:
    with pytest.raises(apply.PatchFailed) as failed:
        apply.start(["playbook"], version="2.22.0")
    assert failed.value.patch == "core"
    assert "ansible-core 2.22.0" in failed.value.error and "2.15 to 2.21" in failed.value.error


def test_patches_install_on_their_lines_in_their_phase(
    patches: dict[str, Patch], tmp_path: Path
) -> None:
    applied = apply.start(["playbook"], version="2.18.19")
    with pytest.raises(apply.PatchFailed, match="outside its phase playbook-warmed"):
        apply.install("ok")
    patches.pop("broken")
    patches.pop("unchecked")
    monkeypatched = tuple(patches.values())
    registry.PATCHES = monkeypatched  # the fixture restores it
    assert apply.install_phase("playbook-warmed") == ["ok"] and CALLS == ["install"]
    assert apply.install_phase("module-imported") == []  # no module kind served
    assert apply.install_phase("sealed") == []  # it says it does not apply here
    apply.check_all()
    assert CALLS == ["install", "check"]
    assert (applied.installed, applied.skipped, applied.unused) == (["ok"], ["old"], ["unused"])
    status = tmp_path / "status.json"
    apply.report(str(status), None)
    assert json.loads(status.read_text()) == {
        "ansible": "2.18.19",
        "line": "2.18",
        "installed": ["ok"],
        "skipped": ["old"],  # not verified on 2.18 yet; "gone" has nothing to do there
        "unused": ["unused"],
        "phases": {"playbook-warmed": ["ok"]},
        "failed": None,
    }


def test_a_failing_install_or_check_names_the_patch(
    patches: dict[str, Patch], tmp_path: Path
) -> None:
    applied = apply.start(["playbook"], version="2.18.19")
    applied.phase = "playbook-warmed"
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


@pytest.mark.parametrize(
    "target",
    [
        f"{__name__}:Owner.gone",
        f"{__name__}:Owner.inherited",  # defined on its base class, not on Owner
        "no_such_module:x",
        f"{__name__}: Owner.method, described",  # no description escapes the look-up
        Target(f"{__name__}:Owner.gone", "2.18"),
    ],
)
def test_a_target_that_is_not_there_fails_the_install(
    patches: dict[str, Patch], target: str | Target
) -> None:
    applied = apply.start(["playbook"], version="2.18.19")
    applied.phase = "playbook-warmed"
    patches["ok"] = fake("ok", "install_ok", targets=(f"{__name__}:Owner.method", target))
    with pytest.raises(apply.PatchFailed) as failed:
        apply.install("ok")
    assert failed.value.patch == "ok" and "install:" in failed.value.error, target
    assert CALLS == []  # never installed


def test_a_target_of_other_lines_is_not_looked_up(patches: dict[str, Patch]) -> None:
    applied = apply.start(["playbook"], version="2.18.19")
    applied.phase = "playbook-warmed"
    elsewhere = Target(f"{__name__}:Owner.gone", "2.19")
    patches["ok"] = fake("ok", "install_ok", targets=(f"{__name__}:Owner.method", elsewhere))
    assert apply.install("ok") and CALLS == ["install"]
