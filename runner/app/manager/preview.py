"""`operator-runner preview`: every CR's reconcile in check mode, from the candidate, against the
live cluster, with nothing written.

The candidate is what runs this command: its ansible-core line (the virtualenv or image it is
run from), its roles (the watches file given), its kubernetes.core. For each CR the operator
would reconcile (previewtargets.py) the operator's own `Reconciler` runs the role in Ansible's
check mode with `--diff`, at most `concurrency` at a time, and the run's events become a
verdict (runner/preview). Nothing in the cluster changes, at three levels:

- the reconciler in check mode writes nothing itself (no finalizer, no status, no Event), and
  its client here can only read (`ReadOnly`: any other request is a bug, and fails the CR);
- the roles reach the API through the preview's proxy (runner/dependents/previewproxy.py),
  which forwards reads only and answers the roles' dry-run writes itself;
- the runs get no credentials of their own: the kubeconfig of each run names the proxy, and the
  variables through which kubernetes.core or a client would find others (K8S_AUTH_*, the
  in-cluster KUBERNETES_SERVICE_*) are taken out of the environment the runs inherit.
"""

from __future__ import annotations

import asyncio
import importlib.metadata
import logging
import os
import shutil
import sys
import time
from collections.abc import Mapping, MutableMapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from runner.ansible.artifacts import Artifacts, run_events
from runner.ansible.interface import LogEvents, RunRequest, RunResult
from runner.app.manager.config import OperatorConfig, read_watches
from runner.app.manager.oneshot import UsageError
from runner.app.manager.previewtargets import Target, targets
from runner.app.manager.run import make_executor
from runner.app.manager.watchsettings import watch_options
from runner.app.source.outage import install as quiet_outages
from runner.dependents.previewproxy import PreviewProxy
from runner.kube import client as kube
from runner.kube import clientconfig
from runner.kube import credentials as creds
from runner.kube.client import AiohttpTransport, ApiError, KubeClient, Transport
from runner.preview import report
from runner.preview.outcome import CHANGED, FAILED, CrPreview, Failure, judge
from runner.reconcile import conditionlist, fieldmanager
from runner.reconcile.reconciler import Reconciler
from runner.reconcile.recorder import EventRecorder
from runner.watches import Watch

log = logging.getLogger("runner.preview")

OK, USAGE, FAILURES, CHANGES = 0, 1, 2, 3
#: What would give a role credentials of its own (module doc).
SCRUBBED = ("K8S_AUTH_", "KUBERNETES_SERVICE_", "KUBERNETES_PORT")


@dataclass(frozen=True)
class PreviewSettings:
    """The preview's own flags (runner/app/cli/preview.py)."""

    namespaces: tuple[str, ...] = ()
    kinds: tuple[str, ...] = ()
    selector: str = ""
    concurrency: int = 2
    from_line: str | None = None
    output: str = "table"
    fail_on_change: bool = False
    keep_artifacts: bool = False


class WriteRefused(RuntimeError):
    """The preview's own client was asked to write: a bug, never sent."""


class ReadOnly:
    """A transport that sends reads only (kube.Transport)."""

    def __init__(self, transport: Transport) -> None:
        self._transport = transport

    async def __call__(
        self, method: str, url: str, body: str | None, headers: Mapping[str, str], timeout: float
    ) -> tuple[int, str, str]:
        if method not in ("GET", "HEAD"):
            raise WriteRefused(f"the preview does not write: {method} {url} was not sent")
        return await self._transport(method, url, body, headers, timeout)


class Recorded:
    """The executor (reconcile's `Runs`), keeping each CR's last run: the report reads its
    events."""

    def __init__(self, executor: Any) -> None:
        self.executor = executor
        self.runs: dict[Path, tuple[RunRequest, RunResult]] = {}

    async def run(self, request: RunRequest) -> RunResult:
        result: RunResult = await self.executor.run(request)
        self.runs[request.private_dir] = (request, result)
        return result


def scrub(environ: MutableMapping[str, str]) -> list[str]:
    """Take out of `environ` what would give a run credentials of its own; their names."""
    names = sorted(k for k in environ if k.startswith(SCRUBBED))
    for name in names:
        del environ[name]
    return names


