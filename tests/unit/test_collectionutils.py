"""Collection module_utils kept by the module server (runner/ansible/collectionutils.py).

Each probe is a fresh Python that does what the server and then a job do: preload, then put a
payload first on sys.path (a directory or a zip, laid out as AnsiballZ lays it out) and import
as kubernetes.core's k8s module does."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

from runner.ansible.warm.patches.codecache import collection_roots

PROBE = """
import importlib, json, os, sys
from runner.ansible.warm.patches import collectionutils
from runner.ansible.warm.patches.codecache import collection_roots

kept = collectionutils.preload(collection_roots(os.environ, sys.path))
assert not [n for n in sys.modules if n.startswith("ansible_collections")], "left in sys.modules"
os.environ.update(json.loads(sys.argv[2]))  # the job's environment
sys.path.insert(0, sys.argv[1])
collectionutils.activate()
core = importlib.import_module("ansible_collections.kubernetes.core.plugins.module_utils.k8s.core")
waiter = importlib.import_module(
    "ansible_collections.kubernetes.core.plugins.module_utils.k8s.waiter")
module = importlib.import_module("ansible_collections.kubernetes.core.plugins.modules.k8s_info")
package = sys.modules["ansible_collections.kubernetes.core.plugins.module_utils.k8s"]
print(json.dumps({
    "kept": kept,
    "core_kept": core is collectionutils._KEPT[core.__name__].module,
    "waiter_kept": waiter is collectionutils._KEPT[waiter.__name__].module,
    "module_file": module.__file__,
    "package_file": package.__file__,
    "core_file": core.__file__,
}))
"""


def _collection() -> Path:
    for root in collection_roots(os.environ, sys.path):
        found = root / "ansible_collections" / "kubernetes" / "core"
        if (found / "plugins" / "module_utils").is_dir():
            return found
    pytest.skip("kubernetes.core is not installed")


def _payload(tmp_path: Path, as_zip: bool, edit: str | None = None) -> str:
    """kubernetes.core's plugins under ansible_collections/, with an __init__.py per package."""
    root = tmp_path / "payload"
    plugins = root / "ansible_collections" / "kubernetes" / "core" / "plugins"
    for sub in ("module_utils", "modules"):
        shutil.copytree(_collection() / "plugins" / sub, plugins / sub)
    for package in [path for path in root.rglob("*") if path.is_dir()]:
        (package / "__init__.py").touch()  # as AnsiballZ does (zipimport has no namespaces)
    if edit:
        with (plugins / "module_utils" / edit).open("a") as file:
            file.write("\n# edited\n")
    if not as_zip:
        return str(root)
    archive = tmp_path / "ansible_k8s_info_payload.zip"
    with zipfile.ZipFile(archive, "w") as zf:
        for path in sorted(root.rglob("*.py")):
            zf.write(path, path.relative_to(root).as_posix())
    return str(archive)


def _probe(payload: str, env: dict[str, str] | None = None) -> dict[str, object]:
    out = subprocess.run(
        [sys.executable, "-c", PROBE, payload, json.dumps(env or {})],
        capture_output=True,
        text=True,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    result: dict[str, object] = json.loads(out.stdout)
    return result


@pytest.mark.parametrize("as_zip", [False, True], ids=["directory", "zip"])
def test_a_payload_with_the_same_files_gets_the_kept_modules(tmp_path: Path, as_zip: bool) -> None:
    payload = _payload(tmp_path, as_zip)
    seen = _probe(payload)
    assert isinstance(seen["kept"], int) and seen["kept"] > 10, seen
    assert seen["core_kept"] and seen["waiter_kept"], seen
    # the module and the packages still come from the payload
    for key in ("module_file", "package_file"):
        assert str(seen[key]).startswith(payload + os.sep), (key, seen)


@pytest.mark.parametrize("as_zip", [False, True], ids=["directory", "zip"])
def test_one_file_that_differs_sends_every_import_of_the_collection_to_the_payload(
    tmp_path: Path, as_zip: bool
) -> None:
    payload = _payload(tmp_path, as_zip, edit="k8s/waiter.py")
    seen = _probe(payload)
    assert not seen["core_kept"] and not seen["waiter_kept"], seen
    assert str(seen["core_file"]).startswith(payload + os.sep), seen


def test_an_environment_read_at_import_that_differs_sends_imports_to_the_payload(
    tmp_path: Path,
) -> None:
    """kubernetes.core's ansiblemodule reads ENABLE_TURBO_MODE when it is imported."""
    payload = _payload(tmp_path, as_zip=False)
    assert _probe(payload, {"UNRELATED_VARIABLE": "1"})["core_kept"]
    seen = _probe(payload, {"ENABLE_TURBO_MODE": "true"})
    assert not seen["core_kept"], seen
