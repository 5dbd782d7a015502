"""The redactor (runner/util/redact.py) and what the proxy collects (dependents/secretdata.py)."""

from __future__ import annotations

import base64
import json

import pytest

from runner.ansible.results import failure_message
from runner.dependents import secretdata
from runner.util.redact import MASK, SecretValues, mask_secret_objects, mask_secret_text


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def test_a_value_is_masked_in_each_of_its_forms() -> None:
    value = 's3cr"et\nline-two'
    values = SecretValues([value])
    text = " ".join(
        ["plain", value, "json", json.dumps(value), "repr", repr(value), "base64", _b64(value)]
    )
    redacted = values.redact(text + " one line: line-two.")
    assert "s3cr" not in redacted and "line-two" not in redacted
    assert redacted.startswith("plain ******** json") and "base64 ********" in redacted


def test_short_values_are_not_collected() -> None:
    values = SecretValues(["abc", "v", ""])
    assert len(values) == 0
    assert values.redact("abc v") == "abc v"
    values.add_secret({"data": {"k": _b64("no")}, "stringData": {"s": "yes"}})
    assert len(values) == 0


def test_the_longest_value_wins_where_values_overlap() -> None:
    values = SecretValues(["pass", "password123"])
    assert values.redact("x password123 pass") == f"x {MASK} {MASK}"


def test_a_secrets_data_and_string_data_are_collected() -> None:
    values = SecretValues()
    values.add_secret(
        {"kind": "Secret", "data": {"a": _b64("from-data")}, "stringData": {"b": "given"}}
    )
    text = f"from-data {_b64('from-data')} given {_b64('given')} other"
    assert values.redact(text) == f"{MASK} {MASK} {MASK} {MASK} other"


def test_binary_data_is_masked_as_base64_only() -> None:
    raw = base64.b64encode(bytes(range(250, 256))).decode()
    values = SecretValues()
    values.add_secret({"data": {"bin": raw}})
    assert values.redact(f"<{raw}>") == f"<{MASK}>"


@pytest.mark.parametrize(
    "text",
    [
        '{"kind": "Secret", "metadata": {"name": "x"}, "data": {"pw": "aHVudGVyMg=="}}',
        "{'apiVersion': 'v1', 'kind': 'Secret', 'stringData': {'pw': 'hunter2'}}",
    ],
)
def test_a_secret_written_out_in_a_text_is_masked_without_knowing_its_values(text: str) -> None:
    masked = mask_secret_text(text)
    assert "hunter2" not in masked and "aHVudGVyMg==" not in masked
    assert "pw" in masked and MASK in masked and "Secret" in masked


def test_data_of_other_kinds_is_left_alone() -> None:
    text = '{"kind": "ConfigMap", "data": {"color": "blue"}}'
    assert mask_secret_text(text) == text
    assert mask_secret_objects(json.loads(text)) == json.loads(text)


def test_secret_objects_in_a_result_are_masked_at_any_depth() -> None:
    res = {"result": {"items": [{"kind": "Secret", "data": {"k": "dmFsdWU="}, "type": "Opaque"}]}}
    masked = mask_secret_objects(res)
    assert masked["result"]["items"][0] == {"kind": "Secret", "data": {"k": MASK}, "type": "Opaque"}
    assert res["result"]["items"][0]["data"] == {"k": "dmFsdWU="}  # a copy


def test_a_failure_that_echoes_a_secret_definition_is_masked() -> None:
    definition = {"kind": "Secret", "stringData": {"pw": "hunter2"}}
    message = failure_message({"task": "make it", "res": {"msg": f"bad object {definition}"}})
    assert message.startswith("make it: bad object") and "hunter2" not in message


def test_a_no_log_failure_says_its_output_is_hidden() -> None:
    censored = "the output has been hidden due to the fact that 'no_log: true' was specified"
    message = failure_message({"task": "log in", "res": {"censored": censored, "changed": False}})
    assert message == f"log in: {censored}"


