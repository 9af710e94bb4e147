"""parse_json_object: the controller API's one JSON parser (issue 9: deep JSON answered 500)."""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.metadata.api.json_fields import (
    MAX_JSON_DEPTH,
    JsonBodyError,
    json_depth,
    parse_json_object,
)


def nested(depth: int) -> bytes:
    """An object whose innermost value sits ``depth`` containers deep."""
    return b'{"a":' + b"[" * (depth - 1) + b"0" + b"]" * (depth - 1) + b"}"


@pytest.mark.parametrize(("raw", "expected"), [
    (b"{}", {}),
    (b'{"name": "t", "partitions": 3}', {"name": "t", "partitions": 3}),
    ('{"name": "caf\u00e9"}'.encode(), {"name": "caf\u00e9"}),
    (b'{"endpoints": [{"name": "PLAINTEXT", "port": 9092}]}',
     {"endpoints": [{"name": "PLAINTEXT", "port": 9092}]}),
])  # fmt: skip
def test_accepted(raw: bytes, expected: dict[str, Any]) -> None:
    assert parse_json_object(raw) == expected


@pytest.mark.parametrize(("raw", "message"), [
    (b"", "not valid JSON"),
    (b"{not json", "not valid JSON"),
    (b'{"a": 1} trailing', "not valid JSON"),
    (b"[]", "must be a JSON object"),
    (b'"a string"', "must be a JSON object"),
    (b"null", "must be a JSON object"),
    (b"3", "must be a JSON object"),
    (b'{"a": NaN}', "not valid JSON"),
    (b'{"a": -Infinity}', "not valid JSON"),
    (b'{"a": "\xff\xfe"}', "not UTF-8"),
    ('{"a": "é"}'.encode("latin-1"), "not UTF-8"),
    (b'{"a": ' + b"9" * 5000 + b"}", "not valid JSON"),  # past Python's int-digits limit
    (nested(MAX_JSON_DEPTH + 1), "deeper than"),
    (nested(10_000), "deeper than"),  # json.loads itself gives up (RecursionError)
    (b"[" * 1_000_000, "deeper than"),
])  # fmt: skip
def test_rejected(raw: bytes, message: str) -> None:
    with pytest.raises(JsonBodyError, match=message) as caught:
        parse_json_object(raw)
    assert str(caught.value).endswith(".")


def test_the_deepest_accepted_body() -> None:
    assert json_depth(parse_json_object(nested(MAX_JSON_DEPTH))) == MAX_JSON_DEPTH


@pytest.mark.parametrize(("value", "depth"), [
    (0, 0), ("x", 0), ({}, 1), ([], 1), ({"a": 1}, 1), ({"a": [1, {"b": []}]}, 4),
    ([[], [[[]]], {}], 4),
])  # fmt: skip
def test_json_depth(value: Any, depth: int) -> None:
    assert json_depth(value) == depth
