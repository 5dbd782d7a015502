"""runner/convert: ConversionReviews read and answered, answers checked, the field map, and the
flow of a convert role (with a fake executor; tests/integration/test_conversion.py runs the real
one against a real API server)."""

from __future__ import annotations

import asyncio
import copy
import json
import logging
from pathlib import Path
from typing import Any

import pytest
import yaml

from runner.ansible.interface import QuickRequest, RunResult
from runner.ansible.results import RunSummary
from runner.convert.converter import (
    ANSWERS_ENV,
    CONVERSION_RUNS,
    Conversions,
    Converter,
    ConvertOptions,
)
from runner.convert.fieldmap import convert_fields
from runner.convert.review import ConversionFailed, ReviewError, read_review, settle
from runner.util.redact import SecretValues
from runner.watches import GVK, Convert, FieldMap, Watch

GROUP = "swallowlab.com"
SIZE = FieldMap((("v1alpha1", ("spec", "size")), ("v1beta1", ("spec", "replicas"))))


def flask(
    name: str, version: str = "v1alpha1", uid: str | None = None, **spec: Any
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": "ns", "resourceVersion": "7"}
    if uid is not None:
        meta["uid"] = uid
    return {
        "apiVersion": f"{GROUP}/{version}",
        "kind": "EchoFlask",
        "metadata": meta,
        "spec": spec or {"size": 3, "image": "img"},
        "status": {"nodes": ["a", "b"]},
    }


def review(objects: list[dict[str, Any]], desired: str = "v1beta1") -> dict[str, Any]:
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "request": {"uid": "r-1", "desiredAPIVersion": f"{GROUP}/{desired}", "objects": objects},
    }


# -- the review --------------------------------------------------------------------------------


def test_read_review() -> None:
    request = read_review(review([flask("a", uid="u1")]))
    assert (request.uid, request.group, request.desired_version) == ("r-1", GROUP, "v1beta1")
    assert request.kind == "EchoFlask"
    assert request.versions() == "v1alpha1 -> v1beta1"


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "expected a ConversionReview"),
        ({"kind": "AdmissionReview"}, "expected a ConversionReview"),
        ({"kind": "ConversionReview", "apiVersion": "x/v9"}, "is not known"),
        ({"kind": "ConversionReview", "apiVersion": "apiextensions.k8s.io/v1"}, "no request"),
        ({**review([]), "request": {"desiredAPIVersion": "g/v1"}}, "has no uid"),
        ({**review([]), "request": {"uid": "u"}}, "has no desiredAPIVersion"),
        (
            {**review([]), "request": {"uid": "u", "desiredAPIVersion": "g/v", "objects": {}}},
            "list",
        ),
        (review([flask("a"), {**flask("b"), "kind": "Other"}]), "of one kind and group"),
    ],
)
def test_what_is_no_conversion_review_is_refused(body: Any, message: str) -> None:
    with pytest.raises(ReviewError, match=message):
        read_review(body)


def test_an_empty_review_is_answered_without_a_converter() -> None:
    answer = asyncio.run(Conversions([]).review(review([])))
    assert answer == {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "ConversionReview",
        "response": {"uid": "r-1", "convertedObjects": [], "result": {"status": "Success"}},
    }


def test_a_kind_without_convert_is_a_failed_review() -> None:
    answer = asyncio.run(Conversions([]).review(review([flask("a")])))
    assert answer["response"]["result"]["status"] == "Failure"
    assert (
        "converts no EchoFlask of group swallowlab.com" in answer["response"]["result"]["message"]
    )


# -- answers checked -----------------------------------------------------------------------------


def test_answers_in_any_order_are_matched_by_uid() -> None:
    request = read_review(review([flask("a", uid="u1"), flask("b", uid="u2")]))
    answers = [
        {**flask("b", "v1beta1", uid="u2"), "spec": {"replicas": 2}},
        {**flask("a", "v1beta1", uid="u1"), "spec": {"replicas": 1}},
    ]
    converted = settle(request, answers)
    assert [(o["metadata"]["name"], o["spec"]) for o in converted] == [
        ("a", {"replicas": 1}),
        ("b", {"replicas": 2}),
    ]


def test_without_uids_by_name_and_without_names_by_position() -> None:
    request = read_review(review([flask("a"), flask("b")]))
    converted = settle(request, [flask("b"), flask("a")])
    assert [o["metadata"]["name"] for o in converted] == ["a", "b"]
    nameless = [{**flask("x"), "metadata": {"generateName": "x-"}} for _ in range(2)]
    request = read_review(review(nameless))
    answers = [{**o, "spec": {"replicas": i}} for i, o in enumerate(nameless)]
    assert [o["spec"] for o in settle(request, answers)] == [{"replicas": 0}, {"replicas": 1}]
    with pytest.raises(ConversionFailed, match="answered 1 objects for 2"):
        settle(request, answers[:1])