def test_secrets_paths() -> None:
    assert secretdata.is_secrets_path("/api/v1/namespaces/ns/secrets")
    assert secretdata.is_secrets_path("/api/v1/namespaces/ns/secrets/s?resourceVersion=1")
    assert secretdata.is_secrets_path("/api/v1/secrets")
    assert secretdata.is_secrets_path("/api/v1/watch/namespaces/ns/secrets")
    assert not secretdata.is_secrets_path("/api/v1/namespaces/ns/configmaps/secrets")
    assert not secretdata.is_secrets_path("/apis/example.com/v1/namespaces/ns/secrets")
    assert not secretdata.is_secrets_path("/api/v1/namespaces/secrets")


def test_a_list_and_a_table_are_collected() -> None:
    values = SecretValues()
    secretdata.collect(
        {
            "kind": "SecretList",
            "items": [{"metadata": {"name": "a"}, "data": {"k": _b64("first-value")}}],
        },
        values,
    )
    secretdata.collect(
        {
            "kind": "Table",
            "rows": [{"object": {"kind": "Secret", "data": {"k": _b64("row-value")}}}],
        },
        values,
    )
    assert values.redact("first-value row-value") == f"{MASK} {MASK}"


@pytest.mark.parametrize(
    ("body", "content_type"),
    [
        (b'{"kind":"Secret","stringData":{"k":"written-value"}}', "application/json"),
        (b'{"stringData":{"k":"written-value"}}', "application/merge-patch+json"),
        (b"kind: Secret\nstringData:\n  k: written-value\n", "application/apply-patch+yaml"),
        (
            b'[{"op":"add","path":"/stringData/k","value":"written-value"}]',
            "application/json-patch+json",
        ),
        (
            b'[{"op":"replace","path":"/data","value":{"k":"'
            + _b64("written-value").encode()
            + b'"}}]',
            "application/json-patch+json",
        ),
        (
            b'[{"op":"add","path":"/data/k","value":"' + _b64("written-value").encode() + b'"}]',
            "application/json-patch+json",
        ),
    ],
)
def test_a_writes_body_is_collected(body: bytes, content_type: str) -> None:
    values = SecretValues()
    secretdata.collect_request(body, content_type, values)
    assert values.redact("x written-value") == f"x {MASK}"


def test_a_bad_body_collects_nothing() -> None:
    values = SecretValues()
    secretdata.collect_request(b"{not json", "application/json", values)
    secretdata.collect_request(b"a: [", "application/apply-patch+yaml", values)
    assert len(values) == 0


def test_a_watch_stream_is_collected_event_by_event_across_chunks() -> None:
    values = SecretValues()
    scanner = secretdata.StreamScanner(values)
    first = json.dumps(
        {"type": "ADDED", "object": {"kind": "Secret", "data": {"k": _b64("one-value")}}}
    )
    second = json.dumps(
        {"type": "MODIFIED", "object": {"kind": "Secret", "stringData": {"k": "two-value"}}}
    )
    stream = (first + "\n" + second + "\n").encode()
    scanner.feed(stream[:10])
    assert len(values) == 0
    scanner.feed(stream[10 : len(first) + 5])
    assert values.redact("one-value") == MASK  # whole as soon as its line ends
    scanner.feed(stream[len(first) + 5 :])
    scanner.close()
    assert values.redact("two-value") == MASK


def test_a_document_on_several_lines_is_read_at_the_end() -> None:
    values = SecretValues()
    scanner = secretdata.StreamScanner(values)
    scanner.feed(
        json.dumps({"kind": "Secret", "data": {"k": _b64("pretty-value")}}, indent=2).encode()
    )
    scanner.close()
    assert values.redact("pretty-value") == MASK


def test_values_with_regex_characters_and_shared_prefixes_are_matched_literally() -> None:
    values = SecretValues(["a.b*c", "a.b*", "abcd", "abce", "(x|y)+"])
    assert values.redact("a.b*c a.b* axb* abcd abce abc (x|y)+ xy") == (
        f"{MASK} {MASK} axb* {MASK} {MASK} abc {MASK} xy"
    )
