"""The operator process never imports the `kubernetes` package (~60 MB) for the usual credentials.

kopf imports `kubernetes.client` when it is installed; runner/app/source/kopf_import.py imports
kopf while refusing it. These tests check, in fresh interpreters, that no runner module the
operator uses pulls the package in, and that every runner module gets kopf through
runner/app/source/kopf_import.py.
"""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

RUNNER = Path(__file__).resolve().parents[2] / "runner"


def modules() -> list[str]:
    return sorted(
        ".".join(p.relative_to(RUNNER.parent).with_suffix("").parts)
        for p in RUNNER.rglob("*.py")
        if p.stem != "__init__" and "collections" not in p.parts
    )


def imports_kopf(path: Path) -> bool:
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import) and any(
            a.name == "kopf" or a.name.startswith("kopf.") for a in node.names
        ):
            return True
        if (
            isinstance(node, ast.ImportFrom)
            and node.level == 0
            and node.module
            and (node.module == "kopf" or node.module.startswith("kopf."))
        ):
            return True
    return False


def run(code: str) -> str:
    proc = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=RUNNER.parent,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


def test_only_kopf_import_imports_kopf() -> None:
    direct = [p.name for p in sorted(RUNNER.rglob("*.py")) if imports_kopf(p)]
    assert direct == ["kopf_import.py"]


def test_the_runner_package_stays_lean() -> None:
    out = run("import runner, sys; print(sorted(m for m in sys.modules if m.startswith('kopf')))")
    assert out.strip() == "[]"


@pytest.mark.parametrize(
    "module",
    ["runner.app.manager.run", "runner.app.source.watching", "runner.app.source.kopf_import"],
)
def test_kopf_users_imported_first_do_not_import_kubernetes(module: str) -> None:
    out = run(f"import {module}, sys; print('kubernetes' in sys.modules, 'kopf' in sys.modules)")
    assert out.split() == ["False", "True"]


def test_the_operator_process_does_not_import_kubernetes(tmp_path: Path) -> None:
    """Everything the manager builds before kopf runs, with a token kubeconfig."""
    (tmp_path / "config").write_text(
        textwrap.dedent(
            """
            apiVersion: v1
            kind: Config
            clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
            users: [{name: u, user: {token: abc}}]
            contexts: [{name: ctx, context: {cluster: c, user: u, namespace: ns}}]
            current-context: ctx
            """
        )
    )
    out = run(
        f"""
        import asyncio, importlib, sys
        from pathlib import Path
        for name in {modules()!r}:
            importlib.import_module(name)
        from runner.kube import clientconfig
        from runner.kube import client as kube
        from runner.app.manager import run  # all that the manager builds
        from runner.app.source import login, watching
        from runner.app.source.kopf_import import kopf

        async def main():
            creds = clientconfig.load({str(tmp_path / "config")!r})
            client = kube.KubeClient(creds)
            upstream = kube.AsyncUpstream(creds)
            registry = watching.registry([], creds, [])
            info = login.connection_info(creds)
            assert info.token == "abc" and info.default_namespace == "ns", info
            watching.settings(30.0)
            _ = upstream.session
            await upstream.close()
            await client.close()

        asyncio.run(main())
        rss = int(open("/proc/self/statm").read().split()[1]) * 4 / 1024
        print("kubernetes" in sys.modules, f"{{rss:.1f}}")
        """
    )
    imported, rss = out.split()
    print(f"operator process RSS: {rss} MB (kubernetes imported: {imported})")
    assert imported == "False"


def test_the_finder_is_gone_and_kubernetes_imports_later() -> None:
    out = run(
        """
        import sys
        from runner.app.source import kopf_import
        assert kopf_import._finder not in sys.meta_path
        import kubernetes.client
        print(kubernetes.client.V1ObjectMeta.__name__)
        """
    )
    assert out.strip() == "V1ObjectMeta"
