"""One credential path for both clients: an exec plugin that takes its time never blocks the
event loop, whether `KubeClient` (the runner's requests) or `AsyncUpstream` (the roles' proxy,
the dependent watches) needs the header; requests that need it meanwhile share one plugin run.

A real exec plugin (a Python script that sleeps), the kubernetes package's real loader and
refresh, a real HTTP server (fake_api.http)."""

from __future__ import annotations

import asyncio
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import fake_api
import pytest
import yaml

from runner.kube.client import AsyncUpstream, KubeClient, get_lease
from runner.kube.clientconfig import load

#: How long the plugin takes: long enough that a blocked loop cannot hide.
PLUGIN_SECONDS = 0.6


def slow_plugin(folder: Path) -> Path:
    """An exec plugin that sleeps, counts its runs in `runs`, and hands out a token that expires
    within the kubernetes package's 5-minute margin, so that every request refreshes it."""
    script = folder / "slow-plugin.py"
    script.write_text(
        textwrap.dedent(
            f"""
            import datetime, json, pathlib, time
            time.sleep({PLUGIN_SECONDS})
            runs = pathlib.Path({str(folder / "runs")!r})
            with runs.open("a") as f:
                f.write("run\\n")
            n = len(runs.read_text().split())
            expires = datetime.datetime.now(datetime.UTC) + datetime.timedelta(seconds=60)
            print(json.dumps({{
                "apiVersion": "client.authentication.k8s.io/v1beta1",
                "kind": "ExecCredential",
                "status": {{
                    "token": f"slow-{{n}}",
                    "expirationTimestamp": expires.strftime("%Y-%m-%dT%H:%M:%SZ"),
                }},
            }}))
            """
        )
    )
    return script


def runs(folder: Path) -> int:
    return len((folder / "runs").read_text().split())


@pytest.fixture
def server() -> Iterator[str]:
    with fake_api.serving() as url:
        yield url


def test_a_slow_exec_plugin_blocks_neither_client_nor_the_loop(tmp_path: Path, server: str) -> None:
    user = {
        "exec": {
            "apiVersion": "client.authentication.k8s.io/v1beta1",
            "command": sys.executable,
            "args": [str(slow_plugin(tmp_path))],
        }
    }
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "c", "cluster": {"server": server}}],
        "users": [{"name": "u", "user": user}],
        "contexts": [{"name": "ctx", "context": {"cluster": "c", "user": "u"}}],
        "current-context": "ctx",
    }
    (tmp_path / "config").write_text(yaml.safe_dump(config))
    credentials = load(str(tmp_path / "config"), environ={})
    assert credentials.plugin == "exec"
    before = runs(tmp_path)

    async def go() -> tuple[float, float, list[object]]:
        loop = asyncio.get_running_loop()
        client, upstream = KubeClient(credentials), AsyncUpstream(credentials)
        gaps: list[float] = []
        done = asyncio.Event()

        async def tick() -> None:
            last = loop.time()
            while not done.is_set():
                await asyncio.sleep(0.01)
                gaps.append(loop.time() - last)
                last = loop.time()

        ticker = asyncio.create_task(tick())
        started = time.monotonic()
        try:
            results = await asyncio.gather(
                client.send(get_lease("ns", "name")),
                upstream.auth_headers(),
                upstream.auth_headers(),
            )
        finally:
            elapsed = time.monotonic() - started
            done.set()
            await ticker
            await client.close()
            await upstream.close()
        return elapsed, max(gaps), results

    elapsed, longest_gap, results = asyncio.run(go())
    assert elapsed >= PLUGIN_SECONDS  # the plugin ran for these requests
    assert longest_gap < PLUGIN_SECONDS / 3, f"the loop stalled {longest_gap:.3f} s"
    assert runs(tmp_path) == before + 1  # three requests, one plugin run
    token = f"Bearer slow-{before + 1}"
    assert results == [{"kind": "Lease"}, {"Authorization": token}, {"Authorization": token}]
    assert fake_api.LeaseHandler.seen[-1]["Authorization"] == token
