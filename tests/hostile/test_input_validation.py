"""statecharts.policies.validation: the one validator every door calls, unit by unit."""

from __future__ import annotations

import json
from typing import Any

import pytest
from django.core.checks import run_checks
from django.test import override_settings

from statecharts.policies import validation
from statecharts.policies.validation import InvalidInput


def problems(check: Any, *args: Any, **kwargs: Any) -> list[str]:
    with pytest.raises(InvalidInput) as refused:
        check(*args, **kwargs)
    assert isinstance(refused.value, ValueError)  # what Python callers expect
    return [str(problem) for problem in refused.value.problems]


def nested(depth: int, leaf: Any = 1) -> Any:
    value = leaf
    for _ in range(depth):
        value = [value]
    return value


# ---- values given to a chart -----------------------------------------------------------------


@pytest.mark.parametrize(
    "value",
    [
        None,
        True,
        0,
        -1.5,
        "a\x00b",  # NUL is data: every JSON column stores it
        "\U0001f600 \ufdd0",  # an astral character and the storage escape character
        {"$sc": "undefined"},
        {"$sc": "number", "v": "-Infinity"},
        {"$sc": "bigint", "v": "123456789012345678901234567890"},
        {"$sc": "date", "v": 0},
        {"$sc": "date", "v": None},
        {"$sc": "object", "v": {"$sc": "function", "source": "not code here: just a key"}},
        {"items": [1, 2, {"sku": "A"}], "count": 3},
        (1, 2),  # a tuple is a JSON array to Python callers
        nested(64),
        2**1000,  # fits a double
    ],
)
def test_values_that_describe_data_are_accepted_unchanged(value: Any) -> None:
    assert validation.chart_value(value) is value


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"$sc": "function", "source": "(function(){ok=true})()"}, "data: the tag 'function'"),
        ({"a": {"$sc": "regexp", "source": "(a+)+$", "flags": ""}}, "data.a: the tag 'regexp'"),
        ({"$sc": "xml", "v": "<a/>"}, "data: the tag 'xml'"),
        ({"$sc": "ref", "path": []}, "data: the tag 'ref'"),
        ({"$sc": "map", "v": []}, "data: the tag 'map'"),
        ([{"$sc": "set", "v": []}], "data[0]: the tag 'set'"),
        ({"$sc": 7}, "data: the tag 7"),
        ({"$sc": "number", "v": "12"}, 'data: a "number" tag needs'),
        ({"$sc": "bigint", "v": "12x"}, 'data: a "bigint" tag needs'),
        ({"$sc": "date", "v": "yesterday"}, 'data: a "date" tag needs'),
        ({"$sc": "date", "v": 1e300}, 'data: a "date" tag needs'),
        ({"$sc": "object", "v": []}, 'data: an "object" tag needs'),
        ({"$sc": "number", "v": {"x": 1}}, 'data: a "number" tag needs'),
        ({"$sc": "undefined", "x": "\udfff"}, "data.x: a string with a lone UTF-16 surrogate"),
        ({"$sc": "date", "v": 0, "y": [float("nan")]}, "data.y[0]: nan is not a finite"),
    ],
)
def test_code_carrying_and_malformed_tags_are_refused_naming_the_path(
    value: Any, expected: str
) -> None:
    [problem] = problems(validation.chart_value, value)
    assert problem.startswith(expected)


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ({"n": float("nan")}, 'data.n: nan is not a finite number; send {"$sc": "number", "v"'),
        ([float("-inf")], 'data[0]: -inf is not a finite number; send {"$sc": "number", "v"'),
        ({"n": 10**400}, 'data.n: a whole number this large is not a number a chart can hold'),
        ({"a": "\ud800"}, "data.a: a string with a lone UTF-16 surrogate is not text"),
        ({"\udc00": 1}, "data: a key with a lone UTF-16 surrogate is not text"),
        ({1: "x"}, "data: the key 1 is not a string"),
        ({"when": object()}, "data.when: a object is not a JSON value"),
        ({"odd key": {"x": set()}}, 'data["odd key"].x: a set is not a JSON value'),
    ],
)
def test_values_json_cannot_hold_are_refused_naming_the_path(value: Any, expected: str) -> None:
    assert any(problem.startswith(expected) for problem in problems(validation.chart_value, value))


def test_nesting_is_bounded_by_a_setting_without_recursion() -> None:
    [problem] = problems(validation.chart_value, {"a": nested(64)})
    assert problem == (
        "data.a" + "[0]" * 63 + ": nested more than 64 levels deep (STATECHARTS['INPUT_MAX_DEPTH'])"
    )
    # A million levels cost as much as 65: the walk stops at the bound and never recurses.
    problems(validation.chart_value, nested(1_000_000))
    with override_settings(STATECHARTS={"INPUT_MAX_DEPTH": 3}):
        validation.chart_value(nested(3))
        problems(validation.chart_value, nested(4))
        # Levels as JSON text counts them: an "object" tag's payload is one more level.
        validation.chart_value([{"$sc": "object", "v": {"a": 1}}])
        [problem] = problems(validation.chart_value, [{"$sc": "object", "v": {"a": [1]}}])
        assert problem.startswith("data[0].a: nested more than 3 levels")


def test_size_is_bounded_by_a_setting_counting_utf8_json_text() -> None:
    value = {"text": "é" * 100}
    size = len(json.dumps(value, ensure_ascii=False).encode())
    with override_settings(STATECHARTS={"INPUT_MAX_BYTES": size}):
        validation.chart_value(value)
    with override_settings(STATECHARTS={"INPUT_MAX_BYTES": size - 1}):
        [problem] = problems(validation.chart_value, value)
    assert problem == (
        f"data: is larger than {size - 1} bytes of JSON (STATECHARTS['INPUT_MAX_BYTES'])"
    )
    # A huge array is refused from its length alone, before its items are looked at.
    [problem] = problems(validation.chart_value, [0] * 2_000_000)
    assert "larger than 1000000 bytes" in problem


