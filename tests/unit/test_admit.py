"""The admission flow (runner/admit): reviews, extra vars, verdicts, deadlines, configurations."""

from __future__ import annotations

import asyncio
import base64
import json
import logging
from pathlib import Path
from typing import Any

import fake_api
import pytest
import yaml

from runner.admit import configurations
from runner.admit.admitter import Admitter, RunSettings, margin
from runner.admit.jsonpatch import diff
from runner.admit.requestvars import admission_extra_vars
from runner.admit.review import AdmissionRequest, ReviewError, Verdict, answer
from runner.admit.verdicts import verdict
from runner.ansible.interface import QuickRequest, RunResult
from runner.ansible.results import RunSummary
from runner.reconcile.extravars import UnsafeText
from runner.util.redact import SecretValues
from runner.watches import GVK, Admission, Watch

GVK_ = GVK("swallowlab.com", "v1alpha1", "EchoFlask")
FLASK: dict[str, Any] = {
    "apiVersion": "swallowlab.com/v1alpha1",
    "kind": "EchoFlask",
    "metadata": {"name": "ef", "namespace": "ns", "labels": {"a": "b"}},
    "spec": {"size": 3, "imageName": "{{ lookup('pipe', 'id') }}"},
}


def review(operation: str = "CREATE", **request: Any) -> dict[str, Any]:
    body = {
        "uid": "u-1",
        "kind": {"group": GVK_.group, "version": GVK_.version, "kind": GVK_.kind},
        "resource": {"group": GVK_.group, "version": GVK_.version, "resource": "echoflasks"},
        "name": "ef",
        "namespace": "ns",
        "operation": operation,
        "userInfo": {"username": "alice", "groups": ["devs"]},
        "object": FLASK,
        "oldObject": None,
        "dryRun": False,
        **request,
    }
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": body}


def watch(validate: Admission | None = None, mutate: Admission | None = None) -> Watch:
    return Watch(
        GVK_, role="/roles/echoflask", vars={"from_watch": 1}, validate=validate, mutate=mutate
    )


# -- reviews --------------------------------------------------------------------------------


def test_a_review_read_and_answered() -> None:
    request = AdmissionRequest.read(review(dryRun=True))
    assert (request.uid, request.operation, request.dry_run) == ("u-1", "CREATE", True)
    assert request.describe() == "EchoFlask ns/ef"
    denied = answer(request, Verdict(False, "the name is taken", ("careful",)))
    assert denied == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u-1",
            "allowed": False,
            "status": {"code": 403, "message": "the name is taken", "reason": "Forbidden"},
            "warnings": ["careful"],
        },
    }
    patch = [{"op": "add", "path": "/metadata/labels/team", "value": "blue"}]
    allowed = answer(request, Verdict(True, patch=patch))["response"]
    assert allowed["patchType"] == "JSONPatch"
    assert json.loads(base64.b64decode(allowed["patch"])) == patch
    with pytest.raises(ReviewError):
        AdmissionRequest.read({"kind": "ConversionReview", "request": {"uid": "x"}})
    with pytest.raises(ReviewError):
        AdmissionRequest.read({"kind": "AdmissionReview", "request": {}})


def test_a_delete_is_about_the_old_object_and_a_generate_name_is_shown() -> None:
    request = AdmissionRequest.read(review("DELETE", object=None, oldObject=FLASK))
    assert request.subject == FLASK
    unnamed = {**FLASK, "metadata": {"generateName": "ef-", "namespace": "ns"}}
    assert AdmissionRequest.read(review(name="", object=unnamed)).describe() == "EchoFlask ns/ef-*"


