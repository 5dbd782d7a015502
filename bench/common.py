"""What the bench scenarios share: the operators (ours, the peer), the cluster, the CR
tracker and a session (one operator, one namespace, one scenario). Moved out of run.py."""

from __future__ import annotations

import concurrent.futures
import json
import os
import random
import signal
import string
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any, NamedTuple

import yaml
from kubernetes import client, config, watch
from kubernetes.client.rest import ApiException

from runner.ansible.collections_path import BUNDLED_COLLECTIONS

from .anatomy import summarize_artifacts
from .proctree import Sample, TreeSampler

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"
CACHE = Path(os.environ.get("OPERATOR_RUNNER_CACHE") or Path.home() / ".cache" / "operator-runner")
PEER_DIR = CACHE / "peer"
# The version the issue asks for first; v1.30.0 (operator-sdk's own module, the last release
# that carried cmd/ansible-operator) where this machine's Go proxy refuses the newer module.
PEER_VERSIONS = ("v1.42.3", "v1.30.0")


def peer_binary() -> tuple[str, Path] | None:
    for version in PEER_VERSIONS:
        path = PEER_DIR / version / "ansible-operator"
        if path.exists():
            return version, path
    return None


PEER_VENV = PEER_DIR / "venv"
GROUP, VERSION, PLURAL, KIND = "swallowlab.com", "v1alpha1", "echoflasks", "EchoFlask"
PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"

SCALES: dict[str, dict[str, Any]] = {
    # latency CRs, burst CRs, scale CRs, hard cap per scenario and operator (s), the least
    # and greatest reconcile period of the scale CRs (s), the CRs of the probe that estimates
    # it, and the resync runs measured (None: all N)
    "small": {
        "latency": 2,
        "burst": 6,
        "scale": 10,
        "cap": 300,
        "min_period": 30,
        "probe": 3,
        "max_period": 300,
        "resync_sample": None,
    },
    "medium": {
        "latency": 10,
        "burst": 50,
        "scale": 100,
        "cap": 1500,
        "min_period": 120,
        "probe": 10,
        "max_period": 1200,
        "resync_sample": None,
    },
    "full": {
        "latency": 20,
        "burst": 200,
        "scale": 1000,
        "cap": 3600,
        "min_period": 300,
        "probe": 50,
        "max_period": 3000,
        "resync_sample": 250,  # the peer's full resync of 1000: ~36 min after a ~45 min period
    },
}


def log(msg: str) -> None:
    print(f"[bench {datetime.now().strftime('%H:%M:%S')}] {msg}", file=sys.stderr, flush=True)


class DidNotFinish(Exception):
    pass


# --------------------------------------------------------------------------- the operators


@dataclass
class OperatorSpec:
    key: str  # "ours" | "peer"
    label: str
    argv: list[str]
    env: dict[str, str]
    artifacts: Path  # where its ansible-runner artifacts go


def _help_lists(exe: Path, flag: str) -> bool:
    try:
        out = subprocess.run(
            [str(exe), "run", "--help"], capture_output=True, text=True, timeout=60
        ).stdout
    except (OSError, subprocess.TimeoutExpired):
        return False
    return flag in out


def ours_spec(work: Path, watches: Path, extra: list[str]) -> OperatorSpec:
    exe = REPO / ".venv" / "bin" / "operator-runner"
    artifacts = work / "artifacts"
    argv = [str(exe), "run", f"--watches-file={watches}", f"--artifacts-dir={artifacts}"]
    if _help_lists(exe, "--metrics-bind-address"):
        argv += ["--metrics-bind-address=0", "--health-probe-bind-address=0"]
    if _help_lists(exe, "--role-metrics-bind-address"):
        argv += ["--role-metrics-bind-address=127.0.0.1:0"]
    if _help_lists(exe, "--webhook-bind-address"):
        # the same work as the peer's, which has no admission webhooks (bench.admission
        # measures ours)
        argv += ["--webhook-bind-address=0"]
    argv += extra
    return OperatorSpec("ours", "operator-runner", argv, {}, artifacts)