def state_of(obj: Mapping[str, Any]) -> str:
    """The CR's last verdict: Successful, Failure, or "" (never reconciled)."""
    status = obj.get("status") if isinstance(obj.get("status"), dict) else None
    for kind in ("Failure", "Successful"):
        cond = conditionlist.find_condition(status, kind)
        if cond and cond.get("status") == "True":
            return kind
    return ""


class Progress:
    """One line on stderr: how many are done, and which run now."""

    def __init__(self, total: int, stream: Any = None) -> None:
        self.total = total
        self.stream = stream if stream is not None else sys.stderr
        self.tty = bool(getattr(self.stream, "isatty", lambda: False)())
        self.done: list[CrPreview] = []
        self.running: dict[str, None] = {}

    def start(self, target: Target) -> None:
        self.running[str(target.ref)] = None
        if self.tty:
            self._show()

    def finish(self, target: Target, cr: CrPreview) -> None:
        self.running.pop(str(target.ref), None)
        self.done.append(cr)
        self._show(f"{target.ref}: {cr.outcome} in {cr.seconds:.1f} s")

    def _show(self, last: str = "") -> None:
        changed = sum(1 for c in self.done if c.outcome == CHANGED)
        failed = sum(1 for c in self.done if c.outcome == FAILED)
        text = (
            f"preview: {len(self.done)}/{self.total} done ({changed} would change, {failed} fail)"
        )
        if self.tty:
            now = ", ".join(self.running) or last
            self.stream.write(f"\r\x1b[K{text}{'; ' + now if now else ''}"[:200])
            if len(self.done) == self.total:
                self.stream.write("\n")
        elif last:
            self.stream.write(f"{text}; {last}\n")
        self.stream.flush()


class Preview:
    """One preview (module doc): built by `run`, its pieces closed at the end."""

    def __init__(self, config: OperatorConfig, watches: list[Watch], settings: PreviewSettings):
        self.config = config
        self.watches = watches
        self.settings = settings
        self.project = config.watches_file.resolve().parent
        self.to_line = fieldmanager.installed_line() or "?"

    async def run(self) -> list[CrPreview]:
        try:
            credentials = clientconfig.load(self.config.kubeconfig)
        except creds.CredentialsError as err:
            raise UsageError(str(err)) from None
        removed = scrub(os.environ)
        if removed:
            log.info("the runs get none of these variables: %s", ", ".join(removed))
        transport = AiohttpTransport(credentials)
        client = KubeClient(credentials, transport=ReadOnly(transport))
        upstream = kube.AsyncUpstream(credentials)
        proxy = PreviewProxy(upstream, inject=self.config.inject_owner_ref)
        executor = make_executor(self.config, max_parallel_runs=self.settings.concurrency)
        try:
            found = await targets(
                client,
                self.watches,
                watched_namespaces=self.config.namespaces,
                namespaces=self.settings.namespaces,
                kinds=self.settings.kinds,
                selector=self.settings.selector,
            )
            await proxy.start()
            return await self._all(found, client, proxy, Recorded(executor))
        finally:
            await proxy.stop()
            await upstream.close()
            executor.close()
            await transport.close()

    async def _all(
        self, found: Sequence[Target], client: KubeClient, proxy: PreviewProxy, runs: Recorded
    ) -> list[CrPreview]:
        artifacts = Artifacts(self.config.artifacts_dir)
        recorder = EventRecorder(client)  # never called in check mode; it could only read
        reconcilers: dict[int, Reconciler] = {}
        for target in found:
            if id(target.watch) not in reconcilers:
                options = replace(
                    watch_options(self.config, target.watch, os.environ),
                    ansible_args=(*self.config.ansible_args, "--diff"),
                    check=True,
                    log_events=LogEvents.NOTHING,
                    debug_logs=False,
                    field_manager=None,
                )
                reconcilers[id(target.watch)] = Reconciler(
                    target.watch, options, client, runs, artifacts, recorder, proxy
                )
        slots = asyncio.Semaphore(self.settings.concurrency)
        progress = Progress(len(found))

        async def one(target: Target) -> CrPreview | None:
            async with slots:
                progress.start(target)
                cr = await self._one(target, reconcilers[id(target.watch)], proxy, runs, artifacts)
                progress.finish(target, cr)
            return None if cr.outcome == "gone" else cr

        done = await asyncio.gather(*(one(t) for t in found))
        return [cr for cr in done if cr is not None]

    async def _one(
        self,
        target: Target,
        reconciler: Reconciler,
        proxy: PreviewProxy,
        runs: Recorded,
        artifacts: Artifacts,
    ) -> CrPreview:
        ref, resource = target.ref, target.ref.resource
        cr = CrPreview(
            kind=resource.kind,
            group=resource.group,
            version=resource.version,
            namespace=ref.namespace or "",
            name=ref.name,
            running_line=fieldmanager.writer_line(target.obj),
            was=state_of(target.obj),
        )
        started = time.monotonic()
        try:
            outcome = await reconciler.reconcile(ref)
        except Exception as err:  # one CR's trouble (a bug included) is its own verdict
            if not isinstance(err, (ApiError, OSError, WriteRefused)):
                log.warning("preview of %s: %s", ref, err, exc_info=True)
            cr.seconds = time.monotonic() - started
            cr.outcome, cr.failures = FAILED, [Failure("", "", f"the preview's reconcile: {err}")]
            return cr
        cr.seconds = time.monotonic() - started
        cr.writes = [str(w) for w in proxy.writes_of(resource.kind, cr.namespace, ref.name)]
        if outcome.forget:
            cr.outcome = "gone"
            return cr
        recorded = runs.runs.pop(artifacts.private_dir(ref), None)
        if recorded is None:  # no run: being deleted with nothing to finalize, a bad annotation
            if outcome.failed:
                cr.outcome, cr.failures = FAILED, [Failure("", "", outcome.detail)]
            return cr
        request, result = recorded
        jump = (self.settings.from_line or cr.running_line, self.to_line)
        events = await asyncio.to_thread(run_events, request.private_dir, request.ident)
        return judge(
            cr,
            events,
            ok=result.ok,
            tail=result.stdout_tail,
            project=self.project,
            secrets=request.secrets,
            jump=jump,
        )