def test_json_patch() -> None:
    old = {"metadata": {"labels": {"a": "b", "x/y": "1"}}, "spec": {"n": 1, "l": [1, 2]}}
    new = {"metadata": {"labels": {"a": "c", "team": "blue"}}, "spec": {"n": 1.0, "l": [1]}}
    assert diff(old, new) == [
        {"op": "remove", "path": "/metadata/labels/x~1y"},
        {"op": "replace", "path": "/metadata/labels/a", "value": "c"},
        {"op": "add", "path": "/metadata/labels/team", "value": "blue"},
        {"op": "replace", "path": "/spec/n", "value": 1.0},
        {"op": "replace", "path": "/spec/l", "value": [1]},
    ]
    assert diff(old, old) == []


# -- extra vars -----------------------------------------------------------------------------


def test_extra_vars_are_a_reconciles_plus_the_request_marked_unsafe() -> None:
    hook = Admission(role="/roles/v", vars={"strict": True, "from_watch": 2})
    request = AdmissionRequest.read(review("UPDATE", oldObject=FLASK))
    extra = admission_extra_vars(request, watch(validate=hook), hook)
    assert extra["size"] == 3 and extra["image_name"] == FLASK["spec"]["imageName"]
    assert extra["ansible_operator_meta"] == {"name": "ef", "namespace": "ns"}
    assert extra["_swallowlab_com_echoflask"] == FLASK
    assert extra["from_watch"] == 2 and extra["strict"] is True  # the hook's vars last
    admission = extra["admission"]
    assert admission["operation"] == "UPDATE" and admission["dry_run"] is False
    assert admission["user_info"] == {"username": "alice", "groups": ["devs"]}
    assert admission["old_object"] == FLASK and admission["sub_resource"] == ""
    assert isinstance(admission["object"]["spec"]["imageName"], UnsafeText)
    assert isinstance(admission["user_info"]["username"], UnsafeText)


# -- verdicts -------------------------------------------------------------------------------


def result(
    *answers: dict[str, Any], failures: tuple[str, ...] = (), finished: bool = True
) -> RunResult:
    summary = RunSummary(stats={} if finished else None)
    summary.failures += failures
    summary.answers += answers
    return RunResult("successful" if finished and not failures else "failed", 0, summary)


def test_verdicts() -> None:
    request = AdmissionRequest.read(review())
    assert verdict(result(), request, mutate=False) == Verdict(True)
    assert verdict(result(finished=False), request, mutate=False) is None
    failed = verdict(result(failures=("Check: Deployment ef-deployment is taken",)), request, False)
    assert failed == Verdict(False, "Check: Deployment ef-deployment is taken")
    denied = verdict(
        result(
            {"allowed": True, "warnings": ["w1"]},
            {"allowed": False, "message": "no", "warnings": ["w2"]},
            {"allowed": False, "message": "never"},
        ),
        request,
        mutate=False,
    )
    assert denied == Verdict(False, "no; never", ("w1", "w2"))
    labelled = {**FLASK, "metadata": {**FLASK["metadata"], "labels": {"a": "b", "team": "blue"}}}
    mutated = verdict(result({"allowed": True, "object": labelled}), request, mutate=True)
    assert mutated == Verdict(
        True, patch=({"op": "add", "path": "/metadata/labels/team", "value": "blue"},)
    )
    ignored = verdict(result({"object": labelled}), request, mutate=False)
    assert ignored == Verdict(True)  # a validate run changes nothing


# -- the flow -------------------------------------------------------------------------------


class FakeRuns:
    def __init__(self, answer: RunResult | None = None, delay: float = 0.0) -> None:
        self.answer = answer or result()
        self.delay = delay
        self.requests: list[QuickRequest] = []
        self.prepared: list[QuickRequest] = []
        self.cancelled = 0

    async def prepare_quick(self, request: QuickRequest) -> bool:
        self.prepared.append(request)
        return True

    async def run_quick(self, request: QuickRequest) -> RunResult:
        self.requests.append(request)
        try:
            await asyncio.sleep(self.delay)
        except asyncio.CancelledError:
            self.cancelled += 1
            raise
        return self.answer