def free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def peer_env() -> dict[str, str]:
    return {
        "PATH": f"{PEER_VENV / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}",
        "ANSIBLE_ROLES_PATH": str(REPO / "roles"),
        # operator_sdk.util: operator-runner's (Galaxy is out of reach here)
        "ANSIBLE_COLLECTIONS_PATH": str(BUNDLED_COLLECTIONS),
        "VIRTUAL_ENV": str(PEER_VENV),
    }


def peer_spec(mode: str, work: Path, watches: Path) -> OperatorSpec | None:
    """operator-sdk's ansible-operator that bench/peer.sh built (mode auto: None without one,
    with a log line; binary: stop without one). It keeps its artifacts in
    /tmp/ansible-operator/runner whatever `work` is."""
    if mode == "none":
        return None
    found = peer_binary()
    if found:
        if not (PEER_VENV / "bin" / "python").exists():
            raise SystemExit(f"bench: no peer virtualenv {PEER_VENV}; run bench/peer.sh")
        version, binary = found
        argv = [
            str(binary),
            "run",
            f"--watches-file={watches}",
            f"--metrics-bind-address=127.0.0.1:{free_port()}",
            f"--health-probe-bind-address=127.0.0.1:{free_port()}",
        ]
        return OperatorSpec(
            "peer",
            f"ansible-operator {version} (operator-sdk)",
            argv,
            peer_env(),
            Path("/tmp/ansible-operator/runner"),
        )
    if mode == "binary":
        raise SystemExit(f"bench: no ansible-operator under {PEER_DIR} (see bench/peer.sh)")
    log(f"no ansible-operator under {PEER_DIR} (see bench/peer.sh): the peer is left out")
    return None


