"""The broker's local HTTP API, driven through aiohttp's routing and middlewares without a socket
(unit tests open no ports; tests/integration/test_broker_http.py serves it for real)."""

from __future__ import annotations

import asyncio
import functools
import json
from typing import Any

import pytest
from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from pykraft.broker.http import (
    OPENAPI_DOCUMENT,
    PROMETHEUS_CONTENT_TYPE,
    BrokerHttpApi,
    BrokerHttpServer,
    BrokerStatus,
    HttpBindError,
    PartitionRow,
    ReplicaRole,
    build_app,
)
from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.metrics import BrokerMetrics

ROWS = [
    PartitionRow(topic="pets", partition=1, role=ReplicaRole.FOLLOWER, leader_epoch=3,
                 log_start_offset=0, log_end_offset=10, high_watermark=9, isr=(2, 1)),
    PartitionRow(topic="cars", partition=0, role=ReplicaRole.LEADER, leader_epoch=1,
                 log_start_offset=5, log_end_offset=7, high_watermark=7, isr=(1,)),
    PartitionRow(topic="pets", partition=0, role=ReplicaRole.LEADER, leader_epoch=2,
                 log_start_offset=0, log_end_offset=4, high_watermark=3, isr=(1, 2)),
]  # fmt: skip


class FakeBroker:
    def __init__(self) -> None:
        self.state = BrokerState.RUNNING
        self.metrics = BrokerMetrics()
        self.fail = False

    def status(self) -> BrokerStatus:
        if self.fail:
            raise RuntimeError("status source broke")
        return BrokerStatus(node_id=1, state=self.state, metadata_offset=41, broker_epoch=7)

    def app(self, token: str | None = None) -> web.Application:
        api = BrokerHttpApi(
            status=self.status, metrics_text=self.metrics.render, partitions=lambda: ROWS
        )
        return build_app(api, bearer_token=token)


async def call_async(
    app: web.Application, method: str, path: str, headers: dict[str, str] | None = None
) -> web.Response:
    request = make_mocked_request(method, path, headers=headers or {}, app=app)
    match = await app.router.resolve(request)
    handler: Any = match.handler
    for middleware in reversed(app.middlewares):
        handler = functools.partial(middleware, handler=handler)
    response = await handler(request)
    assert isinstance(response, web.Response)
    return response


def call(app: web.Application, path: str, method: str = "GET", **headers: str) -> web.Response:
    return asyncio.run(call_async(app, method, path, headers))


def body(response: web.Response) -> Any:
    assert response.content_type == "application/json"
    assert response.text is not None
    return json.loads(response.text)


def test_healthz_is_200_only_while_running() -> None:
    broker = FakeBroker()
    ok = call(broker.app(), "/healthz")
    assert (ok.status, body(ok)) == (200, {"status": "ok", "state": "RUNNING"})
    for state in (BrokerState.STARTING, BrokerState.RECOVERY, BrokerState.SHUTTING_DOWN):
        broker.state = state
        down = call(broker.app(), "/healthz")
        assert down.status == 503
        assert body(down) == {
            "error": "BROKER_NOT_RUNNING",
            "message": f"Broker 1 is {state.name}, not RUNNING.",
            "state": state.name,
        }


def test_metrics_is_prometheus_text() -> None:
    broker = FakeBroker()
    broker.metrics.record_request(18, 3, 0.001)
    response = call(broker.app(), "/metrics")
    assert response.status == 200
    assert response.headers["Content-Type"] == PROMETHEUS_CONTENT_TYPE
    assert 'pykraft_request_duration_seconds_count{api="ApiVersions"} 1' in (response.text or "")


def test_broker_endpoint() -> None:
    assert body(call(FakeBroker().app(), "/v1/broker")) == {
        "node_id": 1, "state": "RUNNING", "metadata_offset": 41, "broker_epoch": 7, "rack": None,
        "offline_log_dirs": [], "offline_partitions": [],
    }  # fmt: skip