def test_the_answer_keeps_metadata_but_labels_and_annotations_and_gets_the_version() -> None:
    original = flask("a", uid="u1")
    original["metadata"]["labels"] = {"old": "1"}
    request = read_review(review([original]))
    changed = copy.deepcopy(original)
    changed["metadata"].update(labels={"new": "2"}, annotations={"n": "x"}, resourceVersion="99")
    changed["kind"] = "Other"
    [converted] = settle(request, [changed])
    assert converted["apiVersion"] == f"{GROUP}/v1beta1"
    assert converted["kind"] == "EchoFlask"
    assert converted["metadata"] == {
        **original["metadata"],
        "labels": {"new": "2"},
        "annotations": {"n": "x"},
    }
    changed["metadata"]["labels"] = ["not", "a", "mapping"]
    with pytest.raises(ConversionFailed, match=r"metadata\.labels must be a mapping"):
        settle(request, [changed])


@pytest.mark.parametrize(
    ("answers", "message"),
    [
        ([], "no answer for EchoFlask ns/a, EchoFlask ns/b"),
        ([flask("a", uid="u1")], "no answer for EchoFlask ns/b"),
        ([flask("a", uid="u1"), flask("a", uid="u1")], "answered EchoFlask ns/a twice"),
        ([flask("c", uid="u3")], "answered EchoFlask ns/c, which was not asked for"),
        (["text"], "answered str where an object belongs"),
    ],
)
def test_wrong_answers_fail_with_what_is_wrong(answers: list[Any], message: str) -> None:
    request = read_review(review([flask("a", uid="u1"), flask("b", uid="u2")]))
    with pytest.raises(ConversionFailed, match=message):
        settle(request, answers)


# -- the field map -------------------------------------------------------------------------------


def test_fields_rename_both_ways_and_keep_everything_else() -> None:
    old = flask("a", uid="u1")
    new = convert_fields(old, f"{GROUP}/v1beta1", [SIZE])
    assert new["apiVersion"] == f"{GROUP}/v1beta1"
    assert new["spec"] == {"replicas": 3, "image": "img"}
    assert new["status"] == old["status"] and new["metadata"] == old["metadata"]
    assert old["spec"] == {"size": 3, "image": "img"}, "the original is not changed"
    assert convert_fields(new, f"{GROUP}/v1alpha1", [SIZE])["spec"] == old["spec"]


def test_fields_swap_move_deep_and_leave_what_is_absent() -> None:
    swap = [
        FieldMap((("v1", ("spec", "a")), ("v2", ("spec", "b")))),
        FieldMap((("v1", ("spec", "b")), ("v2", ("spec", "a")))),
        FieldMap((("v1", ("spec", "deep", "x")), ("v2", ("status", "x")))),
        FieldMap((("v1", ("spec", "gone")), ("v2", ("spec", "there")))),
        FieldMap((("v1", ("spec", "keep")), ("v3", ("spec", "k")))),  # no v2 path: stays
    ]
    obj = {"apiVersion": "g/v1", "kind": "K", "metadata": {"name": "n"}}
    obj["spec"] = {"a": 1, "b": 2, "deep": {"x": 3}, "keep": 4}
    converted = convert_fields(obj, "g/v2", swap)
    assert converted["spec"] == {"a": 2, "b": 1, "keep": 4}, "emptied parents go, spec stays"
    assert converted["status"] == {"x": 3}
    assert convert_fields(converted, "g/v1", swap)["spec"] == obj["spec"]


def test_fields_converter_answers_a_review_of_mixed_versions() -> None:
    watch = Watch(GVK(GROUP, "v1alpha1", "EchoFlask"), role="/r", convert=Convert(fields=(SIZE,)))
    conversions = Conversions([Converter(watch)])
    objects = [flask("a", uid="u1"), {**flask("b", "v1beta1", uid="u2"), "spec": {"replicas": 5}}]
    answer = asyncio.run(conversions.review(review(objects, desired="v1alpha1")))
    converted = answer["response"]["convertedObjects"]
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["spec"] for o in converted] == [{"size": 3, "image": "img"}, {"size": 5}]
    assert {o["apiVersion"] for o in converted} == {f"{GROUP}/v1alpha1"}


# -- a convert role ------------------------------------------------------------------------------