class RunningOperator:
    def __init__(self, spec: OperatorSpec, kubeconfig: Path, namespace: str, work: Path) -> None:
        self.spec, self.work = spec, work
        work.mkdir(parents=True, exist_ok=True)
        env = dict(os.environ)
        for k in ("VIRTUAL_ENV", "PYTHONPATH"):
            env.pop(k, None)
        env.update(spec.env)
        # Both operators as operator-sdk's scaffold deploys them (config/manager sets it): role
        # watches gather no facts. Without it both gather them for every run of a `role:` watch
        # (the bench's cost roles); EchoFlask's playbook says gather_facts: false itself.
        env.setdefault("ANSIBLE_GATHERING", "explicit")
        env["KUBECONFIG"] = str(kubeconfig)
        env["WATCH_NAMESPACE"] = namespace
        self.rusage_file = work / "rusage.json"
        self.log_file = work / "operator.log"
        self._log = open(self.log_file, "wb")  # noqa: SIM115
        self.t_start = time.monotonic()
        self.proc = subprocess.Popen(
            [
                sys.executable,
                str(BENCH / "launch.py"),
                "--rusage-out",
                str(self.rusage_file),
                "--",
                *spec.argv,
            ],
            env=env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            start_new_session=True,
            cwd=str(REPO),
        )
        self.sampler = TreeSampler(self.proc.pid)
        self.sampler.start()

    def alive(self) -> bool:
        return self.proc.poll() is None

    def stop(self) -> dict[str, Any]:
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)  # the launcher forwards it
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)  # the session this harness created
                self.proc.wait(timeout=30)
        self.sampler.stop()
        self._log.close()
        try:
            rusage: dict[str, Any] = json.loads(self.rusage_file.read_text())
        except (OSError, ValueError):
            return {}
        return rusage

    def log_tail(self, n: int = 20) -> str:
        try:
            return "\n".join(self.log_file.read_text(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


# --------------------------------------------------------------------------- the cluster side


def successful(obj: dict[str, Any]) -> bool:
    gen = (obj.get("metadata") or {}).get("generation")
    for c in (obj.get("status") or {}).get("conditions") or []:
        if c.get("type") == "Successful" and c.get("status") == "True":
            og = c.get("observedGeneration")
            return og is None or og == gen
    return False


@dataclass
class CrState:
    created: float | None = None
    status_written: float | None = None
    successful: float | None = None


class Tracker(threading.Thread):
    """Watches the EchoFlasks of one namespace: when each first got status, became Successful."""

    def __init__(self, api: client.ApiClient, namespace: str) -> None:
        super().__init__(name=f"tracker-{namespace}", daemon=True)
        self.custom = client.CustomObjectsApi(api)
        self.namespace = namespace
        self.crs: dict[str, CrState] = {}
        self.lock = threading.Condition()
        self._stop = threading.Event()
        self.ready = threading.Event()

    def state(self, name: str) -> CrState:
        with self.lock:
            return self.crs.setdefault(name, CrState())

    def _see(self, obj: dict[str, Any]) -> None:
        now = time.monotonic()
        name = obj["metadata"]["name"]
        with self.lock:
            st = self.crs.setdefault(name, CrState())
            status = obj.get("status") or {}
            if st.status_written is None and "nodes" in status:
                st.status_written = now
            if st.successful is None and successful(obj):
                st.successful = now
            self.lock.notify_all()

    def run(self) -> None:
        while not self._stop.is_set():
            try:
                lst = self.custom.list_namespaced_custom_object(
                    GROUP, VERSION, self.namespace, PLURAL
                )
                for obj in lst.get("items") or []:
                    self._see(obj)
                self.ready.set()
                rv = lst["metadata"]["resourceVersion"]
                w = watch.Watch()
                for ev in w.stream(
                    self.custom.list_namespaced_custom_object,
                    GROUP,
                    VERSION,
                    self.namespace,
                    PLURAL,
                    resource_version=rv,
                    timeout_seconds=120,
                ):
                    if self._stop.is_set():
                        w.stop()
                        break
                    if ev["type"] in ("ADDED", "MODIFIED"):
                        self._see(ev["object"])
            except Exception:
                time.sleep(0.5)

    def stop(self) -> None:
        self._stop.set()

    def wait(self, names: list[str], deadline: float, what: str = "successful") -> bool:
        with self.lock:
            while True:
                if all(getattr(self.crs.get(n, CrState()), what) is not None for n in names):
                    return True
                left = deadline - time.monotonic()
                if left <= 0:
                    return False
                self.lock.wait(min(left, 0.5))

    def count(self, names: list[str], what: str = "successful") -> int:
        with self.lock:
            return sum(getattr(self.crs.get(n, CrState()), what) is not None for n in names)


class Cluster:
    def __init__(self, kubeconfig: Path) -> None:
        self.kubeconfig = kubeconfig
        self.api = config.new_client_from_config(config_file=str(kubeconfig))
        self.core = client.CoreV1Api(self.api)
        self.custom = client.CustomObjectsApi(self.api)
        self.ext = client.ApiextensionsV1Api(self.api)

    def install_crds(self) -> None:
        """The CRDs of crds/, each with its storage version alone and no conversion webhook:
        the scenarios compare reconciles, and the peer serves no conversion (with EchoFlask's
        v1beta1 served, its writes would wait on a webhook that is not there; conversion has
        its own scenario, bench/conversion.py)."""
        for path in sorted((REPO / "crds").glob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if not doc:
                    continue
                spec = doc["spec"]
                spec["versions"] = [v for v in spec["versions"] if v.get("storage")]
                spec.pop("conversion", None)
                name = doc["metadata"]["name"]
                try:
                    cur = self.ext.read_custom_resource_definition(name)
                    doc["metadata"]["resourceVersion"] = cur.metadata.resource_version
                    self.ext.replace_custom_resource_definition(name, doc)
                except ApiException as exc:
                    if exc.status != 404:
                        raise
                    self.ext.create_custom_resource_definition(doc)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            crd = self.ext.read_custom_resource_definition(f"{PLURAL}.{GROUP}")
            if any(
                c.type == "Established" and c.status == "True" for c in crd.status.conditions or []
            ):
                return
            time.sleep(0.2)
        raise SystemExit("bench: the EchoFlask CRD did not become Established")

    def namespace(self, prefix: str) -> str:
        name = f"{prefix}-{''.join(random.choices(string.ascii_lowercase + string.digits, k=5))}"
        self.core.create_namespace(
            {"metadata": {"name": name, "labels": {"bench": "operator-runner"}}}
        )
        return name

    def delete_namespace(self, name: str, timeout: float = 300) -> bool:
        try:
            self.core.delete_namespace(name)
        except ApiException as exc:
            if exc.status == 404:
                return True
            raise
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                self.core.read_namespace(name)
            except ApiException as exc:
                if exc.status == 404:
                    return True
            time.sleep(1)
        return False

    def create_cr(
        self, ns: str, name: str, size: int, annotations: dict[str, str] | None = None
    ) -> None:
        body = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "namespace": ns, "annotations": annotations or {}},
            "spec": {"size": size},
        }
        for attempt in range(5):
            try:
                self.custom.create_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, body)
                return
            except ApiException as exc:
                if exc.status == 409:
                    return
                if attempt == 4 or exc.status < 500:
                    raise
                time.sleep(0.5)

    def delete_cr(self, ns: str, name: str) -> None:
        try:
            self.custom.delete_namespaced_custom_object(GROUP, VERSION, ns, PLURAL, name)
        except ApiException as exc:
            if exc.status != 404:
                raise

    def wait_crs_gone(self, ns: str, names: list[str], deadline: float) -> bool:
        """True once none of `names` is listed in `ns` (before the deadline)."""
        left = set(names)
        while time.monotonic() < deadline:
            lst = self.custom.list_namespaced_custom_object(GROUP, VERSION, ns, PLURAL)
            if not left & {o["metadata"]["name"] for o in lst.get("items") or []}:
                return True
            time.sleep(0.5)
        return False

    def create_many(
        self,
        ns: str,
        names: list[str],
        size: int,
        annotations: dict[str, str] | None,
        tracker: Tracker,
    ) -> None:
        def one(n: str) -> None:
            tracker.state(n).created = time.monotonic()
            self.create_cr(ns, n, size, annotations)

        with concurrent.futures.ThreadPoolExecutor(8) as pool:
            list(pool.map(one, names))


