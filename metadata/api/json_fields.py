"""The one JSON reader of the controller's HTTP API: bytes to a bounded object, then typed fields.

Why its own module: every body the controller reads and every answer a broker reads goes
through ``parse_json_object`` and ``Fields``, so a hostile or broken document (deeply nested,
not UTF-8, not an object, NaN, a field of the wrong JSON type) is refused the same way
everywhere — one ``JsonBodyError`` with a sentence naming the field — and never reaches
``json.loads``'s RecursionError (a 500 before issue 9) or a bare ``KeyError``. The controller
answers it 400 INVALID_REQUEST; a broker treats an answer it cannot read as the controller's
failure.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

# Bounds (STYLE.md §7). Every body the API takes is an object holding lists of objects (depth 3).
MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 16

JsonObject = dict[str, Any]


class JsonBodyError(ValueError):
    """The document is not what the contract says; the message is a sentence."""


def parse_json_object(raw: bytes, max_depth: int | None = MAX_JSON_DEPTH) -> JsonObject:
    """``raw`` as a JSON object (RFC 8259: UTF-8, no NaN/Infinity), at most ``max_depth`` deep.

    ``None`` skips the depth walk (a broker reading its controller's answer: a records page of
    100,000 records would be walked value by value); ``json.loads``'s own recursion limit still
    answers a hostile depth with this error rather than a crash."""
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise JsonBodyError("The request body is not UTF-8.") from None
    except RecursionError:
        raise _too_deep(max_depth) from None
    except ValueError:
        raise JsonBodyError("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise JsonBodyError("The request body must be a JSON object.")
    if max_depth is not None and json_depth(body) > max_depth:
        raise _too_deep(max_depth)
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_deep(max_depth: int | None) -> JsonBodyError:
    if max_depth is None:
        return JsonBodyError("The request body nests JSON deeper than Python can read.")
    return JsonBodyError(f"The request body nests JSON deeper than {max_depth} levels.")


def json_depth(value: Any) -> int:
    """How deeply ``value`` nests arrays and objects (a scalar is 0), without recursion."""
    depth = 0
    level = [value]
    while level:
        containers = [v for v in level if isinstance(v, (dict, list))]
        if not containers:
            break
        depth += 1
        level = [child for c in containers for child in (c.values() if isinstance(c, dict) else c)]
    return depth


def dumps(value: Any) -> bytes:
    """The compact UTF-8 JSON every encoder of the contract writes."""
    return json.dumps(value, separators=(",", ":"), allow_nan=False).encode()


_REQUIRED: Any = object()


# JSON's types as Python's ``json`` reads them; ``bool`` is an ``int`` to Python, not to JSON.
def _is_int(value: Any) -> bool:
    return type(value) is int


def _is_finite_number(value: Any) -> bool:
    return type(value) in (int, float) and math.isfinite(value)


def _is_bool(value: Any) -> bool:
    return type(value) is bool


def _is_str(value: Any) -> bool:
    return isinstance(value, str)


def _is_list(value: Any) -> bool:
    return isinstance(value, list)


def _nullable(accept: Callable[[Any], bool]) -> Callable[[Any], bool]:
    return lambda value: value is None or accept(value)


class Fields:
    """Typed reads of one JSON object; ``where`` names it in messages ("partitions[2]").

    Integers are JSON integers only (``true`` and ``1.5`` are refused: Python's ``bool`` is an
    ``int``); a missing field without a default, or ``null`` where none is allowed, is refused.
    """

    def __init__(self, body: Mapping[str, Any], where: str = "") -> None:
        self._body = body
        self._where = where

    @classmethod
    def of(cls, value: Any, where: str) -> Fields:
        """``value`` read as the JSON object ``where`` names ("an item of 'endpoints'")."""
        if not isinstance(value, dict):
            raise JsonBodyError(f"{where[0].upper()}{where[1:]} must be a JSON object.")
        return cls(value, where)

    def _name(self, name: str) -> str:
        """``'name'``, with the object it is in: ``'partition' of an item of 'partitions'``."""
        return f"{name!r} of {self._where}" if self._where else repr(name)

    def _get(self, name: str, default: Any) -> Any:
        if name not in self._body:
            if default is _REQUIRED:
                raise JsonBodyError(f"The field {self._name(name)} is required.")
            return default
        return self._body[name]

    def _wrong(self, name: str, kind: str) -> JsonBodyError:
        return JsonBodyError(f"The field {self._name(name)} must be {kind}.")

    def _typed(self, name: str, default: Any, accept: Callable[[Any], bool], kind: str) -> Any:
        value = self._get(name, default)
        if not accept(value):
            raise self._wrong(name, kind)
        return value

    def integer(self, name: str, default: Any = _REQUIRED) -> int:
        value: int = self._typed(name, default, _is_int, "an integer")
        return value

    def optional_integer(self, name: str) -> int | None:
        value: int | None = self._typed(name, None, _nullable(_is_int), "an integer or null")
        return value

    def number(self, name: str, default: Any = _REQUIRED) -> float:
        """A finite JSON number, integer or not (a client quota's value), as a float."""
        value = self._typed(name, default, _is_finite_number, "a finite number")
        return float(value)

    def boolean(self, name: str, default: Any = _REQUIRED) -> bool:
        value: bool = self._typed(name, default, _is_bool, "of JSON type boolean")
        return value

    def optional_boolean(self, name: str) -> bool | None:
        value: bool | None = self._typed(
            name, None, _nullable(_is_bool), "of JSON type boolean or null"
        )
        return value

    def string(self, name: str, default: Any = _REQUIRED) -> str:
        value: str = self._typed(name, default, _is_str, "of JSON type string")
        return value

    def optional_string(self, name: str) -> str | None:
        value: str | None = self._typed(
            name, None, _nullable(_is_str), "of JSON type string or null"
        )
        return value

    def array(self, name: str, default: Any = _REQUIRED) -> Sequence[Any]:
        value: Sequence[Any] = self._typed(name, default, _is_list, "of JSON type array")
        return value

    def optional_array(self, name: str) -> Sequence[Any] | None:
        value: Sequence[Any] | None = self._typed(
            name, None, _nullable(_is_list), "of JSON type array or null"
        )
        return value

    def json_object(self, name: str, default: Any = _REQUIRED) -> Mapping[str, Any]:
        value = self._get(name, default)
        if not isinstance(value, dict):
            raise self._wrong(name, "of JSON type object")
        return value

    def optional_object(self, name: str) -> Fields | None:
        value = self._get(name, None)
        if value is None:
            return None
        return Fields.of(value, f"the field {self._name(name)}")

    def objects(self, name: str, default: Any = _REQUIRED) -> list[Fields]:
        """A list of JSON objects, each read by its own ``Fields``."""
        return [
            Fields.of(item, f"an item of {self._name(name)}") for item in self.array(name, default)
        ]

    def integers(self, name: str, default: Any = _REQUIRED) -> tuple[int, ...]:
        items = self.array(name, default)
        if not all(type(item) is int for item in items):
            raise self._wrong(name, "an array of integers")
        return tuple(items)

    def strings(self, name: str, default: Any = _REQUIRED) -> tuple[str, ...]:
        items = self.array(name, default)
        if not all(isinstance(item, str) for item in items):
            raise self._wrong(name, "an array of strings")
        return tuple(items)

    def string_map(self, name: str, default: Any = _REQUIRED) -> dict[str, str]:
        raw = self.json_object(name, default)
        if not all(isinstance(value, str) for value in raw.values()):
            raise JsonBodyError(f"The values of {self._name(name)} must be strings.")
        return dict(raw)

    def nullable_string_map(self, name: str, default: Any = _REQUIRED) -> dict[str, str | None]:
        raw = self.json_object(name, default)
        if not all(isinstance(value, str) or value is None for value in raw.values()):
            raise JsonBodyError(f"The values of {self._name(name)} must be strings or null.")
        return dict(raw)


def one_of(value: str, allowed: Sequence[str], what: str) -> str:
    """``value`` if it is one of ``allowed``; otherwise a sentence listing them."""
    if value not in allowed:
        names = " or ".join(repr(name) for name in allowed)
        raise JsonBodyError(f"{what} must be {names}.")
    return value
