"""The fences around other packages' internals (hack/private_names.py, run by `make lint` as an
import-linter contract): what it reports, for every third-party package, and that the runner
keeps it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("importlinter")
from hack.private_names import FENCES, fenced_in, violations, violations_in

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "source",
    [
        # ansible-core, as before
        "import ansible._internal._templating",
        "from ansible._internal import _templating",
        "from ansible.utils.collection_loader import _collection_finder",
        "import ansible.constants as C\nC.config._config_file",
        "from ansible.plugins import loader\nloader._configure_collection_loader = print",
        "from ansible.plugins.loader import vars_loader\nprint(vars_loader._paths)",
        "import ansible\ngetattr(ansible.plugins, '_private')",
        "import importlib\nimportlib.import_module('ansible._internal._templating')",
        # every other third-party package alike
        "from kopf._core.reactor import observation",
        "import kopf\nkopf._core.reactor.observation",
        "import importlib\nimportlib.import_module('kopf._core.reactor.observation')",
        "import ansible_runner\nansible_runner._private",
        "from aiohttp import web\nweb._private",
        # monkeypatches, public names included
        "import pexpect\npexpect.spawn = object",
        "import pexpect\nsetattr(pexpect, 'spawn', object)",
        "import pexpect\ndel pexpect.spawn",
        "from ptyprocess import PtyProcess\nPtyProcess.delayafterclose = 0",
        "import pexpect\npexpect.spawn._spawn",
        "from pexpect import pty_spawn\npty_spawn._wrap_ptyprocess_err",
        # an object's private name that no code of ours defines (aiohttp's site._server)
        "async def f(site):\n    return site._server",
        # a package handed on by a module of ours is still that package
        "from runner.app.source.kopf_import import kopf\nkopf._core",
    ],
)
def test_another_packages_internals_are_reported(source: str) -> None:
    assert violations_in(textwrap.dedent(source), "x.py"), source


@pytest.mark.parametrize(
    "source",
    [
        "from ansible.plugins.loader import filter_loader\nfilter_loader.get('x').__name__",
        "import os\nos._exit(0)",
        "import argparse\nargparse._SubParsersAction",
        "def f(parser):\n    return parser._actions",  # argparse's (the standard library)
        "class A:\n    def __init__(self):\n        self._x = 1\n    def f(self, o):\n"
        "        return self._x, o._x",
        "import ansible.constants as C\nprint(C.DEFAULT_LOCAL_TMP)",
        "import kopf\nkopf.on.event(kind='X')",
        "from aiohttp import web\napp = web.Application()\napp.router.add_route('*', '/', f)",
        "import pexpect\nclass Spawn(pexpect.spawn):\n    pass",
    ],
)
def test_public_names_and_our_own_are_fine(source: str) -> None:
    assert violations_in(source, "x.py") == []


def test_a_fence_may_touch_its_packages_internals_only() -> None:
    source = "from kopf._core.reactor import observation\nimport pexpect\npexpect.spawn = 1\n"
    assert violations_in(source, "f.py", fenced=("kopf",)) == [
        "f.py:3: patches pexpect.spawn (pexpect's)"
    ]
    assert violations_in("def f(site):\n    return site._server\n", "f.py", ("kopf",)) == []


def test_the_fences_are_where_the_table_says() -> None:
    assert fenced_in("runner/app/source/kopf_import.py") == ("kopf",)
    assert "ansible" in fenced_in("runner/ansible/warm/patches/core.py")
    assert fenced_in("runner/app/source/namespaces.py") == ()
    assert fenced_in("runner/dependents/proxy.py") == ()  # aiohttp: public API only
    for place in FENCES:
        assert (REPO / place).exists(), place


def test_the_runner_touches_them_only_inside_their_fences(tmp_path: Path) -> None:
    assert violations(REPO) == []
    fenced = tmp_path / "runner" / "ansible" / "warm"
    fenced.mkdir(parents=True)
    (fenced / "patch.py").write_text("import ansible.constants as C\nC.config._config_file\n")
    assert violations(tmp_path) == []
    (tmp_path / "runner" / "ansible" / "executor.py").write_text(
        "from ansible.plugins import loader\nloader._configure_collection_loader = None\n"
    )
    source = tmp_path / "runner" / "app" / "source"
    source.mkdir(parents=True)
    (source / "kopf_import.py").write_text("from kopf._core.reactor import observation\n")
    (source / "namespaces.py").write_text("from kopf._core.reactor import observation\n")
    assert violations(tmp_path) == [
        "runner/ansible/executor.py:2: touches ansible's private name "
        "._configure_collection_loader",
        "runner/app/source/namespaces.py:1: imports from the private module kopf._core.reactor",
    ]