# --------------------------------------------------------------------------- scenarios


def pct(values: list[float], p: float) -> float | None:
    if not values:
        return None
    v = sorted(values)
    k = (len(v) - 1) * p / 100
    lo, hi = int(k), min(int(k) + 1, len(v) - 1)
    return v[lo] + (v[hi] - v[lo]) * (k - lo)


def wait_quiet(op: RunningOperator, seconds: float, deadline: float) -> bool:
    """True once no ansible-playbook ran for `seconds` in a row (before the deadline)."""
    since = None
    while time.monotonic() < deadline:
        s = op.sampler.now()
        if s.running == 0:
            since = since or s.t
            if s.t - since >= seconds:
                return True
        else:
            since = None
        time.sleep(0.2)
    return False


class Converged(NamedTuple):
    names: list[str]
    before: Sample  # just before the creates
    t0: float
    after: Sample  # when all were Successful, or at the cap
    ok: bool


def create_periodic(s: Session, prefix: str, n: int, period: float) -> Converged:
    """n CRs (`size: 0`) named PREFIX-0000.. with a reconcile period, created at once; waits
    until all are Successful or the session's cap is reached."""
    names = [f"{prefix}-{i:04d}" for i in range(n)]
    before = s.op.sampler.now()
    t0 = time.monotonic()
    s.cluster.create_many(s.ns, names, 0, {PERIOD_ANNOTATION: f"{int(period)}s"}, s.tracker)
    ok = s.tracker.wait(names, s.deadline)
    return Converged(names, before, t0, s.op.sampler.now(), ok)


