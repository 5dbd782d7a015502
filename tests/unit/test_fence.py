"""The fence around other packages' internals (runner/util/fence.py) and kopf's
(runner/app/source/kopf_import.py): a patch is used only on a release it is verified on, when
its targets exist and its check passes; otherwise the package's own behaviour goes on, and one
warning at start-up names the version and what each missing patch costs."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import pytest
from kopf._core.reactor import observation

from runner.app.source import kopf_import
from runner.util.fence import Fence, Patch, Unfit, release_line, resolve

REPO = Path(__file__).resolve().parents[2]


def fine() -> None:
    pass


def patch(name: str = "p", *, check: Any = fine, install: Any = None, **kw: Any) -> Patch:
    defaults: dict[str, Any] = {"targets": ("json:dumps",), "versions": ("2.1",)}
    defaults.update(kw)
    return Patch(name, defaults["targets"], defaults["versions"], check, install, "no speed-up")


def test_release_line_and_targets() -> None:
    assert release_line("1.45.2") == "1.45"
    assert release_line("3.14.0rc1") == "3.14"
    assert resolve("json.decoder:JSONDecoder.decode") is __import__("json").JSONDecoder.decode
    with pytest.raises(AttributeError):
        resolve("json:nothing_here")


def test_a_verified_patch_that_fits_is_installed_with_what_its_user_gives() -> None:
    installed: list[object] = []
    fence = Fence("pkg", (patch(install=installed.append),), version="2.1.7", register=False)
    assert fence.use("p", "wrapper") is True
    assert installed == ["wrapper"]
    assert fence.warning() is None


@pytest.mark.parametrize(
    ("kw", "why"),
    [
        ({"versions": ("2.0",)}, "not verified on pkg 2.1.7 (only on 2.0.x)"),
        ({"targets": ("json:gone",)}, "json:gone is not there"),
        ({"check": "unfit"}, "dumps takes no sort_order"),
    ],
)
def test_an_unverified_or_unfit_patch_leaves_the_package_alone(
    kw: dict[str, Any], why: str
) -> None:
    installed: list[object] = []
    if kw.get("check") == "unfit":

        def unfit() -> None:
            raise Unfit("dumps takes no sort_order")

        kw["check"] = unfit
    fence = Fence("pkg", (patch(install=installed.append, **kw),), version="2.1.7", register=False)
    assert fence.use("p", "wrapper") is False
    assert installed == []
    warning = fence.warning()
    assert warning is not None and warning.startswith("pkg 2.1.7: going without")
    assert why in warning and "no speed-up" in warning


def test_kopfs_patches_are_verified_and_fit_the_pinned_kopf() -> None:
    fence = kopf_import.FENCE
    assert fence.version.startswith("1.45.")
    assert fence.warning() is None, fence.warning()
    assert [name for name in fence.patches if fence.refusal(name)] == []
    assert isinstance(kopf_import.kopf_tasks_to_ignore(), kopf_import.NotKopfsTasks)


def test_on_an_unverified_kopf_its_own_behaviour_goes_on(monkeypatch: pytest.MonkeyPatch) -> None:
    fence = Fence("kopf", tuple(kopf_import.FENCE.patches.values()), "1.46.0", register=False)
    monkeypatch.setattr(kopf_import, "FENCE", fence)
    original = observation.namespace_observer
    monkeypatch.setattr(observation, "namespace_observer", original)

    def wrapper(f: Any) -> Any:
        raise AssertionError("not to be installed")

    assert kopf_import.patch_namespace_observer(wrapper) is False
    assert kopf_import.patch_crd_processor(wrapper) is False
    assert observation.namespace_observer is original
    assert type(kopf_import.kopf_tasks_to_ignore()) is kopf_import.EveryTask
    warning = fence.warning()
    assert warning is not None and warning.startswith("kopf 1.46.0: going without")
    for name in fence.patches:
        assert f"{name} (not verified on kopf 1.46.0 (only on 1.45.x))" in warning


def test_every_task_is_left_alone_without_the_patch() -> None:
    async def go() -> bool:
        task = asyncio.current_task()
        return task in kopf_import.EveryTask() and task in kopf_import.NotKopfsTasks()

    assert asyncio.run(go())


def run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=REPO,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout.strip()


def test_the_start_up_check_of_the_operator_finds_nothing_amiss() -> None:
    out = run(
        """
        from runner.app.manager import run  # every fence the operator imports
        from runner.util import fence
        print([f.package for f in fence.FENCES if f.package == "kopf"], fence.verify_all())
        """
    )
    assert out == "['kopf'] []"


def test_an_unverified_kopf_is_imported_plainly_and_said_so() -> None:
    out = run(
        """
        import importlib.metadata, sys
        real = importlib.metadata.version
        importlib.metadata.version = lambda name: "1.46.0" if name == "kopf" else real(name)
        from runner.app.source import kopf_import
        from runner.util import fence
        print("kubernetes" in sys.modules, kopf_import.kopf.__name__)
        print(fence.verify_all()[0])
        """
    )
    first, warning = out.splitlines()
    assert first == "True kopf"
    assert warning.startswith("kopf 1.46.0: going without operator-runner's patches ")
    assert "import-without-kubernetes (not verified on kopf 1.46.0 (only on 1.45.x))" in warning
    assert "~60 MB more memory" in warning


def test_a_kopf_that_needs_kubernetes_is_imported_with_it(tmp_path: Path) -> None:
    """A kopf (of a verified release) whose import of kubernetes is not guarded: the hidden
    import fails, kopf is imported again plainly, and the warning says why."""
    fake = tmp_path / "kopf"
    for package in ("_core/reactor", "_cogs/helpers"):
        (fake / package).mkdir(parents=True)
        (fake / package / "__init__.py").write_text("")
        (fake / package / ".." / "__init__.py").write_text("")
    (fake / "__init__.py").write_text("import kubernetes.client\n")
    (fake / "_core" / "reactor" / "observation.py").write_text("")
    (fake / "_cogs" / "helpers" / "thirdparty.py").write_text("V1ObjectMetaSync = None\n")
    out = run(
        f"""
        import sys
        sys.path.insert(0, {str(tmp_path)!r})
        from runner.app.source import kopf_import
        from runner.util import fence
        print("kubernetes" in sys.modules, kopf_import.kopf.__file__.startswith({str(fake)!r}))
        print(kopf_import.FENCE.refusal("import-without-kubernetes"))
        """
    )
    first, why = out.splitlines()
    assert first == "True True"
    assert why == (
        "kopf cannot be imported without kubernetes: No module named 'kubernetes' "
        "(refused while importing kopf)"
    )
