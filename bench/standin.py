#!/usr/bin/env python3
"""Stand-in for operator-sdk's `ansible-operator run` (v1.42.x), for benchmarks only.

Used when the real Go binary cannot be built on this machine (see bench/README.md). It keeps
what costs CPU and time in the real one, the Python side, exactly as the real one wires it:

- every reconcile runs the `ansible-runner` command line in a new process:
  `ansible-runner run <inputdir> --rotate-artifacts 20 -p <playbook> -i <ident> -vv`, with the
  input dir laid out as ansible-operator's inputdir package does (env/extravars as JSON,
  env/envvars with K8S_AUTH_KUBECONFIG, env/settings with runner_http_url/runner_http_path,
  inventory/hosts, project/), and combined output read into memory;
- job events come back through the `ansible-runner-http` event plugin (PyPI 1.0.0, as in
  operator-sdk's base image), which POSTs every event over a Unix socket to this process;
- the modules talk to the API server through a local proxy with a per-reconcile kubeconfig
  whose user name is the base64 JSON owner reference; the proxy adds that ownerReference to
  what the role creates and starts a dependent watch for its kind;
- the reconcile: Get, `Running` (and `Successful` set to False) written before the run, the
  run, stop reading events at the first `requeue_after` result (return without touching the
  status), otherwise Get + `Running`/`Successful`/`Failure` with ansibleResult after it; a
  work queue with controller-runtime's semantics (one worker per key, merged duplicates,
  RequeueAfter, per-item exponential backoff 5 ms .. 1000 s); `--max-concurrent-reconciles`
  defaults to the host's CPU count; the reconcile period from the CR annotation
  `ansible.sdk.operatorframework.io/reconcile-period`, the watch's `reconcilePeriod`, else
  `--reconcile-period` (10h); primary watch with GenerationChangedPredicate, dependent watches
  with operator-sdk's DependentPredicate (status-only changes ignored).

What differs: this controller is Python, not Go (its own CPU and memory are reported apart from
the Ansible processes'); the proxy does not serve GETs from a cache; no finalizers, leader
election, metrics or events; the `operator_sdk.util` collection is operator-runner's (the
environment variables OPERATOR_RUNNER_CR_* that it reads are set for the run), since Ansible
Galaxy cannot be reached here.

Runs on the peer's virtualenv (ansible-runner, ansible-runner-http, kubernetes, PyYAML).
"""

from __future__ import annotations

import argparse
import base64
import copy
import heapq
import http.server
import json
import logging
import os
import queue
import random
import re
import socketserver
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import yaml
from kubernetes import client, config
from kubernetes.client.rest import ApiException

log = logging.getLogger("standin")

PERIOD_ANNOTATION = "ansible.sdk.operatorframework.io/reconcile-period"
_UNITS = {"ns": 1e-9, "us": 1e-6, "µs": 1e-6, "ms": 1e-3, "s": 1.0, "m": 60.0, "h": 3600.0}
_COMPONENT = re.compile(r"(\d+(?:\.\d*)?|\.\d+)(ns|us|µs|ms|s|m|h)")


def parse_duration(text: str) -> float:
    if text in ("0", "+0", "-0"):
        return 0.0
    pos, total = 0, 0.0
    for m in _COMPONENT.finditer(text):
        if m.start() != pos:
            raise ValueError(f"time: invalid duration {text!r}")
        total += float(m.group(1)) * _UNITS[m.group(2)]
        pos = m.end()
    if pos != len(text) or pos == 0:
        raise ValueError(f"time: invalid duration {text!r}")
    return total


def to_snake(name: str) -> str:
    s = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    s = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s)
    return s.lower()


def map_to_snake(value: Any) -> Any:
    if isinstance(value, dict):
        return {to_snake(k): map_to_snake(v) for k, v in value.items()}
    if isinstance(value, list):
        return [map_to_snake(v) for v in value]
    return value


def now_rfc3339() -> str:
    return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --------------------------------------------------------------------------- work queue


