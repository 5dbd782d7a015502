"""The manager as one exit stack (runner/app/manager/run.py): whatever way `Manager.serve` ends
(the watch over, a standby stopped, a `SystemExit` in any build step, the certificate refused),
every part that started is stopped once, in the reverse order of their starts.

The real `Manager.serve` and its steps' own code (the flags parsed, the shard Lease written on
the fake API, the proxy's port refused, a per-kind variable refused), with the real Shutdown,
Leadership, Shards and Membership; the parts that would bind ports, start Ansible or kopf are
plain fakes that write their start and stop in a journal."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from fake_api import HOST, FakeApi

from runner.app.leases import sharding
from runner.app.manager import run
from runner.app.manager.config import OperatorConfig, ProductionConfig
from runner.app.manager.leadership import Leadership
from runner.app.manager.shutdown import Shutdown
from runner.kube.credentials import Credentials
from runner.kube.probe import Prober
from runner.watches.model import GVK, Watch

Journal = list[tuple[str, str]]


class Part:
    """A fake part: its start and each stop written in the journal."""

    def __init__(self, journal: Journal, name: str) -> None:
        self.journal, self.name = journal, name
        journal.append(("start", name))

    def stopped(self) -> None:
        self.journal.append(("stop", self.name))


def tracked(journal: Journal, name: str, obj: Any, method: str) -> Any:
    """A real object whose `method` (its stop) is written in the journal."""
    journal.append(("start", name))
    original = getattr(obj, method)

    async def stop(*args: Any, **kwargs: Any) -> Any:
        journal.append(("stop", name))
        return await original(*args, **kwargs)

    setattr(obj, method, stop)
    return obj


class Executor(Part):
    def add_env(self, env: dict[str, str]) -> None:
        pass

    def cancel_all(self) -> None:
        pass

    def close(self) -> None:
        self.stopped()


class Serving(Part):
    role_metrics_url = None
    metrics = None

    def __init__(self, journal: Journal, health: Any) -> None:
        super().__init__(journal, "serving")
        self.health = health

    def track(self, controller: Any) -> None:
        pass

    def set_leader(self, lease: str, leading: bool) -> None:
        pass

    async def close(self) -> None:
        self.stopped()


class AsyncPart(Part):
    async def stop(self) -> None:
        self.stopped()

    async def close(self) -> None:
        self.stopped()


class Proxy(AsyncPart):
    refuse = False

    async def start(self, port: int) -> None:
        if self.refuse:
            raise OSError(98, "Address already in use")


class Controller(Part):
    busy = 0

    def __init__(self, journal: Journal, watch: Watch) -> None:
        self.journal, self.watch = journal, watch  # started by `start`
        self.name = f"controller {watch.gvk.kind}"

    def start(self) -> None:
        self.journal.append(("start", self.name))

    def stop_taking(self) -> None:
        pass

    async def stop(self, timeout: float) -> bool:
        self.stopped()
        return True


class Fixture:
    """The Manager with its fakes; `fail` names the step that fails (None: none)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail: str | None) -> None:
        self.journal: Journal = []
        self.api = FakeApi()
        self.standby = False
        journal, api = self.journal, self.api
        bad = "nonsense" if fail == "addresses" else ":8443"
        self.config = OperatorConfig(
            watches_file=tmp_path / "watches.yaml",
            artifacts_dir=tmp_path / "artifacts",
            production=ProductionConfig(
                metrics_bind_address=bad, sharding=True, leader_election_namespace="ns"
            ),
        )
        self.watches = [
            Watch(GVK("example.com", "v1", kind), role=str(tmp_path / "roles" / kind))
            for kind in ("Echo", "Thing")
        ]
        if fail == "controllers":  # the second watch's variable is refused
            monkeypatch.setenv("WORKER_THING_EXAMPLE_COM", "many")
        if fail == "sharding":
            api.fail(method="POST", status=403)
        mp = monkeypatch
        mp.setattr(run.clientconfig, "load", lambda kubeconfig: Credentials(server=HOST))
        mp.setattr(
            run, "KubeClient", lambda creds: tracked(journal, "client", api.client(), "close")
        )
        refused = "certificate refused" if fail == "certificate" else None
        mp.setattr(run, "certificate_refused", _returning(refused))
        mp.setattr(run, "Prober", lambda client: tracked(journal, "prober", Prober(client), "stop"))
        mp.setattr(run, "make_executor", lambda config, **_: Executor(journal, "executor"))

        async def serving(addresses: Any, security: Any, client: Any, health: Any) -> Serving:
            return Serving(journal, health)

        mp.setattr(run.Serving, "start", serving)

        async def webhooks(*args: Any) -> AsyncPart:
            if fail == "webhooks":
                raise SystemExit("operator-runner: --webhook-service: bad")
            return AsyncPart(journal, "webhooks")

        mp.setattr(run, "start_webhooks", webhooks)
        fixture = self

        class QuietShutdown(Shutdown):
            def __init__(self, *args: Any) -> None:
                super().__init__(*args)
                self.deadline = lambda after, fn: None  # no os._exit in a test

        class JournaledLeadership(Leadership):
            async def lead(self) -> bool:
                journal.append(("start", "leadership"))
                return not fixture.standby and await super().lead()

            async def close(self) -> None:
                journal.append(("stop", "leadership"))
                await super().close()

        class JournaledMembership(sharding.Membership):
            async def join(self) -> None:
                journal.append(("start", "sharding"))
                await super().join()

            async def leave(self) -> None:
                journal.append(("stop", "sharding"))
                await super().leave()

        mp.setattr(run, "Shutdown", QuietShutdown)
        mp.setattr(run, "Leadership", JournaledLeadership)
        mp.setattr(run, "Membership", JournaledMembership)
        mp.setattr(run.kube, "AsyncUpstream", lambda creds: AsyncPart(journal, "upstream"))
        mp.setattr(run, "DependentWatches", lambda *args: AsyncPart(journal, "dependents"))
        Proxy.refuse = fail == "proxy"
        mp.setattr(run, "Proxy", lambda *args, **kwargs: Proxy(journal, "proxy"))
        mp.setattr(run, "EventRecorder", lambda client: None)
        mp.setattr(run, "Reconciler", lambda watch, *args: watch)
        mp.setattr(run, "Controller", lambda watch, *_, **__: Controller(journal, watch))
        mp.setattr(run, "skip_refused_namespace_scan", _returning(None))
        mp.setattr(run, "serve_crds_despite_discovery_lag", lambda: None)
        mp.setattr(run.watching, "registry", lambda *args: None)

        async def watch(*args: Any, take_signals: Callable[[], None], **kwargs: Any) -> None:
            journal.append(("watch", "kopf"))
            if fail == "watch":
                raise SystemExit("operator-runner: kopf stopped")

        mp.setattr(run.watching, "run", watch)

    def serve(self) -> int:
        return asyncio.run(run.Manager(self.config, self.watches).serve())

    def starts(self) -> list[str]:
        return [name for what, name in self.journal if what == "start"]

    def stops(self) -> list[str]:
        return [name for what, name in self.journal if what == "stop"]


