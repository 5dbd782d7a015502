"""runner.reconcile.snakecase against operator-sdk's paramconv tests (paramconv_test.go), more."""

from __future__ import annotations

import copy

import pytest

from runner.reconcile.snakecase import snake_keys, to_snake

# Every TestToSnake case of operator-sdk's internal/ansible/paramconv/paramconv_test.go.
PARAMCONV_TO_SNAKE = [
    ("should keep the same", "var", "var"),
    ("should convert to Snake when is only numbers", "888", "888"),
    ("should convert to Snake when has numbers and _", "k8s_var", "k8s_var"),
    ("should convert to Snake when start with _", "_k8s_var", "_k8s_var"),
    ("should convert to Snake and replace the space for _", "k8s var", "k8s_var"),
    (
        "should handle Camel and add _ prefix when starts with",
        "ThisShouldHaveUnderscores",
        "_this_should_have_underscores",
    ),
    ("should convert to snake when has Camel and numbers", "sizeK8sBuckets", "size_k8s_buckets"),
    (
        "should be able to handle mixed vars",
        "_CanYou_Handle_mixedVars",
        "_can_you_handle_mixed_vars",
    ),
    ("should be a noop", "this_should_be_a_noop", "this_should_be_a_noop"),
    ("should handle special plural word at end", "egressIPs", "egress_ips"),
    ("should handle special plural word in middle", "egressIPsEgress", "egress_ips_egress"),
    (
        "should handle special plural word in middle followed by lowercase letter",
        "egressIPsegress",
        "egress_ips_egress",
    ),
    ("should handle special plural word at the start", "IPsegress", "_ips_egress"),
    ("should handle special word at the end", "egressIP", "egress_ip"),
    ("should handle special word in the middle", "egressIPEgress", "egress_ip_egress"),
    (
        "should handle special word in the middle followed by lowercase",
        "egressIPegress",
        "egress_ip_egress",
    ),
    ("should handle multiple special words", "URLegressIPEgressHTTP", "url_egress_ip_egress_http"),
    (
        "should handle multiple plural special words",
        "URLsegressIPsEgressHTTPs",
        "_urls_egress_ips_egress_https",
    ),
    (
        "should not interpret special word when entire word is uppercase",
        "THIS_IS_SKIP_NOT_SK_IP",
        "_this_is_skip_not_sk_ip",
    ),
]

# Further cases, each checked against operator-sdk's Go code.
MORE_TO_SNAKE = [
    ("acronym then word", "JSONData", "_json_data"),
    ("letter digits letter digits get split", "a1b2", "a_1_b2"),
    ("no split without trailing digits", "ab12cd34ef", "ab12cd34ef"),
    ("special word at start, capital", "HTTPServer", "http_server"),
    ("special plural inside", "myURLsList", "my_urls_list"),
    ("digits inside a word", "k8sVersion", "k8s_version"),
    ("dash is a separator", "fooBar-baz", "foo_bar_baz"),
    ("capitalised special word has no prefix", "Ip", "ip"),
    ("special word alone", "URL", "url"),
    ("usual camelCase", "apiVersion", "api_version"),
    ("single letter", "x", "x"),
    ("special word at start, lower-case next", "ipAddress", "ip_address"),
    ("special word at start, capital next", "IPAddress", "ip_address"),
    ("plural special word at end", "podIPs", "pod_ips"),
    ("special word at end", "clusterIP", "cluster_ip"),
    ("surrounding spaces are trimmed", "  k8s var ", "k8s_var"),
]


@pytest.mark.parametrize(
    ("name", "expected"),
    [pytest.param(given, want, id=case) for case, given, want in PARAMCONV_TO_SNAKE],
)
def test_to_snake_matches_operator_sdk(name: str, expected: str) -> None:
    assert to_snake(name) == expected


@pytest.mark.parametrize(
    ("name", "expected"),
    [pytest.param(given, want, id=case) for case, given, want in MORE_TO_SNAKE],
)
def test_to_snake_more_cases(name: str, expected: str) -> None:
    assert to_snake(name) == expected


@pytest.mark.parametrize("name", ["", "   "])
def test_to_snake_empty_is_empty(name: str) -> None:
    # operator-sdk panics here; we return the empty string.
    assert to_snake(name) == ""


def test_snake_keys_matches_operator_sdk_map_to_snake() -> None:
    # TestMapToSnake of paramconv_test.go.
    given = {"var": "value", "var_var": "value", "size_k8s_test": "value", "888": "value"}
    assert snake_keys(given) == given


def test_snake_keys_converts_nested_mappings_and_lists_but_not_values() -> None:
    given = {
        "sizeK8sBuckets": 3,
        "egressIPs": ["10.0.0.1", {"podIP": "keepValueCase"}],
        "nestedMap": {"innerKey": {"deepKey": "ValueStaysCamel"}},
        "listOfLists": [[{"aBc": 1}], "plainString"],
        "noneValue": None,
    }
    assert snake_keys(given) == {
        "size_k8s_buckets": 3,
        "egress_ips": ["10.0.0.1", {"pod_ip": "keepValueCase"}],
        "nested_map": {"inner_key": {"deep_key": "ValueStaysCamel"}},
        "list_of_lists": [[{"a_bc": 1}], "plainString"],
        "none_value": None,
    }


def test_snake_keys_does_not_modify_its_input() -> None:
    given = {"outerKey": {"innerKey": [{"listKey": 1}]}}
    before = copy.deepcopy(given)
    result = snake_keys(given)
    assert given == before
    assert isinstance(result, dict)
    assert result["outer_key"] is not given["outerKey"]


@pytest.mark.parametrize("value", ["aString", 5, None, 1.5, True])
def test_snake_keys_leaves_scalars_alone(value: object) -> None:
    assert snake_keys(value) == value


def test_snake_keys_later_key_wins_on_collision() -> None:
    assert snake_keys({"fooBar": 1, "foo_bar": 2}) == {"foo_bar": 2}
