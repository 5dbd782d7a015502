"""The Reconciler against a fake executor and the fake API: no cluster, no Ansible.

The fake API (tests/unit/fake_api) keeps objects by path as the API server would
(resourceVersion checks on the finalizer patch, status merged through the status subresource,
the object gone once its last finalizer is removed while it is being deleted) and records every
request; the fake executor returns the RunResults a test queues and records the RunRequests.
"""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from fake_api import FakeApi

from runner.ansible.artifacts import Artifacts
from runner.ansible.interface import RunRequest, RunResult
from runner.ansible.results import RunSummary, TaskResult
from runner.kube import client as kube
from runner.kube.client import Request
from runner.kube.resources import ObjectRef, Resource
from runner.reconcile import conditionlist, conditions
from runner.reconcile.interface import Outcome
from runner.reconcile.reconciler import Options, Reconciler
from runner.reconcile.recorder import EventRecorder
from runner.watches import GVK, Finalizer, Watch

GVK_ECHO = GVK("x.example.com", "v1", "Echo")
ECHOES = Resource("x.example.com", "v1", "echoes", "Echo")
REF = ObjectRef(ECHOES, "ns", "e1")
FINALIZER = "x.example.com/finalizer"
STATS = {"ok": {"localhost": 3}, "changed": {"localhost": 1}, "failures": {}, "skipped": {}}


def writes(api: FakeApi, suffix: str = "") -> list[Request]:
    """The PATCH requests the API got (to paths ending with `suffix`)."""
    return api.sent("PATCH", suffix)


def events(api: FakeApi) -> list[dict[str, Any]]:
    """The Events created in the CR's namespace, oldest first."""
    return api.listed(kube.create_event("ns", {}).path)


class FakeRuns:
    """Runs nothing: returns the queued results, records the requests."""

    def __init__(self, *results: RunResult) -> None:
        self.results = list(results)
        self.requests: list[RunRequest] = []

    async def run(self, request: RunRequest) -> RunResult:
        self.requests.append(request)
        return self.results.pop(0)


def success(requeue_after: float | None = None) -> RunResult:
    summary = RunSummary(stats=STATS, stats_created="2026-12-02T12:00:30", tasks=4)
    summary.requeue_after = requeue_after
    return RunResult(status="successful", rc=0, summary=summary)


def failure(message: str) -> RunResult:
    stats = {**STATS, "failures": {"localhost": 1}}
    summary = RunSummary(stats=stats, stats_created="2026-12-02T12:00:40", failures=[message])
    return RunResult(status="failed", rc=2, summary=summary)


def echo(**meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": "x.example.com/v1",
        "kind": "Echo",
        "metadata": {"name": "e1", "namespace": "ns", "uid": "uid-1", "generation": 1, **meta},
        "spec": {"command": "echo hi"},
    }


def reconciler(tmp_path: Path, api: FakeApi, runs: FakeRuns, **watch: Any) -> Reconciler:
    client = api.client()
    return Reconciler(
        Watch(gvk=GVK_ECHO, role=str(tmp_path / "roles" / "echo"), **watch),
        Options(reconcile_period=60.0),
        client,
        runs,
        Artifacts(tmp_path / "artifacts"),
        EventRecorder(client),
    )


def reconcile(rec: Reconciler) -> Outcome:
    return asyncio.run(rec.reconcile(REF))


def condition(obj: dict[str, Any] | None, ctype: str) -> dict[str, Any]:
    found = conditionlist.find_condition((obj or {}).get("status"), ctype)
    assert found is not None, (ctype, obj)
    return dict(found)


def test_a_successful_run_writes_running_then_successful(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs))
    assert (outcome.failed, outcome.requeue_after, outcome.detail) == (False, 60.0, "successful")
    [request] = runs.requests
    assert "e1" in request.extravars_text and request.envvars["OPERATOR_RUNNER_CR_NAME"] == "e1"
    assert request.playbook.read_text().count("role:") == 1
    statuses = [r.body["status"]["conditions"] for r in writes(api, "/status")]
    running = [c for c in statuses[0] if c["type"] == "Running"]
    assert running[0]["status"] == "True"  # first write: Running
    obj = api.get(REF)
    running_after = condition(obj, "Running")  # as operator-sdk: True, reason Successful
    assert (running_after["status"], running_after["reason"]) == ("True", "Successful")
    ready = condition(obj, "Ready")
    assert (ready["status"], ready["observedGeneration"]) == ("True", 1)
    successful = condition(obj, "Successful")
    assert (successful["status"], successful["reason"]) == ("True", "Successful")
    assert successful["observedGeneration"] == 1
    assert condition(obj, "Running")["ansibleResult"]["ok"] == 3
    assert events(api) == []  # nothing to tell: it did not fail before


