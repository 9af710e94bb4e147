"""The broker's local HTTP API (DESIGN.md §3.6): health, metrics and replica state.

Endpoints (JSON unless noted; errors are ``{"error": "CODE", "message": "Sentence."}`` as on
the controller):

  GET /healthz           200 ``{"status": "ok", "state": "RUNNING"}`` while RUNNING, else 503
                         with error BROKER_NOT_RUNNING and the current state — a load balancer or
                         orchestrator sends clients only to a serving broker. A RUNNING broker
                         with offline storage (issue 9: a partition that could not be loaded, a
                         failed log dir) still serves the rest: 200 with status ``degraded`` and
                         ``offline_log_dirs`` / ``offline_partitions`` naming what is missing.
  GET /metrics           Prometheus text exposition (``broker.metrics``).
  GET /v1/broker         node id, state, metadata offset, broker epoch, rack.
  GET /v1/partitions     one row per local replica (``?topic=`` filters): topic, partition,
                         role, leader_epoch, log_start_offset, log_end_offset, high_watermark, isr;
                         an offline replica has role ``offline``, offsets -1 and its reason.
  GET /v1/openapi.json   the OpenAPI 3 description of the above.

The app reads the broker through three callables (status, metrics text, partition rows), so it
depends on no ReplicaManager or loader. It binds 127.0.0.1 by default; binding any other address
needs a bearer token, then required on every endpoint but /healthz (probes carry no secrets).
"""

from __future__ import annotations

import enum
import hmac
import logging
from collections.abc import Callable, Iterable
from typing import Any

import attrs
from aiohttp import web
from aiohttp.typedefs import Handler, Middleware

from pykraft.broker.config import is_loopback
from pykraft.broker.lifecycle import BrokerState

logger = logging.getLogger(__name__)

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
_UNAUTHENTICATED_PATHS = frozenset({"/healthz"})
# aiohttp's default request body limit is 1 MiB; this API takes no bodies at all.
CLIENT_MAX_SIZE_BYTES = 64 * 1024


class ReplicaRole(enum.Enum):
    LEADER = "leader"
    FOLLOWER = "follower"
    OFFLINE = "offline"  # its log could not be loaded, or its log dir failed


@attrs.frozen(kw_only=True)
class PartitionRow:
    """One local replica, as ``/v1/partitions`` shows it (Kafka's names)."""

    topic: str
    partition: int
    role: ReplicaRole
    leader_epoch: int
    log_start_offset: int
    log_end_offset: int
    high_watermark: int
    isr: tuple[int, ...]
    offline_reason: str | None = None

    @classmethod
    def offline(cls, topic: str, partition: int, reason: str) -> PartitionRow:
        return cls(
            topic=topic, partition=partition, role=ReplicaRole.OFFLINE, leader_epoch=-1,
            log_start_offset=-1, log_end_offset=-1, high_watermark=-1, isr=(),
            offline_reason=reason,
        )  # fmt: skip

    def to_json(self) -> dict[str, Any]:
        row = {
            "topic": self.topic,
            "partition": self.partition,
            "role": self.role.value,
            "leader_epoch": self.leader_epoch,
            "log_start_offset": self.log_start_offset,
            "log_end_offset": self.log_end_offset,
            "high_watermark": self.high_watermark,
            "isr": list(self.isr),
        }
        if self.offline_reason is not None:
            row["offline_reason"] = self.offline_reason
        return row


@attrs.frozen(kw_only=True)
class BrokerStatus:
    node_id: int
    state: BrokerState
    # Offset of the last metadata record applied to the image; -1 before any.
    metadata_offset: int
    # Assigned by the controller at registration (KIP-631); -1 until registered.
    broker_epoch: int = -1
    rack: str | None = None
    offline_log_dirs: tuple[str, ...] = ()
    offline_partitions: tuple[str, ...] = ()  # "topic-partition"

    def to_json(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "state": self.state.name,
            "metadata_offset": self.metadata_offset,
            "broker_epoch": self.broker_epoch,
            "rack": self.rack,
            "offline_log_dirs": list(self.offline_log_dirs),
            "offline_partitions": list(self.offline_partitions),
        }


class HttpBindError(ValueError):
    """The HTTP API would listen beyond loopback without a bearer token."""


def error_response(status: int, error: str, message: str, **extra: Any) -> web.Response:
    return web.json_response({"error": error, "message": message, **extra}, status=status)


_STATUS_ERRORS = {
    400: "BAD_REQUEST",
    401: "UNAUTHORIZED",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "REQUEST_TOO_LARGE",
}


@web.middleware
async def json_errors(request: web.Request, handler: Handler) -> web.StreamResponse:
    """Turn aiohttp's HTML errors and unexpected exceptions into the JSON error shape."""
    try:
        return await handler(request)
    except web.HTTPException as error:
        if error.status < 400:
            raise
        code = _STATUS_ERRORS.get(error.status, "HTTP_ERROR")
        if error.status in (404, 405):
            message = f"No route {request.method} {request.path}; see /v1/openapi.json."
        else:
            message = f"{request.method} {request.path}: {error.reason}."
        return error_response(error.status, code, message)
    except Exception:
        logger.exception("HTTP %s %s failed", request.method, request.path)
        return error_response(
            500,
            "UNKNOWN_SERVER_ERROR",
            "The broker hit an unexpected error; it is logged on the broker.",
        )


