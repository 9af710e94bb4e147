"""The controller's HTTP service (aiohttp): JSON under /v1 (DESIGN.md §3.6).

Errors are ``{"error": "CODE", "message": "human sentence"}`` with the status that fits:
400 INVALID_REQUEST (a body that is not one UTF-8 JSON object nested at most
``MAX_JSON_DEPTH`` deep, a missing or ill-typed field), 413 REQUEST_TOO_LARGE (a body over
``MAX_REQUEST_BODY_BYTES``), 404 for unknown resources,
409 SNAPSHOT_REQUIRED (a metadata read below the retained window; carries ``snapshot``),
421 NOT_CONTROLLER (a write sent to a follower; carries ``leader``, the active controller's URL)
or 503 NOT_CONTROLLER (no leader known), 503 REQUEST_TIMED_OUT, and Kafka's error names for
rejected operations. Nothing escapes as a traceback: unexpected exceptions answer 500
UNKNOWN_SERVER_ERROR and are logged.

Routes live in three modules: this one (metadata log for brokers, quorum status, snapshots,
OpenAPI, and ``build_app``), ``service_brokers`` (broker RPCs) and ``service_admin`` (topics,
configs, elections). What they share — the error middleware, body and field parsing, Kafka error
to HTTP status — is ``service_http``, which imports none of them, so the route modules form no
import cycle: ``service`` imports ``service_admin`` and ``service_brokers``, both import
``service_http``.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

from aiohttp import web

from quorum.log_window import CommittedBatch, ReadStatus
from quorum.node import ControllerNode, ServiceError
from quorum.openapi import openapi_document
from quorum.service_admin import add_admin_routes
from quorum.service_brokers import add_broker_routes
from quorum.service_http import NODE_KEY, error_middleware, node_of, query_int
from quorum.service_json import MAX_REQUEST_BODY_BYTES

# Bounds on a metadata read (STYLE.md §7).
DEFAULT_FETCH_RECORDS = 10_000
MAX_FETCH_RECORDS = 100_000
STATUS_TIMEOUT_S = 2.0


# ---- metadata log for brokers ----

async def get_records(request: web.Request) -> web.Response:
    node = node_of(request)
    from_offset = query_int(request, "from", minimum=0)
    max_wait_ms = min(query_int(request, "max_wait_ms", 0, minimum=0),
                      node.config.fetch_max_wait_ms)
    max_records = min(query_int(request, "max_records", DEFAULT_FETCH_RECORDS, minimum=1),
                      MAX_FETCH_RECORDS)
    if from_offset >= node.view.window.start_offset and max_wait_ms > 0:
        await node.view.wait_beyond(from_offset, max_wait_ms / 1000)
    read = node.view.read(from_offset, max_records)
    if read.status is ReadStatus.SNAPSHOT_REQUIRED:
        raise _snapshot_required(node, from_offset)
    body = _records_json(from_offset, read.next_offset, node.view.window.next_offset,
                         read.batches)
    return web.Response(body=body, content_type="application/json")


def _snapshot_required(node: ControllerNode, from_offset: int) -> ServiceError:
    latest = node.raft.snapshots.latest()
    snapshot = None if latest is None else {
        "id": latest.snapshot_id, "end_offset": latest.end_offset, "epoch": latest.epoch}
    return ServiceError(
        409, "SNAPSHOT_REQUIRED",
        f"Offset {from_offset} is below this controller's retained window, which starts at "
        f"{node.view.window.start_offset}; load the snapshot, then read from its end offset.",
        extra={"snapshot": snapshot, "log_start_offset": node.view.window.start_offset})


def _records_json(from_offset: int, next_offset: int, log_end_offset: int,
                  batches: tuple[CommittedBatch, ...]) -> bytes:
    """Splice the stored record JSON into the answer without decoding it again."""
    parts = [b'{"from_offset":%d,"next_offset":%d,"log_end_offset":%d,"batches":['
             % (from_offset, next_offset, log_end_offset)]
    for index, batch in enumerate(batches):
        if index:
            parts.append(b",")
        parts.append(b'{"base_offset":%d,"last_offset":%d,"epoch":%d,"append_time_ms":%d,'
                     b'"records":[' % (batch.base_offset, batch.last_offset, batch.epoch,
                                       batch.append_time_ms))
        parts.append(b",".join(batch.records))
        parts.append(b"]}")
    parts.append(b"]}")
    return b"".join(parts)


# ---- snapshots ----

async def list_snapshots(request: web.Request) -> web.Response:
    snapshots = node_of(request).raft.snapshots.list()
    return web.json_response({
        "snapshots": [{"id": s.snapshot_id, "end_offset": s.end_offset, "epoch": s.epoch,
                       "size_bytes": s.size_bytes} for s in snapshots],
        "latest": snapshots[-1].snapshot_id if snapshots else None,
    })


async def get_snapshot(request: web.Request) -> web.StreamResponse:
    snapshot_id = request.match_info["snapshot_id"]
    path = node_of(request).raft.snapshots.path_for(snapshot_id)
    if path is None:
        raise ServiceError(404, "SNAPSHOT_NOT_FOUND",
                           f"This controller has no snapshot {snapshot_id!r}; list them at "
                           f"/v1/metadata/snapshots.")
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise ServiceError(404, "SNAPSHOT_NOT_FOUND",
                           f"Snapshot {snapshot_id!r} was just replaced by a newer one.") from None
    return web.Response(body=data, content_type="application/x-ndjson",
                        headers={"X-Snapshot-Id": snapshot_id})


# ---- quorum status ----

async def get_quorum(request: web.Request) -> web.Response:
    node = node_of(request)
    status = await _raft_status(node)
    return web.json_response(quorum_json(node, status))


async def _raft_status(node: ControllerNode) -> dict[str, Any]:
    future = node.raft.call_in_raft_thread(node.raft.getStatus)
    try:
        status: dict[str, Any] = await asyncio.wait_for(asyncio.wrap_future(future),
                                                        STATUS_TIMEOUT_S)
    except TimeoutError:
        raise ServiceError(503, "REQUEST_TIMED_OUT",
                           "The Raft thread is busy (applying or snapshotting a large batch); "
                           "retry shortly.") from None
    return status


def quorum_json(node: ControllerNode, status: dict[str, Any]) -> dict[str, Any]:
    config = node.config
    leader = node.is_leader()
    # Lag is counted in Raft entries behind the leader's commit index (only the leader knows).
    commit_index = int(status.get("commit_idx") or 0)
    voters = []
    for node_id, address in sorted(config.voters.items()):
        key = str(address)
        match_index = status.get(f"match_idx_server_{key}") if leader else None
        if node_id == config.node_id:
            connected: bool | None = True
            match_index = status.get("last_applied") if leader else None
        else:
            connected = status.get(f"partner_node_status_server_{key}") == 2
        voters.append({
            "node_id": node_id, "raft_address": key, "url": config.http_url(node_id),
            "connected": connected, "match_index": match_index,
            "lag": None if match_index is None else max(0, commit_index - match_index),
        })
    state = {0: "follower", 1: "candidate", 2: "leader"}.get(status.get("state", 0), "unknown")
    return {
        "node_id": config.node_id, "state": state, "leader_id": node.leader_id(),
        "leader_url": node.leader_url(), "raft_term": status.get("raft_term"),
        "committed_offset": node.raft.state.last_offset,
        "applied_offset": node.view.last_offset,
        "log_start_offset": node.view.window.start_offset,
        "raft": {"commit_index": status.get("commit_idx"),
                 "last_applied": status.get("last_applied"),
                 "log_entries": status.get("log_len"), "has_quorum": status.get("has_quorum")},
        "voters": voters,
    }


async def get_openapi(request: web.Request) -> web.Response:
    return web.json_response(openapi_document())


def build_app(node: ControllerNode) -> web.Application:
    app = web.Application(middlewares=[error_middleware], client_max_size=MAX_REQUEST_BODY_BYTES)
    app[NODE_KEY] = node
    app.router.add_get("/v1/metadata/records", get_records)
    app.router.add_get("/v1/metadata/snapshots", list_snapshots)
    app.router.add_get("/v1/metadata/snapshots/{snapshot_id}", get_snapshot)
    app.router.add_get("/v1/quorum", get_quorum)
    app.router.add_get("/v1/openapi.json", get_openapi)
    add_broker_routes(app)
    add_admin_routes(app)
    return app


def dumps(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"))