def admitter(runs: FakeRuns, hook: Admission, kind: str = "validate") -> Admitter:
    settings = RunSettings(Path("/p/validate.yml"), {"KUBECONFIG": "/k"}, ("--tags", "x"))
    w = watch(validate=hook) if kind == "validate" else watch(mutate=hook)
    return Admitter(w, kind, runs, settings, asyncio.Semaphore(2))


def test_a_review_runs_the_role_with_its_vars_and_answers() -> None:
    runs = FakeRuns(result({"allowed": False, "message": "taken"}))
    answered = asyncio.run(admitter(runs, Admission(role="/r")).review(review()))
    assert answered["response"]["allowed"] is False
    assert answered["response"]["status"]["message"] == "taken"
    (sent,) = runs.requests
    assert sent.playbook == Path("/p/validate.yml") and sent.cmdline == ("--tags", "x")
    assert sent.envvars == {"KUBECONFIG": "/k"}

    class Loader(yaml.SafeLoader):
        pass

    Loader.add_constructor("!unsafe", lambda load, node: load.construct_scalar(node))  # type: ignore[arg-type]
    extra = yaml.load(sent.extravars_text, Loader=Loader)
    assert extra["admission"]["name"] == "ef" and extra["size"] == 3
    assert "!unsafe" in sent.extravars_text  # markUnsafe: the CR's Jinja stays text


@pytest.mark.parametrize(
    ("policy", "allowed", "wanted"),
    [
        ("Fail", False, "validation of EchoFlask ns/ef did not finish in 2 s (failurePolicy Fail)"),
        ("Ignore", True, "validation of EchoFlask ns/ef did not finish in 2 s; allowed"),
    ],
)
def test_a_late_run_is_cancelled_and_answered_per_failure_policy(
    policy: str, allowed: bool, wanted: str
) -> None:
    runs = FakeRuns(delay=30)
    hook = Admission(role="/r", failure_policy=policy, timeout_seconds=5)

    async def go() -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        started = loop.time()
        answered = await admitter(runs, hook).review({**review(), "_timeout": 2.0})
        assert loop.time() - started == pytest.approx(2.0 - margin(2.0))
        return answered

    response = fake_api.run(go())["response"]  # virtual time: no real wait
    assert response["allowed"] is allowed and runs.cancelled == 1
    text = response["warnings"][0] if allowed else response["status"]["message"]
    assert text.startswith(wanted), text


def test_a_run_without_a_result_is_answered_per_failure_policy() -> None:
    runs = FakeRuns(result(finished=False))
    fail = asyncio.run(admitter(runs, Admission(role="/r")).review(review()))["response"]
    assert not fail["allowed"] and "ended without a result" in fail["status"]["message"]
    ignore = Admission(role="/r", failure_policy="Ignore")
    allowed = asyncio.run(admitter(runs, ignore, "mutate").review(review()))["response"]
    assert allowed["allowed"] and "mutation of EchoFlask ns/ef ended" in allowed["warnings"][0]