class AnsweringRuns:
    """Stands in for the executor's quick runs: records each request and answers as the role
    would, through the file named in the run's environment (what operator_sdk.util.conversion
    writes)."""

    def __init__(self, result: RunResult, convert: Any = None) -> None:
        self.result = result
        self.convert = convert
        self.requests: list[QuickRequest] = []
        self.answer_files: list[Path] = []

    async def run_quick(self, request: QuickRequest) -> RunResult:
        self.requests.append(request)
        path = Path(request.envvars[ANSWERS_ENV])
        self.answer_files.append(path)
        if self.convert is not None:
            variables = yaml.safe_load(request.extravars_text.replace("!unsafe ", ""))
            objects = [self.convert(o, variables) for o in variables["conversion"]["objects"]]
            with path.open("a", encoding="utf-8") as answers:
                answers.write(json.dumps({"objects": objects}) + "\n")
        return self.result


def ok() -> RunResult:
    stats = {"ok": {"localhost": 1}, "failures": {}}
    return RunResult("successful", 0, RunSummary(stats=stats, tasks=1))


def rename(obj: dict[str, Any], variables: dict[str, Any]) -> dict[str, Any]:
    spec = dict(obj["spec"])
    spec["replicas"] = spec.pop("size")
    return {**obj, "apiVersion": variables["conversion"]["desired_api_version"], "spec": spec}


def flask_watch(tmp_path: Path) -> Watch:
    return Watch(
        GVK(GROUP, "v1alpha1", "EchoFlask"),
        role="/r",
        vars={"from_watch": 1},
        convert=Convert(role=str(tmp_path / "roles" / "flask_convert"), vars={"from_convert": 2}),
    )


def role_converter(tmp_path: Path, runs: Any, **options: Any) -> Conversions:
    return Conversions.of([flask_watch(tmp_path)], runs, ConvertOptions(**options))


def test_a_convert_role_gets_the_objects_and_answers_through_a_file(tmp_path: Path) -> None:
    runs = AnsweringRuns(ok(), rename)
    conversions = role_converter(tmp_path, runs)
    objects = [flask("a", uid="u1"), flask("b", uid="u2")]
    answer = asyncio.run(conversions.review(review(objects)))
    assert answer["response"]["result"] == {"status": "Success"}
    assert [o["spec"]["replicas"] for o in answer["response"]["convertedObjects"]] == [3, 3]
    [request] = runs.requests
    variables = yaml.safe_load(request.extravars_text.replace("!unsafe ", ""))
    assert variables["conversion"] == {
        "uid": "r-1",
        "desired_api_version": f"{GROUP}/v1beta1",
        "desired_version": "v1beta1",
        "objects": objects,
    }
    assert (variables["from_watch"], variables["from_convert"]) == (1, 2)
    assert '!unsafe "EchoFlask"' in request.extravars_text, "the objects' strings are marked"
    playbook = request.playbook.read_text()
    assert "gather_facts: false" in playbook and str(tmp_path / "roles/flask_convert") in playbook
    folder = request.playbook.parent
    assert folder.name.startswith("operator-runner-conversion-")
    assert not runs.answer_files[0].exists(), "the answers' file goes with the review"
    conversions.close()
    assert not folder.exists()


def test_reviews_at_once_answer_in_files_of_their_own(tmp_path: Path) -> None:
    class Slow(AnsweringRuns):
        async def run_quick(self, request: QuickRequest) -> RunResult:
            await asyncio.sleep(0)  # the other review starts meanwhile
            return await super().run_quick(request)

    runs = Slow(ok(), rename)
    conversions = role_converter(tmp_path, runs)

    async def both() -> list[dict[str, Any]]:
        return await asyncio.gather(
            conversions.review(review([flask("a", uid="u1")])),
            conversions.review(review([flask("b", uid="u2")])),
        )

    answers = asyncio.run(both())
    assert [a["response"]["convertedObjects"][0]["metadata"]["name"] for a in answers] == ["a", "b"]
    assert len(set(runs.answer_files)) == 2
    conversions.close()


def test_a_burst_of_reviews_runs_at_most_conversion_runs_at_once(tmp_path: Path) -> None:
    class Gated(AnsweringRuns):
        running = most = 0
        gate: asyncio.Event

        async def run_quick(self, request: QuickRequest) -> RunResult:
            self.running += 1
            self.most = max(self.most, self.running)
            await self.gate.wait()
            self.running -= 1
            return await super().run_quick(request)

    runs = Gated(ok(), rename)
    conversions = role_converter(tmp_path, runs)

    async def burst() -> list[dict[str, Any]]:
        runs.gate = asyncio.Event()
        reviews = [
            asyncio.ensure_future(conversions.review(review([flask(f"f{i}", uid=f"u{i}")])))
            for i in range(3 * CONVERSION_RUNS)
        ]
        while runs.running < CONVERSION_RUNS:  # the first ones start; the others queue
            await asyncio.sleep(0)
        for _ in range(10):
            await asyncio.sleep(0)
        assert runs.running == CONVERSION_RUNS
        runs.gate.set()
        return await asyncio.gather(*reviews)

    answers = asyncio.run(burst())
    assert runs.most == CONVERSION_RUNS and len(runs.requests) == 3 * CONVERSION_RUNS
    assert all(a["response"]["result"] == {"status": "Success"} for a in answers)
    conversions.close()