def _returning(value: Any) -> Callable[..., Any]:
    async def answer(*args: Any, **kwargs: Any) -> Any:
        return value

    return answer


EVERYTHING = [
    "client",
    "prober",
    "executor",
    "serving",
    "webhooks",
    "leadership",
    "sharding",
    "upstream",
    "dependents",
    "proxy",
    "controller Echo",
    "controller Thing",
]


def reverse(started: list[str]) -> list[str]:
    """The stop order of `started`: reversed, but the controllers, drained together, stop side
    by side (in the order of the drain's gather, their start order)."""
    controllers = [name for name in started if name.startswith("controller ")]
    rest = [name for name in reversed(started) if name not in controllers]
    return controllers + rest


@pytest.fixture(autouse=True)
def _no_signal_handlers(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(Shutdown, "take_signals", lambda self: None)


def test_a_normal_stop_stops_everything_in_reverse(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manager = Fixture(monkeypatch, tmp_path, fail=None)
    assert manager.serve() == 0
    assert manager.starts() == EVERYTHING
    assert manager.stops() == reverse(EVERYTHING)
    assert ("watch", "kopf") in manager.journal
    assert manager.api.sent("DELETE", "/leases/" + _shard_lease(manager))  # a clean leave


def test_a_standby_stopped_stops_what_started_in_reverse(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    manager = Fixture(monkeypatch, tmp_path, fail=None)
    manager.standby = True
    assert manager.serve() == 0
    started = ["client", "prober", "executor", "serving", "webhooks", "leadership"]
    assert manager.starts() == started
    assert manager.stops() == reverse(started)


# (the failing step, the parts started before it fails, in order)
FAILURES = [
    ("certificate", ["client"]),
    ("addresses", ["client", "prober", "executor"]),
    ("webhooks", ["client", "prober", "executor", "serving"]),
    ("sharding", EVERYTHING[: EVERYTHING.index("sharding") + 1]),
    ("proxy", EVERYTHING[: EVERYTHING.index("proxy") + 1]),
    ("controllers", EVERYTHING[: EVERYTHING.index("controller Echo") + 1]),
    ("watch", EVERYTHING),
]


@pytest.mark.parametrize(("fail", "started"), FAILURES, ids=[f for f, _ in FAILURES])
def test_a_failing_step_stops_what_started_in_reverse(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, fail: str, started: list[str]
) -> None:
    manager = Fixture(monkeypatch, tmp_path, fail=fail)
    if fail == "certificate":
        assert manager.serve() == 1
    else:
        with pytest.raises(SystemExit) as exited:
            manager.serve()
        assert str(exited.value.code).startswith("operator-runner: ")
    assert manager.starts() == started
    assert manager.stops() == reverse(started)


def _shard_lease(manager: Fixture) -> str:
    (created,) = [r for r in manager.api.sent("POST") if r.path.endswith("/leases")]
    name: str = created.body["metadata"]["name"]
    return name