def test_the_values_of_secrets_the_runs_read_are_masked_in_answers_and_logs(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """What the read-only proxy saw of Secrets (SecretValues) never reaches kubectl or the
    operator's log: a failed task's message, an answer's message and warnings."""
    secrets = SecretValues(["hunter2-password"])
    settings = RunSettings(Path("/p/validate.yml"), {}, secrets=secrets)
    failing = FakeRuns(result(failures=("Check: hunter2-password is weak",)))
    checker = Admitter(
        watch(validate=Admission(role="/r")), "validate", failing, settings, asyncio.Semaphore(1)
    )
    with caplog.at_level(logging.DEBUG, logger="runner"):
        response = asyncio.run(checker.review(review()))["response"]
    assert response["status"]["message"] == "Check: ******** is weak"
    answering = FakeRuns(
        result(
            {"allowed": False, "message": "hunter2-password", "warnings": ["w hunter2-password"]}
        )
    )
    checker = Admitter(
        watch(validate=Admission(role="/r")), "validate", answering, settings, asyncio.Semaphore(1)
    )
    with caplog.at_level(logging.DEBUG, logger="runner"):
        response = asyncio.run(checker.review(review()))["response"]
    assert response["status"]["message"] == "********" and response["warnings"] == ["w ********"]
    assert "hunter2" not in caplog.text and "denied: ********" in caplog.text


def test_the_margin_before_the_api_servers_timeout() -> None:
    assert margin(10) == 1.0 and margin(1) == 0.25 and margin(30) == 1.0


# -- configurations -------------------------------------------------------------------------


def test_webhook_entries() -> None:
    validate = Admission(role="/r", failure_policy="Ignore", timeout_seconds=3)
    w = Watch(GVK_, role="/r", selector={"matchLabels": {"tier": "web"}}, validate=validate)
    plain = watch()
    entries = configurations.webhooks(
        [w, plain],
        "validate",
        {GVK_: "echoflasks"},
        lambda path: {"url": f"https://127.0.0.1:9443{path}"},
        namespaces=["b", "a"],
        username="system:serviceaccount:ops:manager",
    )
    assert entries == [
        {
            "name": "validate.echoflask.swallowlab.com",
            "admissionReviewVersions": ["v1"],
            "sideEffects": "None",
            "failurePolicy": "Ignore",
            "timeoutSeconds": 3,
            "matchPolicy": "Equivalent",
            "clientConfig": {
                "url": "https://127.0.0.1:9443/validate-swallowlab-com-v1alpha1-echoflask"
            },
            "rules": [
                {
                    "apiGroups": ["swallowlab.com"],
                    "apiVersions": ["v1alpha1"],
                    "operations": ["CREATE", "UPDATE"],
                    "resources": ["echoflasks"],
                    "scope": "*",
                }
            ],
            "namespaceSelector": {
                "matchExpressions": [
                    {"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["a", "b"]}
                ]
            },
            "objectSelector": {"matchLabels": {"tier": "web"}},
            "matchConditions": [
                {
                    "name": "not-the-operator",
                    "expression": "request.userInfo.username != "
                    '"system:serviceaccount:ops:manager"',
                }
            ],
        }
    ]
    mutate = Watch(GVK("", "v1", "ConfigMap"), role="/r", mutate=Admission(role="/m"))
    (entry,) = configurations.webhooks(
        [mutate], "mutate", {mutate.gvk: "configmaps"}, lambda p: {"url": p}
    )
    assert entry["name"] == "mutate.configmap.core" and entry["reinvocationPolicy"] == "Never"
    assert entry["clientConfig"] == {"url": "/mutate-core-v1-configmap"}
    assert "matchConditions" not in entry and "namespaceSelector" not in entry


def test_a_finalizer_only_update_is_allowed_without_a_run() -> None:
    old = {**FLASK, "metadata": {**FLASK["metadata"], "resourceVersion": "1"}}
    new = {**FLASK, "metadata": {**old["metadata"], "finalizers": ["f"], "resourceVersion": "2"}}
    runs = FakeRuns(result({"allowed": False, "message": "no"}))
    body = review("UPDATE", object=new, oldObject=old)
    assert asyncio.run(admitter(runs, Admission(role="/r")).review(body))["response"]["allowed"]
    assert runs.requests == []
    labelled = {**new, "metadata": {**new["metadata"], "labels": {"x": "y"}}}
    body = review("UPDATE", object=labelled, oldObject=old)
    assert not asyncio.run(admitter(runs, Admission(role="/r")).review(body))["response"]["allowed"]
    assert len(runs.requests) == 1


def test_an_admitter_gets_a_run_ready_before_the_first_review() -> None:
    runs = FakeRuns()
    assert asyncio.run(admitter(runs, Admission(role="/r")).prepare())
    (ready,) = runs.prepared
    assert ready.playbook == Path("/p/validate.yml") and ready.envvars == {"KUBECONFIG": "/k"}
