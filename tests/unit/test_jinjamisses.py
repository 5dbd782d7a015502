"""Jinja's built-in filters and tests looked up once per server (runner/ansible/jinjamisses.py).

Each probe runs in a fresh Python: the module patches ansible-core's plugin loader class."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

PROBE_HEAD = """
import pkgutil
from ansible.plugins.loader import filter_loader, init_plugin_loader, test_loader
from runner.ansible.warm.patches import jinjamisses

init_plugin_loader([])
scans = []
plain_iter_modules = pkgutil.iter_modules
def counting(*args, **kwargs):
    scans.append(args)
    return plain_iter_modules(*args, **kwargs)
pkgutil.iter_modules = counting
"""


def _probe(body: str, tmp_path: Path) -> None:
    code = PROBE_HEAD + textwrap.dedent(body)
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, check=False
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "ok", out.stdout


def test_a_jinja_builtin_is_looked_up_once_and_ansibles_plugins_as_before(tmp_path: Path) -> None:
    _probe(
        """
        assert filter_loader.get("first") is None and scans, "Ansible searched its package"
        jinjamisses.install()
        jinjamisses.warm()
        scans.clear()
        for name in ("first", "ansible.legacy.first", "list", "length", "int"):
            assert filter_loader.get(name) is None, name
        for name in ("equalto", "string", "in"):
            assert test_loader.get(name) is None, name
        assert not scans, scans
        for name in ("to_json", "ansible.builtin.to_json", "ansible.legacy.bool", "combine"):
            assert filter_loader.get(name) is not None, name
        assert test_loader.get("match") is not None
        print("ok")
        """,
        tmp_path,
    )


def test_a_plugin_path_added_later_shadows_a_remembered_miss(tmp_path: Path) -> None:
    """A role's filter_plugins/ is added with add_directory, which empties Ansible's cache of
    non-collection plugins: the misses remembered with it go too."""
    plugins = tmp_path / "filter_plugins"
    plugins.mkdir()
    (plugins / "mine.py").write_text(
        "class FilterModule:\n    def filters(self):\n        return {'first': lambda v: 'mine'}\n"
    )
    _probe(
        f"""
        jinjamisses.install()
        jinjamisses.warm()
        assert filter_loader.get("first") is None
        filter_loader.add_directory({str(plugins)!r})
        mine = filter_loader.get("first")
        assert mine is not None and mine.j2_function([1, 2]) == "mine", mine
        print("ok")
        """,
        tmp_path,
    )


def test_errors_and_unknown_names_take_ansibles_path_every_time(tmp_path: Path) -> None:
    _probe(
        """
        jinjamisses.install()
        assert filter_loader.get("no_such_filter_anywhere") is None
        scans.clear()
        assert filter_loader.get("no_such_filter_anywhere") is None
        assert not scans  # remembered
        for name in ("no_such.collection.thing", "ansible.builtin.no_such_filter"):
            try:
                found = filter_loader.get(name)
            except KeyError:
                found = None
            assert found is None, name
        scans.clear()
        try:
            filter_loader.get("ansible.builtin.no_such_filter")
        except KeyError:
            pass
        assert scans, "names with a collection are never remembered"
        print("ok")
        """,
        tmp_path,
    )
