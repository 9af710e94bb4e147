"""The controller's HTTP service (aiohttp): JSON under /v1 (DESIGN.md §3.6).

The contract — every route, its request and answer types and their JSON, the error body and
the HTTP status of each error — is defined once in ``metadata/api``, which the brokers' client
reads too. Errors are ``{"error": "CODE", "message": "human sentence"}`` with the status that
fits: 400 INVALID_REQUEST (a body that is not one UTF-8 JSON object nested at most
``MAX_JSON_DEPTH`` deep, a missing or ill-typed field), 413 REQUEST_TOO_LARGE (a body over
``MAX_REQUEST_BODY_BYTES``), 404 for unknown resources, 409 SNAPSHOT_REQUIRED (a metadata read
below the retained window; carries ``snapshot``), 421 NOT_CONTROLLER (a write sent to a
follower; carries ``leader``, the active controller's URL) or 503 NOT_CONTROLLER (no leader
known), 503 REQUEST_TIMED_OUT, and Kafka's error names for rejected operations. Nothing escapes
as a traceback: unexpected exceptions answer 500 UNKNOWN_SERVER_ERROR and are logged.

Routes live in five modules: this one (metadata log for brokers, snapshots, OpenAPI, and
``build_app``), ``service_brokers`` (broker RPCs), ``service_admin`` (topics, configs,
elections), ``service_security`` (ACLs, SCRAM credentials) and ``service_quorum`` (the quorum's
status and Kafka's DescribeQuorum). What they share — the error middleware and reading a body — is
``service_http``, which imports none of them, so the route modules form no import cycle:
``service`` imports the other four, which import ``service_http``.
"""

from __future__ import annotations

from aiohttp import web

from pykraft.metadata.api import routes
from pykraft.metadata.api.errors import (
    SNAPSHOT_NOT_FOUND,
    SNAPSHOT_REQUIRED,
    ErrorBody,
    SnapshotRef,
)
from pykraft.metadata.api.json_fields import MAX_REQUEST_BODY_BYTES
from pykraft.metadata.api.records import (
    ACTIVE_CONTROLLER_HEADER,
    MAX_FETCH_RECORDS,
    EncodedBatch,
    SnapshotListing,
    records_page_json,
    records_query_from_params,
    snapshots_to_json,
)
from pykraft.quorum.auth_http import DOORS_KEY, Doors
from pykraft.quorum.log_window import ReadStatus
from pykraft.quorum.node import ControllerNode
from pykraft.quorum.openapi import openapi_document
from pykraft.quorum.service_admin import add_admin_routes
from pykraft.quorum.service_brokers import add_broker_routes
from pykraft.quorum.service_console import add_console_routes
from pykraft.quorum.service_http import (
    NODE_KEY,
    ErrorAnswer,
    add_routes,
    error_middleware,
    json_response,
    node_of,
)
from pykraft.quorum.service_metrics import add_metrics_routes
from pykraft.quorum.service_quorum import add_quorum_routes
from pykraft.quorum.service_security import add_security_routes
from pykraft.quorum.service_voters import add_voter_routes

# ---- metadata log for brokers ----


async def get_records(request: web.Request) -> web.Response:
    node = node_of(request)
    query = records_query_from_params(request.query)
    max_wait_ms = min(query.max_wait_ms, node.config.fetch_max_wait_ms)
    max_records = min(query.max_records, MAX_FETCH_RECORDS)
    leader_id = node.leader_id()  # read once: the Raft thread changes it
    leader = leader_id == node.config.node_id
    watched = request.transport if query.broker_id >= 0 and leader else None
    # A broker that polls a standby (its last known leader died) is told, in the answer, where
    # the leader is, and polls there next: only the leader watches a broker's connections. The
    # poll still waits as usual, so a broker that cannot reach that leader and comes back here
    # does so once per poll, never in a loop of answers at once.
    redirect = None
    if not leader and leader_id is not None and query.broker_id >= 0:
        redirect = node.http_url(leader_id)
    if watched is not None:
        # A registered broker's poll: it is connected, and this connection is the one to
        # watch while the poll waits (quorum/broker_channels.py; the timer reports it closed).
        node.active_controller().broker_channel_opened(
            node.view.image, query.broker_id, query.broker_epoch, node.clock.monotonic_ms()
        )
        node.broker_channels.polled(query.broker_id, query.broker_epoch, watched)
    try:
        answer = await _records_answer(node, query.from_offset, max_wait_ms, max_records)
    finally:
        if watched is not None:
            node.broker_channels.answered(query.broker_id, watched)
    if redirect is not None:
        answer.headers[ACTIVE_CONTROLLER_HEADER] = redirect
    return answer


