"""The one JSON body parser of the controller's HTTP API: bytes in, a JSON object or a reason out.

Why its own module: every route that reads a body goes through ``parse_json_object``, so a hostile
body (deeply nested, not UTF-8, not an object, NaN) is answered the same way everywhere — 400
INVALID_REQUEST — and never reaches ``json.loads``'s RecursionError (a 500 before issue 9).
Pure: no aiohttp here; ``quorum.service.json_body`` reads the bytes and maps the error.
"""

from __future__ import annotations

import json
from typing import Any

# Bounds (STYLE.md §7). Every body the API takes is an object holding lists of objects (depth 3).
MAX_REQUEST_BODY_BYTES = 16 * 1024 * 1024
MAX_JSON_DEPTH = 16


class JsonBodyError(ValueError):
    """The body is not one JSON object within the bounds; the message is a sentence."""


def parse_json_object(raw: bytes) -> dict[str, Any]:
    """``raw`` as a JSON object (RFC 8259: UTF-8, no NaN/Infinity), at most MAX_JSON_DEPTH deep."""
    try:
        body = json.loads(raw.decode("utf-8"), parse_constant=_reject_constant)
    except UnicodeDecodeError:
        raise JsonBodyError("The request body is not UTF-8.") from None
    except RecursionError:
        raise _too_deep() from None
    except ValueError:
        raise JsonBodyError("The request body is not valid JSON.") from None
    if not isinstance(body, dict):
        raise JsonBodyError("The request body must be a JSON object.")
    if json_depth(body) > MAX_JSON_DEPTH:
        raise _too_deep()
    return body


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _too_deep() -> JsonBodyError:
    return JsonBodyError(f"The request body nests JSON deeper than {MAX_JSON_DEPTH} levels.")


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