MiB = 1024 * 1024


@dataclass
class Session:
    """One operator, one namespace, one scenario."""

    cluster: Cluster
    spec: OperatorSpec
    scenario: str
    work: Path
    cap: float
    result: dict[str, Any] = field(default_factory=dict)

    def __enter__(self) -> Session:
        self.ns = self.cluster.namespace(f"bench-{self.scenario}-{self.spec.key}")
        self.deadline = time.monotonic() + self.cap
        self.tracker = Tracker(self.cluster.api, self.ns)
        self.tracker.start()
        self.tracker.ready.wait(30)
        self.op = RunningOperator(self.spec, self.cluster.kubeconfig, self.ns, self.work)
        self.result.update(
            {"operator": self.spec.label, "namespace": self.ns, "loadavg_start": os.getloadavg()}
        )
        try:
            self._warm_up()
        except BaseException:  # no `with` body runs, so no __exit__: stop the operator here
            self.__exit__(*sys.exc_info())
            raise
        return self

    def extend(self, seconds: float) -> None:
        """Moves the cap (and so the deadline) on, e.g. by a period chosen in the session."""
        self.cap += seconds
        self.deadline += seconds

    def _warm_up(self) -> None:
        t0 = time.monotonic()
        self.cluster.create_cr(self.ns, "warmup", 0)
        self.tracker.state("warmup").created = t0
        if not self.tracker.wait(["warmup"], min(self.deadline, t0 + 600)):
            raise DidNotFinish(
                f"the warm-up CR was not Successful in {time.monotonic() - t0:.0f} s; "
                f"operator log:\n{self.op.log_tail()}"
            )
        first_successful = self.tracker.state("warmup").successful
        assert first_successful is not None  # wait() above returned True
        self.result["startup_to_first_successful_s"] = first_successful - self.op.t_start
        self.cluster.delete_cr(self.ns, "warmup")
        wait_quiet(self.op, 3, min(self.deadline, time.monotonic() + 60))
        t = time.monotonic()
        time.sleep(3)
        rss, rss_main = self.op.sampler.mean_rss(t)
        self.result["idle_rss_mib"] = rss / MiB
        self.result["idle_rss_main_mib"] = rss_main / MiB
        self.result["idle_pss_mib"] = self.op.sampler.pss()[0] / MiB

    def idle_settled(self) -> None:
        """Idle memory once the operator is down to its steady state: operator-runner stops its
        warm executors after --warm-idle-timeout (120 s by default) without a run; the peer
        keeps no helper processes. Waits until the tree is one process (at most 180 s, not
        counted against the session's cap)."""
        t0 = time.monotonic()
        self.deadline += 180
        deadline = t0 + 180
        while self.op.sampler.now().nprocs > 1 and time.monotonic() < deadline:
            time.sleep(0.5)
        t = time.monotonic()
        time.sleep(3)
        rss, _ = self.op.sampler.mean_rss(t)
        self.result["idle_settled_after_s"] = t - t0
        self.result["idle_settled_nprocs"] = self.op.sampler.now().nprocs
        self.result["idle_settled_rss_mib"] = rss / MiB
        self.result["idle_settled_pss_mib"] = self.op.sampler.pss()[0] / MiB

    def __exit__(self, *exc: object) -> None:
        self.tracker.stop()
        rusage = self.op.stop()
        self.result["rusage_children_at_exit"] = rusage
        self.result["loadavg_end"] = os.getloadavg()
        self.result["operator_log"] = str(self.op.log_file)
        try:
            self.result["anatomy"] = summarize_artifacts(self.spec.artifacts)
        except Exception as e:  # the analysis must not lose the measurement
            self.result["anatomy"] = {"error": str(e)}
        if not self.cluster.delete_namespace(self.ns):
            log(f"namespace {self.ns} still terminating after 300 s")

    def left(self) -> float:
        return self.deadline - time.monotonic()