async def _records_answer(
    node: ControllerNode, from_offset: int, max_wait_ms: int, max_records: int
) -> web.Response:
    if from_offset >= node.view.window.start_offset and max_wait_ms > 0:
        await node.view.wait_beyond(from_offset, max_wait_ms / 1000)
    read = node.view.read(from_offset, max_records)
    if read.status is ReadStatus.SNAPSHOT_REQUIRED:
        raise _snapshot_required(node, from_offset)
    body = records_page_json(
        from_offset,
        read.next_offset,
        node.view.window.next_offset,
        [
            EncodedBatch(
                base_offset=b.base_offset,
                last_offset=b.last_offset,
                epoch=b.epoch,
                append_time_ms=b.append_time_ms,
                records=b.records,
            )
            for b in read.batches
        ],
    )
    return web.Response(body=body, content_type="application/json")


def _snapshot_required(node: ControllerNode, from_offset: int) -> ErrorAnswer:
    latest = node.raft.snapshots.latest()
    snapshot = (
        None
        if latest is None
        else SnapshotRef(
            snapshot_id=latest.snapshot_id, end_offset=latest.end_offset, epoch=latest.epoch
        )
    )
    return ErrorAnswer(
        409,
        ErrorBody(
            error=SNAPSHOT_REQUIRED,
            message=f"Offset {from_offset} is below this controller's retained window, which "
            f"starts at {node.view.window.start_offset}; load the snapshot, then read from its "
            f"end offset.",
            snapshot=snapshot,
            log_start_offset=node.view.window.start_offset,
        ),
    )


# ---- snapshots ----


async def list_snapshots(request: web.Request) -> web.Response:
    snapshots = node_of(request).raft.snapshots.list()
    return json_response(
        snapshots_to_json(
            [
                SnapshotListing(
                    snapshot_id=s.snapshot_id,
                    end_offset=s.end_offset,
                    epoch=s.epoch,
                    size_bytes=s.size_bytes,
                )
                for s in snapshots
            ]
        )
    )


async def get_snapshot(request: web.Request) -> web.StreamResponse:
    snapshot_id = request.match_info["snapshot_id"]
    path = node_of(request).raft.snapshots.path_for(snapshot_id)
    if path is None:
        raise ErrorAnswer(
            404,
            ErrorBody(
                error=SNAPSHOT_NOT_FOUND,
                message=f"This controller has no snapshot {snapshot_id!r}; list them at "
                f"{routes.LIST_SNAPSHOTS.template}.",
            ),
        )
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ErrorAnswer(
            404,
            ErrorBody(
                error=SNAPSHOT_NOT_FOUND,
                message=f"Snapshot {snapshot_id!r} was just replaced by a newer one.",
            ),
        ) from None
    return web.Response(
        body=data, content_type="application/x-ndjson", headers={"X-Snapshot-Id": snapshot_id}
    )


async def get_openapi(request: web.Request) -> web.Response:
    return json_response(openapi_document())


def build_app(node: ControllerNode, doors: Doors) -> web.Application:
    """The controller's aiohttp application; ``doors`` authenticate and authorize every route
    (``Doors.of(config)``)."""
    app = web.Application(middlewares=[error_middleware], client_max_size=MAX_REQUEST_BODY_BYTES)
    app[NODE_KEY] = node
    app[DOORS_KEY] = doors
    add_routes(
        app,
        [
            (routes.METADATA_RECORDS, get_records),
            (routes.LIST_SNAPSHOTS, list_snapshots),
            (routes.GET_SNAPSHOT, get_snapshot),
            (routes.OPENAPI, get_openapi),
        ],
    )
    add_broker_routes(app)
    add_admin_routes(app)
    add_security_routes(app)
    add_quorum_routes(app)
    add_voter_routes(app)
    add_metrics_routes(app)
    add_console_routes(app, lambda: node.clock.monotonic_ms())  # read when a page is asked
    return app