def render(results: Sequence[CrPreview], context: report.Context, output: str) -> None:
    if output == "json":
        sys.stdout.write(report.as_json(results))
        sys.stderr.write(report.summary(results, context))
        return
    if not results:
        sys.stdout.write("no CRs to preview\n")
    else:
        sys.stdout.write(report.table(results))
        text = report.details(results)
        if text:
            sys.stdout.write("\n" + text)
    sys.stdout.write("\n" + report.summary(results, context))


def exit_code(results: Sequence[CrPreview], fail_on_change: bool) -> int:
    if any(r.outcome == FAILED for r in results):
        return FAILURES
    if fail_on_change and any(r.outcome == CHANGED for r in results):
        return CHANGES
    return OK


def run_preview_command(config: OperatorConfig, settings: PreviewSettings) -> int:
    if config.kubeconfig:
        os.environ["KUBECONFIG"] = config.kubeconfig
    watches = read_watches(config.watches_file)
    if watches is None:
        return USAGE
    quiet_outages()
    started = time.monotonic()
    try:
        results = asyncio.run(Preview(config, watches, settings).run())
    except UsageError as err:
        print(f"operator-runner preview: {err}", file=sys.stderr)
        return USAGE
    except (ApiError, OSError) as err:
        print(f"operator-runner preview: the API server answered {err}", file=sys.stderr)
        return USAGE
    except KeyboardInterrupt:
        return FAILURES
    finally:
        if not settings.keep_artifacts:
            shutil.rmtree(config.artifacts_dir, ignore_errors=True)
    context = report.Context(
        candidate=_candidate(),
        from_line=settings.from_line,
        seconds=time.monotonic() - started,
        concurrency=settings.concurrency,
    )
    render(results, context, settings.output)
    return exit_code(results, settings.fail_on_change)


def _candidate() -> str:
    try:
        return importlib.metadata.version("ansible-core")
    except importlib.metadata.PackageNotFoundError:
        return "(not installed)"
