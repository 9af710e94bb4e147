"""What the controller's HTTP route modules share: the error answer, and reading a request.

The contract — every body's types and JSON, the error body, the status of each Kafka error — is
``metadata/api`` (the brokers' client reads the same definitions); this module is its aiohttp
side. The middleware turns an ``ErrorAnswer``, a ``ServiceError`` (the node's: NOT_CONTROLLER,
REQUEST_TIMED_OUT), a body the contract refuses (``JsonBodyError``: 400 INVALID_REQUEST), an
unknown route and an unexpected exception (500, logged) into one ``ErrorBody``; a caller the
doors refuse (``auth_http.Refused``: 401/403) likewise.
``raise_for`` refuses a request with the Kafka error the controller answered. The route modules
(``service``, ``service_brokers``, ``service_admin``) import this one and it imports none of
them, so they form no import cycle.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import TypeVar

from aiohttp import web

from pykraft.metadata.api.errors import (
    METHOD_NOT_ALLOWED,
    NOT_FOUND,
    REQUEST_TOO_LARGE,
    ApiError,
    ErrorBody,
    error_body_to_json,
    status_of,
)
from pykraft.metadata.api.json_fields import (
    MAX_REQUEST_BODY_BYTES,
    Fields,
    JsonBodyError,
    JsonObject,
    dumps,
    parse_json_object,
)
from pykraft.metadata.api.routes import Route
from pykraft.quorum.auth_http import Refused, guard
from pykraft.quorum.node import ControllerNode, ServiceError

logger = logging.getLogger(__name__)

NODE_KEY = web.AppKey("node", ControllerNode)
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
T = TypeVar("T")


class ErrorAnswer(Exception):
    """Refuse the request with ``body`` and HTTP ``status``."""

    def __init__(self, status: int, body: ErrorBody) -> None:
        super().__init__(body.message)
        self.status = status
        self.body = body


def json_response(answer: JsonObject, status: int = 200) -> web.Response:
    return web.Response(body=dumps(answer), status=status, content_type="application/json")


def error_response(
    status: int, body: ErrorBody, headers: Mapping[str, str] | None = None
) -> web.Response:
    response = json_response(error_body_to_json(body), status)
    response.headers.update(headers or {})
    return response


def _body_of(error: ServiceError) -> ErrorBody:
    leader_id = error.extra.get("leader_id")
    return ErrorBody(
        error=error.code,
        message=error.message,
        leader=error.leader,
        leader_id=leader_id if type(leader_id) is int else None,
    )


@web.middleware
async def error_middleware(request: web.Request, handler: Handler) -> web.StreamResponse:
    try:
        return await handler(request)
    except Refused as refused:
        return error_response(refused.status, refused.body, refused.headers)
    except ErrorAnswer as answer:
        return error_response(answer.status, answer.body)
    except ServiceError as error:
        return error_response(error.status, _body_of(error))
    except JsonBodyError as error:
        return error_response(400, ErrorBody(error="INVALID_REQUEST", message=str(error)))
    except web.HTTPException as http_error:
        if http_error.status in (404, 405):
            reason = NOT_FOUND if http_error.status == 404 else METHOD_NOT_ALLOWED
            return error_response(
                http_error.status,
                ErrorBody(
                    error=reason,
                    message=f"No route {request.method} {request.path}; see /v1/openapi.json.",
                ),
            )
        raise
    except Exception:
        logger.exception("unexpected error serving %s %s", request.method, request.path)
        return error_response(
            500,
            ErrorBody(
                error="UNKNOWN_SERVER_ERROR",
                message="The controller hit an unexpected error; it is logged on the controller.",
            ),
        )


def add_routes(app: web.Application, handlers: Sequence[tuple[Route, Handler]]) -> None:
    """Serve each route of the contract (``metadata.api.routes``) with its handler, behind the
    route's door (``quorum/auth_http.guard``: authentication and the route's access column)."""
    for route, handler in handlers:
        app.router.add_route(route.method, route.template, guard(route, handler))


def node_of(request: web.Request) -> ControllerNode:
    return request.app[NODE_KEY]


async def read_body(request: web.Request, decode: Callable[[Fields], T]) -> T:
    """The request body decoded by the contract's ``decode``; the one reader behind every route
    that takes a body (bounded by ``MAX_REQUEST_BODY_BYTES`` and ``parse_json_object``)."""
    try:
        raw = await request.read()
    except web.HTTPRequestEntityTooLarge:
        raise ErrorAnswer(
            413,
            ErrorBody(
                error=REQUEST_TOO_LARGE,
                message=f"The request body is larger than {MAX_REQUEST_BODY_BYTES} bytes.",
            ),
        ) from None
    return decode(Fields(parse_json_object(raw)))


def raise_for(error: ApiError, context: str = "") -> None:
    """Refuse the request with ``error`` (a Kafka error the controller answered), if it failed."""
    if error.is_success():
        return
    raise ErrorAnswer(status_of(error.error), ErrorBody.of(error, context))