class WorkQueue:
    """controller-runtime's rate-limiting delaying work queue, reduced to what reconciles use."""

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._queue: list[Any] = []
        self._dirty: set[Any] = set()
        self._processing: set[Any] = set()
        self._waiting: dict[Any, float] = {}
        self._heap: list[tuple[float, int, Any]] = []
        self._seq = 0
        self._failures: dict[Any, int] = {}
        threading.Thread(target=self._delayed, name="delayed", daemon=True).start()

    def add(self, key: Any) -> None:
        with self._cond:
            if key in self._dirty:
                return
            self._dirty.add(key)
            if key not in self._processing:
                self._queue.append(key)
                self._cond.notify_all()

    def add_after(self, key: Any, delay: float) -> None:
        if delay <= 0:
            self.add(key)
            return
        with self._cond:
            when = time.monotonic() + delay
            if key in self._waiting and self._waiting[key] <= when:
                return
            self._waiting[key] = when
            self._seq += 1
            heapq.heappush(self._heap, (when, self._seq, key))
            self._cond.notify_all()

    def add_rate_limited(self, key: Any) -> None:
        n = self._failures.get(key, 0)
        self._failures[key] = n + 1
        self.add_after(key, min(0.005 * 2**n, 1000.0))

    def forget(self, key: Any) -> None:
        self._failures.pop(key, None)

    def get(self) -> Any:
        with self._cond:
            while not self._queue:
                self._cond.wait()
            key = self._queue.pop(0)
            self._processing.add(key)
            self._dirty.discard(key)
            return key

    def done(self, key: Any) -> None:
        with self._cond:
            self._processing.discard(key)
            if key in self._dirty:
                self._queue.append(key)
                self._cond.notify_all()

    def _delayed(self) -> None:
        while True:
            with self._cond:
                now = time.monotonic()
                due = []
                while self._heap and self._heap[0][0] <= now:
                    when, _, key = heapq.heappop(self._heap)
                    if self._waiting.get(key) == when:
                        del self._waiting[key]
                        due.append(key)
                timeout = self._heap[0][0] - now if self._heap else None
            for key in due:
                self.add(key)
            with self._cond:
                if not due:
                    self._cond.wait(timeout if timeout is None else max(timeout, 0.001))


# --------------------------------------------------------------------------- API access


class Api:
    def __init__(self, kubeconfig: str | None) -> None:
        if kubeconfig:
            self.client = config.new_client_from_config(config_file=kubeconfig)
        else:
            config.load_incluster_config()
            self.client = client.ApiClient()
        self.conf = self.client.configuration
        self.pool = self.client.rest_client.pool_manager
        self.custom = client.CustomObjectsApi(self.client)

    def headers(self) -> dict[str, str]:
        h: dict[str, str] = {}
        token = self.conf.api_key.get("authorization") if self.conf.api_key else None
        if token:
            prefix = (self.conf.api_key_prefix or {}).get("authorization")
            h["Authorization"] = f"{prefix} {token}" if prefix else token
        return h

    def raw(
        self,
        method: str,
        path: str,
        body: bytes | None = None,
        headers: dict[str, str] | None = None,
        stream: bool = False,
        timeout: float | None = 60,
    ) -> Any:
        h = self.headers()
        h.update(headers or {})
        return self.pool.request(
            method,
            self.conf.host + path,
            body=body,
            headers=h,
            preload_content=not stream,
            timeout=timeout,
            retries=False,
        )

    def json(self, method: str, path: str) -> dict[str, Any]:
        r = self.raw(method, path, headers={"Accept": "application/json"})
        if r.status >= 300:
            raise ApiException(status=r.status, reason=r.data.decode(errors="replace")[:300])
        return json.loads(r.data)


def api_prefix(api_version: str) -> str:
    return f"/apis/{api_version}" if "/" in api_version else f"/api/{api_version}"


def owners_of(obj: dict[str, Any]) -> list[tuple[str, str, str, str]]:
    """(apiVersion, kind, namespace, name) of owner references and primary-resource annotations."""
    meta = obj.get("metadata") or {}
    out = [
        (r.get("apiVersion", ""), r.get("kind", ""), meta.get("namespace", ""), r.get("name", ""))
        for r in meta.get("ownerReferences") or []
    ]
    ann = meta.get("annotations") or {}
    primary, ptype = (
        ann.get("operator-sdk/primary-resource"),
        ann.get("operator-sdk/primary-resource-type"),
    )
    if primary and ptype:
        ns, _, name = primary.rpartition("/")
        kind, _, group = ptype.partition(".")
        out.append((group, kind, ns, name))
    return out


