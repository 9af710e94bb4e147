"""What the controller's HTTP route modules share: errors as JSON, and request parsing.

Every error answer is ``{"error": "CODE", "message": "human sentence"}`` (``error_response``);
the middleware turns a ``ServiceError``, an unknown route and an unexpected exception into one.
``raise_for`` maps a Kafka error the controller rejected a request with to its HTTP status.
``json_body`` is the one body parser (bounded by ``service_json``), ``field`` and ``query_int``
check one value each. The route modules (``service``, ``service_brokers``, ``service_admin``)
import this one and it imports none of them, so they form no import cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import Any

from aiohttp import web

from protocol.errors import Errors
from quorum.errors import ApiError
from quorum.node import ControllerNode, ServiceError
from quorum.service_json import MAX_REQUEST_BODY_BYTES, JsonBodyError, parse_json_object

logger = logging.getLogger(__name__)

NODE_KEY = web.AppKey("node", ControllerNode)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def error_response(error: ServiceError) -> web.Response:
    body: dict[str, Any] = {"error": error.code, "message": error.message}
    if error.leader is not None or error.code == "NOT_CONTROLLER":
        body["leader"] = error.leader
    body.update(error.extra)
    return web.json_response(body, status=error.status)


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except ServiceError as error:
        return error_response(error)
    except web.HTTPException as http_error:
        if http_error.status in (404, 405):
            reason = "NOT_FOUND" if http_error.status == 404 else "METHOD_NOT_ALLOWED"
            return error_response(
                ServiceError(
                    http_error.status,
                    reason,
                    f"No route {request.method} {request.path}; see /v1/openapi.json.",
                )
            )
        raise
    except Exception:
        logger.exception("unexpected error serving %s %s", request.method, request.path)
        return error_response(
            ServiceError(
                500,
                "UNKNOWN_SERVER_ERROR",
                "The controller hit an unexpected error; it is logged on the controller.",
            )
        )


def node_of(request: web.Request) -> ControllerNode:
    return request.app[NODE_KEY]


async def json_body(request: web.Request) -> dict[str, Any]:
    """The request body as a JSON object; the one parser behind every route that reads a body."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ServiceError(
            413,
            "REQUEST_TOO_LARGE",
            f"The request body is larger than {MAX_REQUEST_BODY_BYTES} bytes.",
        ) from None
    try:
        return parse_json_object(raw)
    except JsonBodyError as error:
        raise ServiceError(400, "INVALID_REQUEST", str(error)) from None


def field(
    body: dict[str, Any], name: str, kind: type, default: Any = ..., *, nullable: bool = False
) -> Any:
    """``body[name]`` checked to be a ``kind``; a missing required field is a 400."""
    if name not in body:
        if default is ...:
            raise ServiceError(400, "INVALID_REQUEST", f"The field {name!r} is required.")
        return default
    value = body[name]
    if value is None and nullable:
        return None
    if kind is int and (type(value) is not int):
        raise ServiceError(400, "INVALID_REQUEST", f"The field {name!r} must be an integer.")
    if kind is not int and not isinstance(value, kind):
        raise ServiceError(
            400, "INVALID_REQUEST", f"The field {name!r} must be of JSON type {_json_type(kind)}."
        )
    return value


_JSON_TYPES: dict[type, str] = {
    str: "string",
    bool: "boolean",
    list: "array",
    dict: "object",
    int: "integer",
}


def _json_type(kind: type) -> str:
    return _JSON_TYPES.get(kind, kind.__name__)


def query_int(
    request: web.Request, name: str, default: int | None = None, minimum: int | None = None
) -> int:
    raw = request.query.get(name)
    if raw is None:
        if default is None:
            raise ServiceError(400, "INVALID_REQUEST", f"The query parameter {name!r} is required.")
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ServiceError(
            400, "INVALID_REQUEST", f"The query parameter {name!r} must be an integer, got {raw!r}."
        ) from None
    if minimum is not None and value < minimum:
        raise ServiceError(
            400, "INVALID_REQUEST", f"The query parameter {name!r} must be at least {minimum}."
        )
    return value


# HTTP status for each Kafka error a request can be rejected with as a whole.
_STATUS: dict[Errors, int] = {
    Errors.UNKNOWN_SERVER_ERROR: 500,
    Errors.NOT_CONTROLLER: 421,
    Errors.UNKNOWN_TOPIC_OR_PARTITION: 404,
    Errors.UNKNOWN_TOPIC_ID: 404,
    Errors.BROKER_ID_NOT_REGISTERED: 404,
    Errors.TOPIC_ALREADY_EXISTS: 409,
    Errors.STALE_BROKER_EPOCH: 409,
    Errors.DUPLICATE_BROKER_REGISTRATION: 409,
    Errors.FENCED_LEADER_EPOCH: 409,
    Errors.INVALID_UPDATE_VERSION: 409,
    Errors.ELECTION_NOT_NEEDED: 409,
}


def raise_for(error: ApiError, context: str = "") -> None:
    """Turn a failed ``ApiError`` into the HTTP error answer."""
    if error.is_success():
        return
    message = error.message or error.name
    if not message.endswith((".", "!", "?")):
        message += "."  # Kafka's messages are sentences without the full stop
    raise ServiceError(
        _STATUS.get(error.error, 400), error.name, f"{context}{message}" if context else message
    )


def error_json(error: ApiError) -> dict[str, Any]:
    return {"error": error.name, "message": error.message}