def test_the_runs_task_results_go_out_with_the_outcome(tmp_path: Path) -> None:
    """For the per-task metrics: the controller reports them (reconcile and finalizer runs)."""
    done = success()
    task = TaskResult("echo", "Make the pod", "/r/tasks/main.yml:2", "k8s", "changed", 0.3)
    done.summary.task_results.append(task)
    bad = failure("task 'make pod' failed: quota")
    bad.summary.task_results.append(TaskResult("echo", "x", "", "fail", "failed", 0.1))
    api, runs = FakeApi(), FakeRuns(done, bad)
    api.put(REF, echo())
    rec = reconciler(tmp_path, api, runs)
    assert list(reconcile(rec).tasks) == [task]
    assert [t.result for t in reconcile(rec).tasks] == ["failed"]


def test_a_failed_run_writes_failure_and_a_warning_event(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(failure("task 'make pod' failed: quota"))
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs))
    assert outcome.failed and outcome.failed_tasks == 1 and not outcome.errored
    failed = condition(api.get(REF), "Failure")
    assert (failed["status"], failed["reason"]) == ("True", "Failed")
    assert "quota" in failed["message"]
    [event] = events(api)
    assert (event["type"], event["reason"]) == ("Warning", "ReconcileFailed")
    assert "quota" in event["message"]


def test_success_after_a_failure_says_so(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(failure("boom"), success())
    api.put(REF, echo())
    rec = reconciler(tmp_path, api, runs)
    reconcile(rec)
    reconcile(rec)
    assert [e["reason"] for e in events(api)] == ["ReconcileFailed", "Reconciled"]
    assert condition(api.get(REF), "Failure")["status"] == "False"


def test_requeue_after_from_the_role_wins_over_the_period(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success(requeue_after=5.0))
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs))
    assert (outcome.requeue_after, outcome.detail) == (5.0, "requeue_after")