class Informer(threading.Thread):
    """List + watch of one collection; calls handler(kind_of_event, old, new)."""

    def __init__(self, api: Api, path: str, handler: Any, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self.api, self.path, self.handler = api, path, handler
        self.cache: dict[tuple[str, str], dict[str, Any]] = {}
        self.synced = threading.Event()

    def run(self) -> None:
        while True:
            try:
                version = self._list()
                self.synced.set()
                self._watch(version)
            except Exception as exc:  # relist after any error, as client-go's reflector does
                log.debug("watch %s: %s; relisting", self.path, exc)
                time.sleep(1)

    def _key(self, obj: dict[str, Any]) -> tuple[str, str]:
        m = obj.get("metadata") or {}
        return m.get("namespace", ""), m.get("name", "")

    def _list(self) -> str:
        data = self.api.json("GET", self.path)
        seen = set()
        for obj in data.get("items") or []:
            # list items carry no kind/apiVersion; client-go's decoding fills them in
            obj.setdefault("apiVersion", data.get("apiVersion", ""))
            obj.setdefault("kind", str(data.get("kind", "")).removesuffix("List"))
            k = self._key(obj)
            seen.add(k)
            old = self.cache.get(k)
            self.cache[k] = obj
            self.handler("ADDED" if old is None else "MODIFIED", old, obj)
        for k in set(self.cache) - seen:
            self.handler("DELETED", self.cache.pop(k), None)
        return data["metadata"]["resourceVersion"]

    def _watch(self, version: str) -> None:
        while True:
            q = f"?watch=1&allowWatchBookmarks=true&resourceVersion={version}&timeoutSeconds=300"
            r = self.api.raw("GET", self.path + q, stream=True, timeout=None)
            try:
                if r.status != 200:
                    raise RuntimeError(f"watch answered {r.status}")
                buf = b""
                # amt=None: every chunk as it arrives (a fixed amount would wait for that much)
                for chunk in r.stream(None, decode_content=True):
                    buf += chunk
                    while b"\n" in buf:
                        line, buf = buf.split(b"\n", 1)
                        if not line.strip():
                            continue
                        ev = json.loads(line)
                        kind, obj = ev.get("type"), ev.get("object") or {}
                        if kind == "ERROR":
                            raise RuntimeError(f"watch error {obj.get('code')}")
                        version = (obj.get("metadata") or {}).get("resourceVersion", version)
                        if kind == "BOOKMARK":
                            continue
                        k = self._key(obj)
                        old = self.cache.get(k)
                        if kind == "DELETED":
                            self.cache.pop(k, None)
                            self.handler("DELETED", old, obj)
                        else:
                            self.cache[k] = obj
                            self.handler(kind, old, obj)
            finally:
                r.release_conn()


def _strip_for_dependent(obj: dict[str, Any]) -> dict[str, Any]:
    o = copy.deepcopy(obj)
    o.pop("status", None)
    meta = o.get("metadata") or {}
    meta.pop("resourceVersion", None)
    for mf in meta.get("managedFields") or []:
        mf.pop("time", None)
    return o


# --------------------------------------------------------------------------- job events


class EventServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True
    allow_reuse_address = True

    def __init__(self, path: str) -> None:
        self.queues: dict[str, queue.Queue[Any]] = {}
        self.lock = threading.Lock()
        if os.path.exists(path):
            os.unlink(path)
        super().__init__(path, _EventHandler)

    def register(self, ident: str) -> queue.Queue[Any]:
        q: queue.Queue[Any] = queue.Queue()
        with self.lock:
            self.queues[ident] = q
        return q

    def unregister(self, ident: str) -> None:
        with self.lock:
            self.queues.pop(ident, None)


class _EventHandler(http.server.BaseHTTPRequestHandler):
    server: EventServer

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
        ident = self.path.rstrip("/").rsplit("/", 1)[-1]
        try:
            data = json.loads(body)
        except ValueError:
            data = None
        if isinstance(data, dict) and "event" in data:
            with self.server.lock:
                q = self.server.queues.get(ident)
            if q is not None:
                q.put(data)
        self.send_response(204)
        self.end_headers()

    def log_message(self, *args: Any) -> None:
        pass

    def log_request(self, *args: Any) -> None:
        pass


# --------------------------------------------------------------------------- the proxy


class Proxy(http.server.ThreadingHTTPServer):
    daemon_threads = True

    def __init__(self, port: int, api: Api, operator: Operator) -> None:
        self.api, self.operator = api, operator
        super().__init__(("127.0.0.1", port), _ProxyHandler)


_NAMESPACED_COLLECTION = re.compile(r"^(/api/v1|/apis/[^/]+/[^/]+)/namespaces/([^/]+)/([^/]+)$")
_CLUSTER_COLLECTION = re.compile(r"^(/api/v1|/apis/[^/]+/[^/]+)/([^/]+)$")


class _ProxyHandler(http.server.BaseHTTPRequestHandler):
    server: Proxy
    protocol_version = "HTTP/1.1"

    def _owner(self) -> dict[str, Any] | None:
        auth = self.headers.get("Authorization") or ""
        if not auth.startswith("Basic "):
            return None
        try:
            user = base64.b64decode(auth[6:]).decode().split(":", 1)[0]
            return json.loads(base64.b64decode(user))
        except ValueError:
            return None

    def _any(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        owner = self._owner()
        path, _, _query = self.path.partition("?")
        created_kind = None
        if self.command == "POST" and owner and body:
            m = _NAMESPACED_COLLECTION.match(path)
            mc = _CLUSTER_COLLECTION.match(path)
            try:
                obj = json.loads(body)
            except ValueError:
                obj = None
            if isinstance(obj, dict) and (m or mc):
                meta = obj.setdefault("metadata", {})
                ref = {k: owner[k] for k in ("apiVersion", "kind", "name", "uid")}
                if m and m.group(2) == owner.get("namespace"):
                    refs = meta.setdefault("ownerReferences", [])
                    if not any(r.get("uid") == ref["uid"] for r in refs):
                        refs.append(ref)
                    created_kind = (m.group(1), m.group(3))
                else:
                    ann = meta.setdefault("annotations", {})
                    ann["operator-sdk/primary-resource"] = (
                        f"{owner.get('namespace', '')}/{owner['name']}"
                    )
                    group = owner["apiVersion"].split("/")[0] if "/" in owner["apiVersion"] else ""
                    ann["operator-sdk/primary-resource-type"] = f"{owner['kind']}.{group}"
                    created_kind = (m.group(1), m.group(3)) if m else (mc.group(1), mc.group(2))
                body = json.dumps(obj).encode()
        headers = {
            k: v
            for k, v in self.headers.items()
            if k.lower() in ("accept", "content-type", "user-agent")
        }
        r = self.server.api.raw(self.command, self.path, body=body, headers=headers)
        data = r.data
        if created_kind and r.status < 300 and owner:
            self.server.operator.ensure_dependent_watch(*created_kind, owner.get("namespace", ""))
        self.send_response(r.status)
        self.send_header("Content-Type", r.headers.get("Content-Type", "application/json"))
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _any

    def log_message(self, *args: Any) -> None:
        pass


# --------------------------------------------------------------------------- the operator


class Watch:
    def __init__(self, entry: dict[str, Any], base: Path) -> None:
        self.group, self.version, self.kind = (
            entry.get("group", ""),
            entry["version"],
            entry["kind"],
        )
        self.api_version = f"{self.group}/{self.version}" if self.group else self.version
        self.playbook = self.role = None
        if entry.get("playbook"):
            self.playbook = str((base / os.path.expandvars(entry["playbook"])).resolve())
        elif entry.get("role"):
            role = os.path.expandvars(entry["role"])
            candidate = base / "roles" / role if "/" not in role else base / role
            self.role = str(candidate.resolve())
        self.vars = entry.get("vars") or {}
        self.period = (
            parse_duration(str(entry["reconcilePeriod"])) if entry.get("reconcilePeriod") else None
        )
        self.manage_status = entry.get("manageStatus", True)
        self.snake = entry.get("snakeCaseParameters", True)
        self.watch_dependents = entry.get("watchDependentResources", True)
        self.max_artifacts = int(entry.get("maxRunnerArtifacts", 20))
        self.plural = ""


class Operator:
    def __init__(self, args: argparse.Namespace) -> None:
        self.args = args
        self.api = Api(args.kubeconfig or os.environ.get("KUBECONFIG"))
        base = Path(args.watches_file).resolve().parent
        self.watches = [Watch(e, base) for e in yaml.safe_load(Path(args.watches_file).read_text())]
        self.namespaces = [n for n in os.environ.get("WATCH_NAMESPACE", "").split(",") if n]
        self.queue = WorkQueue()
        self.runner_dir = Path(args.runner_dir)
        self.runner_dir.mkdir(parents=True, exist_ok=True)
        self.events = EventServer(str(self.runner_dir / "events.sock"))
        threading.Thread(target=self.events.serve_forever, name="events", daemon=True).start()
        self.proxy = Proxy(args.proxy_port, self.api, self)
        self.proxy_url = f"http://127.0.0.1:{self.proxy.server_address[1]}"
        threading.Thread(target=self.proxy.serve_forever, name="proxy", daemon=True).start()
        self.informers: dict[str, Informer] = {}
        self.primary: dict[tuple[str, str], dict[str, Any]] = {}  # cache of primaries by (gvk key)
        self.lock = threading.Lock()
        self.timings = open(self.runner_dir / "timings.jsonl", "a", encoding="utf-8")  # noqa: SIM115
        self.env_roles = str(base / "roles")

    # --- watches

    def discover(self) -> None:
        for w in self.watches:
            data = self.api.json("GET", api_prefix(w.api_version))
            for res in data.get("resources") or []:
                if res.get("kind") == w.kind and "/" not in res["name"]:
                    w.plural = res["name"]
            if not w.plural:
                raise SystemExit(f"{w.kind} ({w.api_version}) is not served by the API server")

    def paths(self, prefix: str, plural: str) -> list[str]:
        if self.namespaces:
            return [f"{prefix}/namespaces/{ns}/{plural}" for ns in self.namespaces]
        return [f"{prefix}/{plural}"]

    def start_primary(self) -> None:
        for w in self.watches:
            for path in self.paths(api_prefix(w.api_version), w.plural):

                def handler(kind: str, old: Any, new: Any, w: Watch = w) -> None:
                    obj = new or old
                    key = (w.kind, obj["metadata"].get("namespace", ""), obj["metadata"]["name"])
                    with self.lock:
                        if kind == "DELETED":
                            self.primary.pop(key, None)
                        else:
                            self.primary[key] = new
                    if (
                        kind == "MODIFIED"
                        and old is not None
                        and old["metadata"].get("generation") == new["metadata"].get("generation")
                    ):
                        return  # GenerationChangedPredicate
                    self.queue.add(key)

                inf = Informer(self.api, path, handler, f"watch-{w.kind}")
                inf.start()
                self.informers[path] = inf

    def ensure_dependent_watch(self, prefix: str, plural: str, namespace: str) -> None:
        for path in self.paths(prefix, plural):
            with self.lock:
                if path in self.informers:
                    continue

                def handler(kind: str, old: Any, new: Any, path: str = path) -> None:
                    obj = new or old
                    if kind == "MODIFIED" and old is not None:
                        if old["metadata"].get("resourceVersion") == new["metadata"].get(
                            "resourceVersion"
                        ):
                            return
                        a, b = _strip_for_dependent(old), _strip_for_dependent(new)
                        if a == b:
                            return  # DependentPredicate: status-only change
                        diff = sorted(
                            {
                                f"metadata.{k}"
                                for k in set(a["metadata"]) | set(b["metadata"])
                                if a["metadata"].get(k) != b["metadata"].get(k)
                            }
                            | {
                                k
                                for k in set(a) | set(b)
                                if k != "metadata" and a.get(k) != b.get(k)
                            }
                        )
                        log.info(
                            "dependent %s %s changed (%s)", path, obj["metadata"]["name"], diff
                        )
                    else:
                        log.info("dependent %s %s %s", path, obj["metadata"]["name"], kind)
                    for api_version, okind, ns, name in owners_of(obj):
                        for w in self.watches:
                            if (
                                w.kind == okind
                                and api_version.split("/")[0] == w.api_version.split("/")[0]
                            ):
                                self.queue.add((w.kind, ns, name))

                inf = Informer(self.api, path, handler, f"dep-{plural}")
                self.informers[path] = inf
            inf.start()
            log.info("watching dependent %s", path)

    # --- reconcile

    def watch_of(self, kind: str) -> Watch:
        return next(w for w in self.watches if w.kind == kind)

    def worker(self) -> None:
        while True:
            key = self.queue.get()
            try:
                requeue = self.reconcile(key)
            except Exception as exc:
                log.warning("reconcile %s/%s failed: %s", key[1], key[2], exc)
                self.queue.add_rate_limited(key)
            else:
                self.queue.forget(key)
                if requeue is not None:
                    self.queue.add_after(key, requeue)
            finally:
                self.queue.done(key)

    def obj_path(self, w: Watch, ns: str, name: str) -> str:
        scope = f"/namespaces/{ns}" if ns else ""
        return f"{api_prefix(w.api_version)}{scope}/{w.plural}/{name}"

    def get(self, w: Watch, ns: str, name: str) -> dict[str, Any] | None:
        try:
            return self.api.json("GET", self.obj_path(w, ns, name))
        except ApiException as exc:
            if exc.status == 404:
                return None
            raise

    def put_status(self, w: Watch, obj: dict[str, Any]) -> None:
        m = obj["metadata"]
        path = self.obj_path(w, m.get("namespace", ""), m["name"]) + "/status"
        r = self.api.raw(
            "PUT",
            path,
            body=json.dumps(obj).encode(),
            headers={"Content-Type": "application/json", "Accept": "application/json"},
        )
        if r.status >= 300:
            raise ApiException(status=r.status, reason=r.data.decode(errors="replace")[:300])

    @staticmethod
    def set_condition(status: dict[str, Any], cond: dict[str, Any]) -> None:
        conds = status.setdefault("conditions", [])
        current = next((c for c in conds if c.get("type") == cond["type"]), None)
        if (
            current is not None
            and current.get("status") == cond["status"]
            and current.get("reason") == cond.get("reason")
        ):
            return
        if current is not None and current.get("status") == cond["status"]:
            cond["lastTransitionTime"] = current.get("lastTransitionTime")
        status["conditions"] = [c for c in conds if c.get("type") != cond["type"]] + [cond]

    @staticmethod
    def condition(
        ctype: str, status: str, reason: str, message: str, result: Any = None
    ) -> dict[str, Any]:
        c: dict[str, Any] = {
            "type": ctype,
            "status": status,
            "reason": reason,
            "message": message,
            "lastTransitionTime": now_rfc3339(),
        }
        if result is not None:
            c["ansibleResult"] = result
        return c

    def mark_running(self, w: Watch, ns: str, name: str) -> None:
        obj = self.get(w, ns, name)
        if obj is None:
            return
        status = obj.get("status") or {}
        succ = next(
            (c for c in status.get("conditions") or [] if c.get("type") == "Successful"), None
        )
        if succ is not None:
            self.set_condition(status, {**succ, "status": "False"})
        self.set_condition(
            status, self.condition("Running", "True", "Running", "Running reconciliation")
        )
        obj["status"] = status
        self.put_status(w, obj)

    def mark_done(
        self, w: Watch, ns: str, name: str, stats: dict[str, Any], failures: list[str]
    ) -> None:
        obj = self.get(w, ns, name)
        if obj is None:
            return
        status = obj.get("status") or {}
        data = stats.get("event_data") or {}
        result = {
            "ok": sum((data.get("ok") or {}).values()),
            "changed": sum((data.get("changed") or {}).values()),
            "skipped": sum((data.get("skipped") or {}).values()),
            "failures": sum((data.get("failures") or {}).values()),
            "completion": stats.get("created", ""),
        }
        if not failures:
            self.set_condition(
                status,
                self.condition(
                    "Running", "True", "Successful", "Awaiting next reconciliation", result
                ),
            )
            self.set_condition(
                status,
                self.condition("Successful", "True", "Successful", "Last reconciliation succeeded"),
            )
            self.set_condition(status, self.condition("Failure", "False", "", ""))
        else:
            run = next(
                (c for c in status.get("conditions") or [] if c.get("type") == "Running"), None
            )
            if run is not None:
                self.set_condition(status, {**run, "status": "False"})
            self.set_condition(
                status, self.condition("Failure", "True", "Failed", "\n".join(failures), result)
            )
            self.set_condition(status, self.condition("Successful", "False", "", ""))
        obj["status"] = status
        self.put_status(w, obj)

    def reconcile(self, key: tuple[str, str, str]) -> float | None:
        kind, ns, name = key
        w = self.watch_of(kind)
        with self.lock:
            obj = copy.deepcopy(self.primary.get(key))
        if obj is None:
            return None
        ident = str(random.getrandbits(62))
        period = w.period if w.period is not None else self.args.reconcile_period
        annotations = obj["metadata"].get("annotations") or {}
        if PERIOD_ANNOTATION in annotations:
            period = parse_duration(annotations[PERIOD_ANNOTATION])
        if not isinstance(obj.get("spec"), dict):
            obj["spec"] = {}
        t0 = time.time()
        if w.manage_status:
            self.mark_running(w, ns, name)
        owner = {
            "apiVersion": obj["apiVersion"],
            "kind": obj["kind"],
            "name": name,
            "uid": obj["metadata"]["uid"],
            "namespace": ns,
        }
        input_dir = self.runner_dir / w.group / w.version / w.kind / ns / name
        kubeconfig = self.write_kubeconfig(owner, ident)
        events = self.events.register(ident)
        stats: dict[str, Any] | None = None
        failures: list[str] = []
        requeue: float | None = None
        t_first: float | None = None
        try:
            proc = self.run_ansible(w, obj, input_dir, ident, str(kubeconfig))
        except Exception:
            self.events.unregister(ident)
            kubeconfig.unlink(missing_ok=True)
            raise
        t_spawn = time.time()
        waiter = threading.Thread(
            target=self._wait, args=(proc, events, ident, kubeconfig), daemon=True
        )
        waiter.start()
        if True:
            while True:
                ev = events.get()
                if ev is None:
                    break
                t_first = t_first or time.time()
                data = ev.get("event_data") or {}
                kind_ev = ev.get("event")
                if kind_ev == "playbook_on_stats":
                    stats = ev
                action = data.get("task_action")
                if action == "operator_sdk.util.requeue_after" or (
                    action == "requeue_after" and kind_ev != "runner_on_failed"
                ):
                    res = data.get("res")
                    if isinstance(res, dict) and "period" in res:
                        requeue = parse_duration(str(res["period"]))
                        break
                if (
                    kind_ev == "runner_on_failed"
                    and not data.get("ignore_errors")
                    and not data.get("rescued")
                ):
                    res = data.get("res") or {}
                    failures.append(f"{data.get('task', '')}: {res.get('msg', '')}")
            self.record(ident, key, t0, t_spawn, t_first, requeue)
            if requeue is not None:
                return requeue  # ansible-operator returns here; the run goes on unobserved
            waiter.join()
        if stats is None:
            raise RuntimeError("did not receive playbook_on_stats event")
        if w.manage_status:
            if self.get(w, ns, name) is None:
                return None
            self.mark_done(w, ns, name, stats, failures)
        if failures:
            raise RuntimeError("event runner on failed")
        return period or None

    def _wait(
        self, proc: subprocess.Popen[bytes], events: queue.Queue[Any], ident: str, kubeconfig: Path
    ) -> None:
        proc.communicate()  # CombinedOutput
        time.sleep(0.01)  # events posted just before exit are in the queue by now
        events.put(None)
        self.events.unregister(ident)
        kubeconfig.unlink(missing_ok=True)

    def record(
        self,
        ident: str,
        key: Any,
        t0: float,
        t_spawn: float,
        t_first: float | None,
        requeue: float | None,
    ) -> None:
        line = {
            "ident": ident,
            "cr": f"{key[1]}/{key[2]}",
            "t_start": t0,
            "t_spawn": t_spawn,
            "t_first_event": t_first,
            "t_end": time.time(),
            "requeue": requeue,
        }
        with self.lock:
            self.timings.write(json.dumps(line) + "\n")
            self.timings.flush()

    def write_kubeconfig(self, owner: dict[str, Any], ident: str) -> Path:
        user = base64.b64encode(json.dumps(owner).encode()).decode()
        kc = {
            "apiVersion": "v1",
            "kind": "Config",
            "current-context": "proxy",
            "clusters": [{"name": "proxy", "cluster": {"server": self.proxy_url}}],
            "users": [{"name": "owner", "user": {"username": user, "password": "unused"}}],
            "contexts": [
                {
                    "name": "proxy",
                    "context": {
                        "cluster": "proxy",
                        "user": "owner",
                        "namespace": owner["namespace"],
                    },
                }
            ],
        }
        path = self.runner_dir / "kubeconfigs"
        path.mkdir(exist_ok=True)
        f = path / f"kubeconfig-{ident}"
        f.write_text(yaml.safe_dump(kc))
        return f

    def run_ansible(
        self, w: Watch, obj: dict[str, Any], input_dir: Path, ident: str, kubeconfig: str
    ) -> subprocess.Popen[bytes]:
        for sub in ("env", "inventory", "project"):
            (input_dir / sub).mkdir(parents=True, exist_ok=True)
        spec = obj["spec"]
        params: dict[str, Any] = map_to_snake(spec) if w.snake else dict(spec)
        meta = obj["metadata"]
        params["ansible_operator_meta"] = {
            "namespace": meta.get("namespace", ""),
            "name": meta["name"],
        }
        obj_key = re.sub(r"[.-]", "_", f"_{w.group}_{w.kind.lower()}")
        params[obj_key] = obj
        params[f"{obj_key}_spec"] = spec
        params.update(w.vars)
        (input_dir / "env" / "extravars").write_text(json.dumps(params))
        (input_dir / "inventory" / "hosts").write_text(
            f"localhost ansible_connection=local ansible_python_interpreter={sys.executable}\n"
        )
        envvars = {
            "K8S_AUTH_KUBECONFIG": kubeconfig,
            "KUBECONFIG": kubeconfig,
            # for operator-runner's operator_sdk.util.k8s_status (stand-in only)
            "OPERATOR_RUNNER_CR_API_VERSION": w.api_version,
            "OPERATOR_RUNNER_CR_KIND": w.kind,
            "OPERATOR_RUNNER_CR_PLURAL": w.plural,
            "OPERATOR_RUNNER_CR_NAME": meta["name"],
            "OPERATOR_RUNNER_CR_NAMESPACE": meta.get("namespace", ""),
        }
        (input_dir / "env" / "envvars").write_text(json.dumps(envvars))
        (input_dir / "env" / "settings").write_text(
            json.dumps(
                {
                    "runner_http_url": str(self.runner_dir / "events.sock"),
                    "runner_http_path": f"/events/{ident}",
                }
            )
        )
        if self.args.ansible_args:
            (input_dir / "env" / "cmdline").write_text(self.args.ansible_args)
        runner = str(Path(sys.executable).parent / "ansible-runner")
        if w.playbook:
            cmd = [
                runner,
                "run",
                str(input_dir),
                "--rotate-artifacts",
                str(w.max_artifacts),
                "-p",
                w.playbook,
                "-i",
                ident,
            ]
        else:
            assert w.role
            cmd = [
                runner,
                "run",
                str(input_dir),
                "--rotate-artifacts",
                str(w.max_artifacts),
                "--role",
                os.path.basename(w.role),
                "--roles-path",
                os.path.dirname(w.role),
                "--hosts",
                "localhost",
                "-i",
                ident,
            ]
        if self.args.ansible_verbosity > 0:
            cmd.append("-" + "v" * self.args.ansible_verbosity)
        env = dict(os.environ)
        env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
        env.setdefault("ANSIBLE_ROLES_PATH", self.env_roles)
        env["K8S_AUTH_KUBECONFIG"] = env["KUBECONFIG"] = kubeconfig
        return subprocess.Popen(
            cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL
        )

    def run(self) -> None:
        self.discover()
        for _ in range(self.args.max_concurrent_reconciles):
            threading.Thread(target=self.worker, name="worker", daemon=True).start()
        self.start_primary()
        log.info(
            "stand-in operator started: %s; namespaces %s; proxy %s",
            ", ".join(w.kind for w in self.watches),
            self.namespaces or "all",
            self.proxy_url,
        )
        stop = threading.Event()
        import signal

        signal.signal(signal.SIGTERM, lambda *_: stop.set())
        signal.signal(signal.SIGINT, lambda *_: stop.set())
        stop.wait()


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--watches-file", default="./watches.yaml")
    p.add_argument("--max-concurrent-reconciles", type=int, default=os.cpu_count() or 1)
    p.add_argument("--reconcile-period", type=parse_duration, default=parse_duration("10h"))
    p.add_argument("--ansible-verbosity", type=int, default=2)
    p.add_argument("--ansible-args", default="")
    p.add_argument("--runner-dir", default="/tmp/ansible-operator/runner")
    p.add_argument("--proxy-port", type=int, default=0)
    p.add_argument("--kubeconfig")
    args = p.parse_args()
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(message)s")
    Operator(args).run()


if __name__ == "__main__":
    main()