def bearer_auth(token: str) -> Middleware:
    expected = f"Bearer {token}".encode()

    @web.middleware
    async def check(request: web.Request, handler: Handler) -> web.StreamResponse:
        if request.path not in _UNAUTHENTICATED_PATHS:
            given = request.headers.get("Authorization", "").encode()
            if not hmac.compare_digest(given, expected):
                return error_response(
                    401, "UNAUTHORIZED", "Send Authorization: Bearer <http.bearer.token>."
                )
        return await handler(request)

    return check


class BrokerHttpApi:
    """The request handlers; each reads the broker through a callable given at construction."""

    def __init__(
        self,
        *,
        status: Callable[[], BrokerStatus],
        metrics_text: Callable[[], str],
        partitions: Callable[[], Iterable[PartitionRow]],
    ) -> None:
        self._status = status
        self._metrics_text = metrics_text
        self._partitions = partitions

    async def healthz(self, request: web.Request) -> web.Response:
        status = self._status()
        if status.state is BrokerState.RUNNING:
            if status.offline_log_dirs or status.offline_partitions:
                return web.json_response({
                    "status": "degraded", "state": status.state.name,
                    "offline_log_dirs": list(status.offline_log_dirs),
                    "offline_partitions": list(status.offline_partitions),
                })  # fmt: skip
            return web.json_response({"status": "ok", "state": status.state.name})
        return error_response(
            503,
            "BROKER_NOT_RUNNING",
            f"Broker {status.node_id} is {status.state.name}, not RUNNING.",
            state=status.state.name,
        )

    async def metrics(self, request: web.Request) -> web.Response:
        response = web.Response(text=self._metrics_text())
        # aiohttp's content_type setter rejects parameters; Prometheus wants the version.
        response.headers["Content-Type"] = PROMETHEUS_CONTENT_TYPE
        return response

    async def broker(self, request: web.Request) -> web.Response:
        return web.json_response(self._status().to_json())

    async def partitions(self, request: web.Request) -> web.Response:
        topic = request.query.get("topic")
        rows = sorted(
            (row for row in self._partitions() if topic is None or row.topic == topic),
            key=lambda row: (row.topic, row.partition),
        )
        return web.json_response({"partitions": [row.to_json() for row in rows]})

    async def openapi(self, request: web.Request) -> web.Response:
        return web.json_response(OPENAPI_DOCUMENT)


def build_app(api: BrokerHttpApi, *, bearer_token: str | None = None) -> web.Application:
    middlewares: list[Middleware] = [json_errors]
    if bearer_token:
        middlewares.append(bearer_auth(bearer_token))
    app = web.Application(middlewares=middlewares, client_max_size=CLIENT_MAX_SIZE_BYTES)
    app.router.add_get("/healthz", api.healthz, allow_head=True)
    app.router.add_get("/metrics", api.metrics)
    app.router.add_get("/v1/broker", api.broker)
    app.router.add_get("/v1/partitions", api.partitions)
    app.router.add_get("/v1/openapi.json", api.openapi)
    return app


class BrokerHttpServer:
    """Serves ``api`` on one address; ``port`` is the bound port once started (0 picks one).

    Raises ``HttpBindError`` for a non-loopback host without a bearer token (DESIGN.md §3.6).
    """

    def __init__(
        self,
        api: BrokerHttpApi,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        bearer_token: str | None = None,
    ) -> None:
        if not is_loopback(host) and not bearer_token:
            raise HttpBindError(
                f"refusing to serve the broker HTTP API on {host} without http.bearer.token "
                "(only loopback addresses are open)"
            )
        self.app = build_app(api, bearer_token=bearer_token)
        self._host = host
        self._requested_port = port
        self._runner: web.AppRunner | None = None
        self._port: int | None = None

    @property
    def port(self) -> int:
        assert self._port is not None, "start() first"
        return self._port

    async def start(self) -> None:
        runner = web.AppRunner(self.app, access_log=None)
        await runner.setup()
        site = web.TCPSite(runner, self._host, self._requested_port)
        try:
            await site.start()
        except OSError:
            await runner.cleanup()
            raise
        self._runner = runner
        self._port = _bound_port(runner, self._requested_port)
        logger.info("broker HTTP API listening on http://%s:%d", self._host, self._port)

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None


def _bound_port(runner: web.AppRunner, requested: int) -> int:
    for address in runner.addresses:
        if isinstance(address, tuple) and len(address) >= 2:
            return int(address[1])
    return requested


def _path(summary: str, content: str = "application/json") -> dict[str, Any]:
    return {"get": {"summary": summary, "responses": {"200": {"description": "OK",
            "content": {content: {}}}}}}  # fmt: skip


OPENAPI_DOCUMENT: dict[str, Any] = {
    "openapi": "3.0.3",
    "info": {"title": "pykraft broker local API", "version": "1"},
    "paths": {
        "/healthz": {
            "get": {
                "summary": "200 while the broker is RUNNING (status degraded with offline "
                "storage), 503 otherwise",
                "responses": {
                    "200": {"description": "RUNNING"},
                    "503": {"description": "not RUNNING; the body names the state"},
                },
            }
        },
        "/metrics": _path("Prometheus metrics", "text/plain"),
        "/v1/broker": _path("node id, state, metadata offset, broker epoch, rack"),
        "/v1/partitions": _path("local replicas with offsets, high watermark and ISR"),
        "/v1/openapi.json": _path("this document"),
    },
}
