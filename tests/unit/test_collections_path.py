"""The collections search path of runs: the bundled operator_sdk.util unless a newer one is
installed."""

from __future__ import annotations

import json
from pathlib import Path

from runner.ansible import collections_path
from runner.ansible.collections_path import BUNDLED_COLLECTIONS, runs_path, version_of


def _util(root: Path, version: str, *, manifest: bool = True) -> Path:
    folder = root / "ansible_collections" / "operator_sdk" / "util"
    folder.mkdir(parents=True)
    if manifest:
        info = {
            "collection_info": {"namespace": "operator_sdk", "name": "util", "version": version}
        }
        (folder / "MANIFEST.json").write_text(json.dumps(info), encoding="utf-8")
    else:
        (folder / "galaxy.yml").write_text(f"namespace: operator_sdk\nversion: {version}\n")
    return folder


def test_the_bundled_collection_has_a_version() -> None:
    assert version_of(collections_path.BUNDLED_UTIL) == (0, 5, 0)


def test_bundled_first_when_nothing_newer_is_installed(tmp_path: Path) -> None:
    _util(tmp_path / "old", "0.4.0")
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "old")}
    assert runs_path(environ, []).split(":") == [str(BUNDLED_COLLECTIONS), str(tmp_path / "old")]


def test_a_newer_installed_collection_wins(tmp_path: Path) -> None:
    _util(tmp_path / "new", "1.2.0")
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "new")}
    assert runs_path(environ, []).split(":") == [str(tmp_path / "new")]


def test_a_newer_one_on_the_python_path_wins_too(tmp_path: Path) -> None:
    _util(tmp_path / "site", "0.10.0", manifest=False)
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(tmp_path / "none")}
    assert runs_path(environ, [tmp_path / "site"]).split(":") == [str(tmp_path / "none")]


def test_the_bundled_folder_itself_is_not_taken_for_an_installed_one() -> None:
    environ = {"ANSIBLE_COLLECTIONS_PATH": str(BUNDLED_COLLECTIONS)}
    assert runs_path(environ, []).split(":")[0] == str(BUNDLED_COLLECTIONS)