def test_offline_storage_makes_a_running_broker_degraded_not_down() -> None:
    broker = FakeBroker()
    offline = BrokerStatus(
        node_id=1, state=BrokerState.RUNNING, metadata_offset=41,
        offline_log_dirs=("/data/b",), offline_partitions=("pets-2",),
    )  # fmt: skip
    api = BrokerHttpApi(
        status=lambda: offline,
        metrics_text=broker.metrics.render,
        partitions=lambda: [PartitionRow.offline("pets", 2, "IsADirectoryError")],
    )
    health = call(build_app(api), "/healthz")
    assert (health.status, body(health)) == (200, {
        "status": "degraded", "state": "RUNNING",
        "offline_log_dirs": ["/data/b"], "offline_partitions": ["pets-2"],
    })  # fmt: skip
    assert body(call(build_app(api), "/v1/partitions"))["partitions"] == [{
        "topic": "pets", "partition": 2, "role": "offline", "leader_epoch": -1,
        "log_start_offset": -1, "log_end_offset": -1, "high_watermark": -1, "isr": [],
        "offline_reason": "IsADirectoryError",
    }]  # fmt: skip


def test_partitions_sorted_and_filtered() -> None:
    rows = body(call(FakeBroker().app(), "/v1/partitions"))["partitions"]
    assert [(r["topic"], r["partition"]) for r in rows] == [("cars", 0), ("pets", 0), ("pets", 1)]
    assert rows[2] == {
        "topic": "pets", "partition": 1, "role": "follower", "leader_epoch": 3,
        "log_start_offset": 0, "log_end_offset": 10, "high_watermark": 9, "isr": [2, 1],
    }  # fmt: skip
    only_pets = body(call(FakeBroker().app(), "/v1/partitions?topic=pets"))["partitions"]
    assert {r["topic"] for r in only_pets} == {"pets"} and len(only_pets) == 2


def test_openapi_document_lists_every_route() -> None:
    app = FakeBroker().app()
    document = body(call(app, "/v1/openapi.json"))
    assert document == OPENAPI_DOCUMENT and document["openapi"].startswith("3.")
    routes = {resource.canonical for resource in app.router.resources()}
    assert routes == set(document["paths"])


def test_errors_are_json() -> None:
    app = FakeBroker().app()
    missing = call(app, "/v1/nothing")
    assert missing.status == 404
    assert body(missing) == {
        "error": "NOT_FOUND",
        "message": "No route GET /v1/nothing; see /v1/openapi.json.",
    }
    wrong_method = call(app, "/v1/broker", method="POST")
    assert (wrong_method.status, body(wrong_method)["error"]) == (405, "METHOD_NOT_ALLOWED")


def test_a_failing_source_is_a_json_500_not_a_traceback() -> None:
    broker = FakeBroker()
    broker.fail = True
    response = call(broker.app(), "/v1/broker")
    assert response.status == 500
    assert body(response) == {
        "error": "UNKNOWN_SERVER_ERROR",
        "message": "The broker hit an unexpected error; it is logged on the broker.",
    }


def test_bearer_token_guards_everything_but_healthz() -> None:
    app = FakeBroker().app(token="s3cret")
    denied = call(app, "/v1/partitions")
    assert (denied.status, body(denied)["error"]) == (401, "UNAUTHORIZED")
    assert call(app, "/metrics", Authorization="Bearer wrong").status == 401
    assert call(app, "/metrics", Authorization="Bearer s3cret").status == 200
    assert call(app, "/healthz").status == 200


def test_refuses_a_public_address_without_a_token() -> None:
    api = BrokerHttpApi(status=FakeBroker().status, metrics_text=str, partitions=list)
    with pytest.raises(HttpBindError, match=r"http\.bearer\.token"):
        BrokerHttpServer(api, host="0.0.0.0", port=0)
    # A token opens non-loopback addresses; construction binds nothing yet.
    assert BrokerHttpServer(api, host="0.0.0.0", bearer_token="t").app is not None