def test_a_run_that_does_not_end_in_time_fails_the_review(tmp_path: Path) -> None:
    class Hanging(AnsweringRuns):
        cancelled = False

        async def run_quick(self, request: QuickRequest) -> RunResult:
            try:
                await asyncio.Event().wait()
            except asyncio.CancelledError:
                Hanging.cancelled = True
                raise
            raise AssertionError("unreachable")

    conversions = role_converter(tmp_path, Hanging(ok()), timeout=0.05)
    answer = asyncio.run(conversions.review(review([flask("a", uid="u1")])))
    assert answer["response"]["result"]["message"] == (
        "convert role flask_convert failed: did not finish in 0.05 s"
    )
    assert Hanging.cancelled, "the run is stopped"
    conversions.close()


@pytest.mark.parametrize(("api", "expected"), [(None, 25.0), (30.0, 25.0), (10.0, 9.0), (1, 1.0)])
def test_the_api_servers_timeout_bounds_the_run(
    tmp_path: Path, api: float | None, expected: float
) -> None:
    limits: list[float] = []

    async def wait_for(awaitable: Any, limit: float) -> Any:
        limits.append(limit)
        return await awaitable

    conversions = role_converter(tmp_path, AnsweringRuns(ok(), rename))
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr("runner.convert.converter.asyncio.wait_for", wait_for)
        asyncio.run(conversions.review(review([flask("a", uid="u1")]), timeout=api))
    assert limits == [expected]
    conversions.close()


@pytest.mark.parametrize(
    ("result", "message"),
    [
        (
            RunResult(
                "failed",
                2,
                RunSummary(stats={"failures": {"localhost": 1}}, failures=["Check: size is odd"]),
            ),
            "convert role flask_convert failed: Check: size is odd",
        ),
        (RunResult("failed", 1, RunSummary(), stdout_tail="boom"), "ended without a result (st"),
        (ok(), "convert role flask_convert failed: no answer for EchoFlask ns/a"),
    ],
)
def test_a_failed_run_fails_the_review_with_its_message(
    tmp_path: Path, result: RunResult, message: str
) -> None:
    conversions = role_converter(tmp_path, AnsweringRuns(result))
    answer = asyncio.run(conversions.review(review([flask("a", uid="u1")])))
    assert answer["response"]["result"]["status"] == "Failure"
    assert message in answer["response"]["result"]["message"]
    assert answer["response"]["convertedObjects"] == []
    conversions.close()


def test_a_failure_masks_the_values_of_secrets_the_runs_read(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    failed = RunResult(
        "failed",
        2,
        RunSummary(stats={"failures": {"localhost": 1}}, failures=["Check: key s3cr3t-key"]),
    )
    secrets = SecretValues(["s3cr3t-key"])
    conversions = role_converter(tmp_path, AnsweringRuns(failed), secrets=secrets)
    with caplog.at_level(logging.WARNING, logger="runner"):
        answer = asyncio.run(conversions.review(review([flask("a", uid="u1")])))
    assert answer["response"]["result"]["message"].endswith("failed: Check: key ********")
    assert "s3cr3t" not in caplog.text and "Check: key ********" in caplog.text
    conversions.close()


def test_only_a_convert_by_ansible_gets_a_folder(tmp_path: Path) -> None:
    fields = Watch(GVK(GROUP, "v1", "K"), role="/r", convert=Convert(fields=(SIZE,)))
    plain = Watch(GVK(GROUP, "v1", "Other"), role="/r")
    conversions = Conversions.of([fields, plain], AnsweringRuns(ok()))
    assert conversions.kinds == [(GROUP, "K")]
    assert conversions._folder is None
    assert not Conversions.of([plain], AnsweringRuns(ok()))


def test_a_convert_role_needs_an_executor() -> None:
    watch = Watch(GVK(GROUP, "v1", "K"), role="/r", convert=Convert(role="/c"))
    with pytest.raises(ValueError, match="needs an executor and a folder"):
        Converter(watch)