def test_a_refusal_lists_at_most_twenty_problems() -> None:
    refused = problems(validation.chart_value, [float("nan")] * 1000)
    assert len(refused) == validation.MAX_PROBLEMS
    assert refused[0].startswith("data[0]: nan") and refused[1].startswith("data[1]: nan")


def test_opaque_json_ignores_tags_but_not_the_json_rules() -> None:
    metadata = {"$sc": "function", "source": "kept as text: metadata never reaches a chart"}
    assert validation.json_object(metadata, "metadata") is metadata
    [problem] = problems(validation.json_object, {"x": float("inf")}, "metadata")
    assert problem == "metadata.x: inf is not a finite number, and JSON has no Infinity."
    assert problems(validation.json_object, [1], "metadata") == ["metadata: must be a JSON object"]
    assert validation.json_object(None, "caller_context") is None
    problems(validation.json_object, nested(65, {}), "metadata")


def test_start_data_is_an_object_of_chart_values() -> None:
    assert validation.start_data(None) is None
    assert problems(validation.start_data, [1]) == [
        "data: must be a JSON object of data ids to initial values"
    ]
    problems(validation.start_data, {"limit": {"$sc": "function", "source": "1"}})
    assert validation.undeclared_data_ids({"a": 1, "z": 2, "b": 3}, ["a"]) == ["b", "z"]


# ---- text for columns and event names ----------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("k" * 201, "business_key: is 201 characters long; the most its column holds is 200"),
        ("a\x00b", "business_key: must not contain a NUL character"),
        ("a\udfffb", "business_key: must not contain a lone UTF-16 surrogate"),
        (7, "business_key: must be text, not int"),
    ],
)
def test_text_for_a_column_must_fit_it(value: Any, expected: str) -> None:
    assert problems(validation.text, value, "business_key", max_length=200) == [expected]


def test_text_that_fits_its_column_is_accepted() -> None:
    assert validation.text("k" * 200, "business_key", max_length=200) == "k" * 200
    assert validation.text(None, "business_key", max_length=200, optional=True) is None
    assert problems(validation.text, " ", "session_id", max_length=64, blank=False)


@pytest.mark.parametrize(
    "name", ["error", "error.execution", "error.communication.x", "done", "done.state.s"]
)
def test_reserved_event_names_are_refused_from_outside(name: str) -> None:
    [problem] = problems(validation.event_name, name)
    assert "is reserved for the platform's own events" in problem
    assert validation.event_name(name, reserved=True) == name  # the platform's own paths


@pytest.mark.parametrize("name", ["errors", "error_x", "order.error", "Done.x", "undone", "go"])
def test_names_that_only_resemble_reserved_ones_are_accepted(name: str) -> None:
    assert validation.event_name(name) == name


def test_the_reserved_prefixes_are_a_setting() -> None:
    with override_settings(STATECHARTS={"RESERVED_EVENT_PREFIXES": []}):
        assert validation.event_name("error.execution") == "error.execution"
    with override_settings(STATECHARTS={"RESERVED_EVENT_PREFIXES": ["internal.*", "error"]}):
        problems(validation.event_name, "internal.tick")
        assert validation.event_name("done.state.s") == "done.state.s"


@pytest.mark.django_db
def test_a_reserved_prefixes_setting_that_is_not_a_list_of_names_fails_the_checks() -> None:
    with override_settings(STATECHARTS={"RESERVED_EVENT_PREFIXES": "error"}):
        assert "statecharts.E020" in [message.id for message in run_checks()]
    with override_settings(STATECHARTS={"INPUT_MAX_DEPTH": 0}):
        assert "statecharts.E003" in [message.id for message in run_checks()]


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("", "an event name must not be empty"),
        ("a b", "whitespace"),
        ("a\x00b", "must not contain a NUL character"),
        ("a\x07b", "control characters"),
        ("e" * 201, "is 201 characters long"),
    ],
)
def test_event_names_are_one_token_of_visible_characters(name: str, expected: str) -> None:
    [problem] = problems(validation.event_name, name)
    assert expected in problem


def test_event_fields_from_python_are_known_fields_of_text() -> None:
    validation.event_fields({"sendid": "s1", "origin": None})
    assert problems(validation.event_fields, {"teleport": "x"})[0].startswith("teleport: not an")
    assert problems(validation.event_fields, {"origin": "\x00"}) == [
        "origin: must not contain a NUL character"
    ]


# ---- JSON text -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("NaN", 'data: not valid JSON: NaN is not JSON; send the number as {"$sc": "number"'),
        ("[-Infinity]", "data: not valid JSON: -Infinity is not JSON"),
        ("[" * 100_000 + "]" * 100_000, "data: nested too deeply to read"),
        ("{oops", "data: not valid JSON: Expecting property name"),
        (b"\xff", "data: not UTF-8 text"),
    ],
)
def test_json_text_is_read_strictly_and_never_raises_recursion_error(
    text: str | bytes, expected: str
) -> None:
    [problem] = problems(validation.parse_json, text, "data")
    assert problem.startswith(expected)


def test_json_text_within_bounds_is_read() -> None:
    assert validation.parse_json('{"a": [1, "x\\u0000"]}', "data") == {"a": [1, "x\x00"]}
