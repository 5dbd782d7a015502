"""The operator under test and its namespace: the one `Env` every integration test uses.

An `Env` is one namespace, the operator processes a test starts for it (`start` stops them
again with SIGTERM and expects exit 0; `launch` leaves that to the test), and helpers to write
and read custom resources and what the roles made there.
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from typing import Any, NamedTuple, TypeVar

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from ..conftest import REPO, Cluster
from .operator import PROJECT, RunningOperator, condition, launch, operator
from .waiting import wait_for

SAMPLES = REPO / "config" / "samples"
T = TypeVar("T")


class CrKind(NamedTuple):
    """A custom resource kind: where its objects are (group, version, plural) and its kind."""

    group: str
    version: str
    plural: str
    kind: str


def or_none(read: Callable[..., T], *args: Any) -> T | None:
    """`read(*args)`, or None when the object does not exist (404)."""
    try:
        return read(*args)
    except ApiException as err:
        if err.status == 404:
            return None
        raise


class Env:
    """One namespace, the operator(s) watching it, and helpers to read what the roles made.

    Kinds are given as a `CrKind`, or by name alone for kinds of `group`/`version`.
    """

    def __init__(
        self,
        cluster: Cluster,
        api: client.ApiClient,
        namespace: str,
        tmp: Path,
        *,
        group: str = "",
        version: str = "v1",
        watches: Path = PROJECT / "watches.yaml",
    ) -> None:
        self.cluster = cluster
        self.api = api
        self.ns = namespace
        self.tmp = tmp
        self.group = group
        self.version = version
        self.watches = watches
        self.custom = client.CustomObjectsApi(api)
        self.core = client.CoreV1Api(api)
        self.apps = client.AppsV1Api(api)
        self.coordination = client.CoordinationV1Api(api)
        self._stack = ExitStack()
        self._starts = 0
        self._start_args: dict[str, Any] = {}
        self._op: RunningOperator | None = None

    # -- the operator -----------------------------------------------------------------------

    @property
    def op(self) -> RunningOperator:
        assert self._op is not None, "no operator started"
        return self._op

    def start(
        self,
        *,
        namespaces: list[str] | None = None,
        args: tuple[str, ...] = (),
        env: dict[str, str] | None = None,
        exe: Path | None = None,
    ) -> RunningOperator:
        """Start `operator-runner run` for this namespace (or `namespaces`), with `args` and
        the environment variables `env` on top of the test's; `stop` ends it. `exe`: the
        operator-runner of another virtualenv (another ansible-core line)."""
        self._start_args = {"namespaces": namespaces, "args": args, "env": env, "exe": exe}
        return self._start()

    @property
    def executor(self) -> str:
        """The executor the operator was started with: "plain" with `--executor=plain`, else
        "warm" (the default)."""
        return "plain" if "--executor=plain" in self._start_args.get("args", ()) else "warm"

    def _start(self) -> RunningOperator:
        self._starts += 1
        tmp = self.tmp / f"operator-{self._starts}"
        tmp.mkdir()
        kwargs = dict(self._start_args)
        kwargs["namespaces"] = kwargs.get("namespaces") or [self.ns]
        self._op = self._stack.enter_context(
            operator(self.cluster, tmp, watches=self.watches, **kwargs)
        )
        return self._op

    def restart(self) -> None:
        """Stop the operator (it must exit 0) and start a fresh one: every CR is reconciled."""
        self.stop()
        self._start()

    def stop(self) -> None:
        """Stop what `start` started (SIGTERM; each must exit 0)."""
        self._stack.close()
        self._stack = ExitStack()

    def launch(
        self,
        label: str,
        *args: str,
        max_concurrent: int = 4,
        env: dict[str, str] | None = None,
    ) -> RunningOperator:
        """Start an operator process that the test stops, or SIGKILLs, itself."""
        tmp = self.tmp / label
        tmp.mkdir()
        return launch(
            self.cluster,
            tmp,
            watches=self.watches,
            namespaces=[self.ns],
            args=args,
            env=env,
            max_concurrent=max_concurrent,
        )

    # -- custom resources -------------------------------------------------------------------

    def kind(self, kind: str | CrKind) -> CrKind:
        if isinstance(kind, CrKind):
            return kind
        return CrKind(self.group, self.version, kind.lower() + "s", kind)

    def apply_sample(self, filename: str) -> None:
        self.cluster.kubectl("apply", "-n", self.ns, "-f", str(SAMPLES / filename))

    def create(
        self,
        kind: str | CrKind,
        name: str,
        spec: dict[str, Any] | None = None,
        *,
        labels: dict[str, str] | None = None,
        annotations: dict[str, str] | None = None,
    ) -> dict[str, Any]:
        k = self.kind(kind)
        metadata: dict[str, Any] = {"name": name}
        if labels:
            metadata["labels"] = labels
        if annotations:
            metadata["annotations"] = annotations
        body = {
            "apiVersion": f"{k.group}/{k.version}",
            "kind": k.kind,
            "metadata": metadata,
            "spec": spec or {},
        }
        obj: dict[str, Any] = self.custom.create_namespaced_custom_object(
            k.group, k.version, self.ns, k.plural, body
        )
        return obj

    def get(self, kind: str | CrKind, name: str) -> dict[str, Any] | None:
        k = self.kind(kind)
        obj: dict[str, Any] | None = or_none(
            self.custom.get_namespaced_custom_object, k.group, k.version, self.ns, k.plural, name
        )
        return obj

    def patch_spec(self, kind: str | CrKind, name: str, spec: dict[str, Any]) -> None:
        k = self.kind(kind)
        self.custom.patch_namespaced_custom_object(
            k.group, k.version, self.ns, k.plural, name, {"spec": spec}
        )

    def delete(self, kind: str | CrKind, name: str) -> None:
        k = self.kind(kind)
        self.custom.delete_namespaced_custom_object(k.group, k.version, self.ns, k.plural, name)

    def wait_condition(
        self,
        kind: str | CrKind,
        name: str,
        ctype: str = "Successful",
        status: str = "True",
        *,
        timeout: float = 120,
        generation: bool = True,
        after: str | None = None,
        idle: bool = False,
        op: RunningOperator | None = None,
    ) -> dict[str, Any]:
        """The CR once condition `ctype` has `status` (for its current generation unless
        `generation` is False; with `after`, once the condition's run completed later than that
        `ansibleResult.completion`; with `idle`, in a read where no run goes on (`Running`'s
        reason is not `Running`), between two runs of a CR that is retried or requeued). On
        timeout the operator's log (`op`'s) is printed."""

        def probe() -> dict[str, Any] | None:
            obj = self.get(kind, name)
            cond = condition(obj, ctype) if obj else None
            if not obj or not cond or cond.get("status") != status:
                return None
            if generation and cond.get("observedGeneration") != obj["metadata"]["generation"]:
                return None
            if after is not None and completion(cond) in (None, after):
                return None
            if idle and (condition(obj, "Running") or {}).get("reason") == "Running":
                return None
            return obj

        what = f"{self.kind(kind).kind} {name} {ctype}={status}"
        try:
            return wait_for(probe, timeout=timeout, what=what)
        except AssertionError:
            print((op or self.op).log_text()[-5000:])
            raise

    # -- what the roles made ----------------------------------------------------------------

    def config_map(self, name: str, namespace: str | None = None) -> client.V1ConfigMap | None:
        return or_none(self.core.read_namespaced_config_map, name, namespace or self.ns)

    def config_map_data(self, name: str) -> dict[str, str] | None:
        cm = self.config_map(name)
        return None if cm is None else (cm.data or {})

    def pod(self, name: str) -> client.V1Pod | None:
        return or_none(self.core.read_namespaced_pod, name, self.ns)

    def live_pods(self, selector: str) -> list[client.V1Pod]:
        """Pods of `selector` that are not being deleted."""
        pods = self.core.list_namespaced_pod(self.ns, label_selector=selector).items
        return [p for p in pods if p.metadata.deletion_timestamp is None]

    def deployment(self, name: str) -> client.V1Deployment | None:
        return or_none(self.apps.read_namespaced_deployment, name, self.ns)

    def service(self, name: str) -> client.V1Service | None:
        return or_none(self.core.read_namespaced_service, name, self.ns)

    def lease(self, name: str) -> Any:
        return or_none(self.coordination.read_namespaced_lease, name, self.ns)

    def events(self, name: str) -> list[client.CoreV1Event]:
        items = self.core.list_namespaced_event(
            self.ns, field_selector=f"involvedObject.name={name}"
        ).items
        return list(items)


def completion(cond: dict[str, Any] | None) -> str | None:
    """When the run behind a condition completed (`ansibleResult.completion`)."""
    return ((cond or {}).get("ansibleResult") or {}).get("completion")
