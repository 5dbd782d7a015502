"""The fence around ansible-core's private names (hack/private_names.py, run by `make lint` as
an import-linter contract): what it reports, and that the runner keeps it."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

pytest.importorskip("importlinter")
from hack.private_names import violations, violations_in

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize(
    "source",
    [
        "import ansible._internal._templating",
        "from ansible._internal import _templating",
        "from ansible.utils.collection_loader import _collection_finder",
        "import ansible.constants as C\nC.config._config_file",
        "from ansible.plugins import loader\nloader._configure_collection_loader = print",
        "from ansible.plugins.loader import vars_loader\nprint(vars_loader._paths)",
        "import ansible\ngetattr(ansible.plugins, '_private')",
        "import importlib\nimportlib.import_module('ansible._internal._templating')",
    ],
)
def test_a_private_ansible_name_is_reported(source: str) -> None:
    assert violations_in(textwrap.dedent(source), "x.py"), source


@pytest.mark.parametrize(
    "source",
    [
        "import ansible_runner\nansible_runner._private",
        "from ansible.plugins.loader import filter_loader\nfilter_loader.get('x').__name__",
        "import os\nos._exit(0)",
        "class A:\n    def f(self):\n        return self._x",
        "import ansible.constants as C\nprint(C.DEFAULT_LOCAL_TMP)",
    ],
)
def test_public_names_and_other_packages_are_fine(source: str) -> None:
    assert violations_in(source, "x.py") == []


def test_the_runner_touches_them_only_inside_the_warm_executor(tmp_path: Path) -> None:
    assert violations(REPO) == []
    fenced = tmp_path / "runner" / "ansible" / "warm"
    fenced.mkdir(parents=True)
    (fenced / "patch.py").write_text("import ansible.constants as C\nC.config._config_file\n")
    assert violations(tmp_path) == []
    (tmp_path / "runner" / "ansible" / "executor.py").write_text(
        "from ansible.plugins import loader\nloader._configure_collection_loader = None\n"
    )
    assert violations(tmp_path) == [
        "runner/ansible/executor.py:2: touches ansible's private name ._configure_collection_loader"
    ]