def test_the_finalizer_is_added_on_create(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(REF, echo())
    reconcile(reconciler(tmp_path, api, runs, finalizer=Finalizer(name=FINALIZER)))
    [add] = [r for r in writes(api) if not r.path.endswith("/status")]
    assert add.body["metadata"]["finalizers"] == [FINALIZER]
    obj = api.get(REF)
    assert obj is not None and obj["metadata"]["finalizers"] == [FINALIZER]
    assert runs.requests[0].playbook.name == "main.yml"


def test_deletion_runs_the_finalizer_then_removes_it(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(
        REF, echo(finalizers=[FINALIZER, "other/keep"], deletionTimestamp="2026-12-02T12:00:00Z")
    )
    fin = Finalizer(name=FINALIZER, vars={"cleanup": True})
    outcome = reconcile(reconciler(tmp_path, api, runs, finalizer=fin))
    assert (outcome.failed, outcome.detail) == (False, "finalized")
    [request] = runs.requests
    assert request.playbook.name == "finalizer.yml"
    assert "cleanup" in request.extravars_text
    obj = api.get(REF)
    assert obj is not None and obj["metadata"]["finalizers"] == ["other/keep"]
    assert writes(api, "/status") == []  # no Running on a CR that is going away
    assert [e["reason"] for e in events(api)] == ["Finalized"]


def test_the_cr_is_gone_once_its_last_finalizer_is_removed(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(REF, echo(finalizers=[FINALIZER], deletionTimestamp="2026-12-02T12:00:00Z"))
    reconcile(reconciler(tmp_path, api, runs, finalizer=Finalizer(name=FINALIZER)))
    assert api.get(REF) is None
    outcome = reconcile(reconciler(tmp_path, api, FakeRuns()))
    assert (outcome.forget, outcome.detail) == (True, "gone")


def test_deletion_without_our_finalizer_runs_nothing(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns()
    api.put(REF, echo(finalizers=["other/keep"], deletionTimestamp="2026-12-02T12:00:00Z"))
    outcome = reconcile(reconciler(tmp_path, api, runs, finalizer=Finalizer(name=FINALIZER)))
    assert not outcome.failed and runs.requests == [] and writes(api) == []


def test_an_unchanged_status_is_not_written_again(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    now = datetime.now(UTC)
    already = conditions.running(None, generation=1, now=now)
    api.put(REF, {**echo(), "status": already})
    reconcile(reconciler(tmp_path, api, runs))
    [write] = writes(api, "/status")  # Running was so already: only the outcome is written
    assert {c["type"] for c in write.body["status"]["conditions"]} >= {"Successful"}
    assert condition(api.get(REF), "Successful")["status"] == "True"


def test_no_status_without_manage_status(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(failure("boom"))
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs, manage_status=False))
    assert outcome.failed
    assert writes(api, "/status") == []
    assert [e["reason"] for e in events(api)] == ["ReconcileFailed"]


@pytest.mark.parametrize(
    "annotation",
    [
        {"ansible.sdk.operatorframework.io/verbosity": "loud"},
        {"ansible.sdk.operatorframework.io/max-runner-artifacts": "-1"},
        {"ansible.sdk.operatorframework.io/reconcile-period": "soon"},
    ],
)
def test_a_bad_annotation_is_reported_and_nothing_runs(
    tmp_path: Path, annotation: dict[str, str]
) -> None:
    api, runs = FakeApi(), FakeRuns()
    api.put(REF, echo(annotations=annotation))
    outcome = reconcile(reconciler(tmp_path, api, runs))
    assert outcome.failed and outcome.errored and runs.requests == []
    [key] = annotation
    assert key in condition(api.get(REF), "Failure")["message"]


def test_a_run_without_a_result_is_an_error(tmp_path: Path) -> None:
    broken = RunResult(status="failed", rc=1, summary=RunSummary(), stdout_tail="ERROR! no role")
    api, runs = FakeApi(), FakeRuns(broken)
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs))
    assert outcome.failed and outcome.errored
    assert "no role" in condition(api.get(REF), "Failure")["message"]


def check_reconciler(tmp_path: Path, api: FakeApi, runs: FakeRuns, **watch: Any) -> Reconciler:
    rec = reconciler(tmp_path, api, runs, **watch)
    rec.options = Options(reconcile_period=60.0, ansible_args=("--diff",), check=True)
    return rec


def test_check_mode_runs_the_role_with_check_and_writes_nothing(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(REF, echo())
    rec = check_reconciler(tmp_path, api, runs, finalizer=Finalizer(name=FINALIZER))
    outcome = reconcile(rec)
    assert not outcome.failed and "check mode" in outcome.detail
    [request] = runs.requests
    assert request.cmdline == ("--diff", "--check")
    assert writes(api) == [] and events(api) == []  # no finalizer, no status, no Event


def test_check_mode_failure_writes_nothing_either(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(failure("boom"))
    api.put(REF, echo())
    outcome = reconcile(check_reconciler(tmp_path, api, runs))
    assert outcome.failed and outcome.detail == "boom"
    assert writes(api) == [] and events(api) == []


def test_check_mode_with_a_given_cr_that_is_not_in_the_cluster(tmp_path: Path) -> None:
    api, runs = FakeApi(), FakeRuns(success())  # the API has no object at all
    given = echo()
    given["spec"] = {"command": "echo from the file"}
    outcome = asyncio.run(check_reconciler(tmp_path, api, runs).reconcile(REF, given))
    assert not outcome.failed and not outcome.forget
    assert "echo from the file" in runs.requests[0].extravars_text
    assert runs.requests[0].envvars["OPERATOR_RUNNER_CR_UNSAVED"] == "1"  # for k8s_status
    assert writes(api) == []


def test_the_run_log_line_names_its_artifacts(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, runs = FakeApi(), FakeRuns(success())
    api.put(REF, echo())
    with caplog.at_level("INFO", logger="runner.reconcile"):
        reconcile(reconciler(tmp_path, api, runs))
    [line] = [r for r in caplog.records if r.getMessage().startswith("ran reconcile")]
    where = tmp_path / "artifacts" / "x.example.com" / "v1" / "Echo" / "ns" / "e1" / "artifacts"
    assert f"(artifacts: {where / runs.requests[0].ident})" in line.getMessage()
    assert line.__dict__["artifacts"] == str(where / runs.requests[0].ident)


def test_a_run_that_changed_nothing_is_logged_at_debug(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    idle = success()
    idle.summary.stats = {**STATS, "changed": {}}  # a resync of a healthy CR
    api, runs = FakeApi(), FakeRuns(idle)
    api.put(REF, echo())
    with caplog.at_level("DEBUG", logger="runner.reconcile"):
        reconcile(reconciler(tmp_path, api, runs))
    [line] = [r for r in caplog.records if r.getMessage().startswith("ran reconcile")]
    assert line.levelname == "DEBUG"


def test_task_lines_ok_and_skipped_at_debug_changed_and_failed_at_info(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from runner.ansible.tasklog import log_task_event as _log_event
    from runner.util.redact import SecretValues

    events = [
        ("runner_on_ok", {"task": "a", "res": {"changed": False}}),
        ("runner_on_skipped", {"task": "b"}),
        ("runner_on_ok", {"task": "c", "res": {"changed": True}}),
        ("runner_on_failed", {"task": "d with hunter22"}),
    ]
    request = RunRequest(Path("."), "1", Path("p.yml"), "{}", secrets=SecretValues(["hunter22"]))
    with caplog.at_level("DEBUG", logger="runner.executor"):
        for kind, data in events:
            _log_event({"event": kind, "event_data": data}, request)
    assert [(r.levelname, r.getMessage()) for r in caplog.records] == [
        ("DEBUG", "task ok: a"),
        ("DEBUG", "task skipped: b"),
        ("INFO", "task changed: c"),
        ("WARNING", "task failed: d with ********"),  # a task name templated with a secret
    ]


class SecretRuns(FakeRuns):
    """A run that read a Secret (the proxy adds its values to the request's) and failed
    quoting it."""

    async def run(self, request: RunRequest) -> RunResult:
        request.secrets.add_secret({"kind": "Secret", "stringData": {"pw": "hunter22"}})
        return await super().run(request)


def test_the_secrets_a_run_saw_are_masked_in_its_condition_event_and_outcome(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    api, runs = FakeApi(), SecretRuns(failure("use it: bad password hunter22"))
    api.put(REF, echo())
    outcome = reconcile(reconciler(tmp_path, api, runs))
    masked = "use it: bad password ********"
    assert condition(api.get(REF), "Failure")["message"] == masked
    assert events(api)[-1]["message"] == masked
    assert outcome.detail == masked
    assert "hunter22" not in caplog.text and masked in caplog.text


class SpecChangedDuringRun(FakeRuns):
    """The CR's spec is edited (generation 2) while its generation-1 run is in flight."""

    def __init__(self, api: FakeApi, result: RunResult) -> None:
        super().__init__(result)
        self.api = api

    async def run(self, request: RunRequest) -> RunResult:
        obj = self.api.get(REF)
        assert obj is not None
        self.api.put(REF, {**obj, "metadata": {**obj["metadata"], "generation": 2}})
        return await super().run(request)


@pytest.mark.parametrize("result", [success(), failure("boom")], ids=["success", "failure"])
def test_a_run_reports_the_generation_it_ran_not_one_edited_meanwhile(
    tmp_path: Path, result: RunResult
) -> None:
    """A spec edited during a run is the next run's to report: the result names generation
    1, so Ready is not True for generation 2 (kstatus waits for the follow-up run)."""
    api = FakeApi()
    api.put(REF, echo())
    reconcile(reconciler(tmp_path, api, SpecChangedDuringRun(api, result)))
    obj = api.get(REF)
    assert obj is not None and obj["metadata"]["generation"] == 2
    ctype = "Successful" if result.ok else "Failure"
    assert condition(obj, ctype)["status"] == "True"
    assert condition(obj, ctype)["observedGeneration"] == 1
    assert condition(obj, "Ready")["observedGeneration"] == 1


class Reads:
    """What the reconciler tells the read-following watches (watchReads)."""

    def __init__(self) -> None:
        self.told: list[tuple[str, ObjectRef, bool | None]] = []

    def settle(self, ref: ObjectRef, succeeded: bool) -> None:
        self.told.append(("settle", ref, succeeded))

    def forget(self, ref: ObjectRef) -> None:
        self.told.append(("forget", ref, None))


def test_each_run_settles_what_it_read_and_a_gone_cr_forgets_it(tmp_path: Path) -> None:
    api, reads = FakeApi(), Reads()
    api.put(REF, echo())

    def with_reads(api: FakeApi, runs: FakeRuns) -> Reconciler:
        rec = reconciler(tmp_path, api, runs, watch_reads=(GVK("", "v1", "Secret"),))
        rec.reads = reads
        return rec

    reconcile(with_reads(api, FakeRuns(success())))
    reconcile(with_reads(api, FakeRuns(failure("no password yet"))))
    reconcile(with_reads(FakeApi(), FakeRuns(success())))  # the CR is not there
    assert reads.told == [("settle", REF, True), ("settle", REF, False), ("forget", REF, None)]


def test_a_cr_out_of_the_selector_is_let_go_without_a_run(tmp_path: Path) -> None:
    """The API server's DELETED for a CR that stops matching carries the CR as it was, so the
    controller queues it as a deletion; the CR, read again, no longer matches: nothing runs."""
    api, runs, reads = FakeApi(), FakeRuns(), Reads()
    api.put(REF, echo(labels={"tier": "other"}))
    rec = reconciler(tmp_path, api, runs, selector={"matchLabels": {"tier": "picked"}})
    rec.reads = reads
    outcome = reconcile(rec)
    assert (outcome.forget, outcome.detail) == (True, "out of the watch's selector")
    assert runs.requests == [] and writes(api) == []
    assert reads.told == [("forget", REF, None)]
    api.put(REF, echo(labels={"tier": "picked"}))
    rec.executor = again = FakeRuns(success())
    assert not reconcile(rec).forget and len(again.requests) == 1
