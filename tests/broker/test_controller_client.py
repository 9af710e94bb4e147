"""ControllerClient's reading of answers, without a controller: what the contract cannot read is
the controller's failure, never a KeyError in the broker (the transport is tested against real
controllers in tests/integration/test_broker_controller_client.py)."""

from __future__ import annotations

import asyncio
import ssl
from typing import Any

import pytest

from pykraft.broker import controller_client
from pykraft.broker.config import BrokerConfigError, controller_tls_settings
from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import (
    ControllerRequestError,
    SnapshotRequiredError,
    decode_answer,
    error_body_of,
)
from pykraft.metadata.api import brokers, routes
from pykraft.metadata.api.errors import ErrorBody, SnapshotRef, error_body_to_json
from pykraft.metadata.auth.acl import AclBindingFilter
from pykraft.protocol.errors import Errors


def test_an_answer_read_by_the_contract() -> None:
    payload = (
        b'{"is_caught_up":true,"is_fenced":false,"in_controlled_shutdown":false,'
        b'"should_shut_down":false}'
    )
    reply = decode_answer(routes.BROKER_HEARTBEAT, payload, brokers.heartbeat_response_from_json)
    assert (reply.is_caught_up, reply.is_fenced) == (True, False)


@pytest.mark.parametrize("payload", [
    b'{"is_caught_up": true}',  # fields missing
    b'{"is_caught_up": 1, "is_fenced": 0, "in_controlled_shutdown": 0, "should_shut_down": 0}',
    b"<html>502</html>",
    b"[]",
])  # fmt: skip
def test_an_answer_the_contract_cannot_read_is_unknown_server_error(payload: bytes) -> None:
    with pytest.raises(ControllerError) as failure:
        decode_answer(routes.BROKER_HEARTBEAT, payload, brokers.heartbeat_response_from_json)
    assert failure.value.code is Errors.UNKNOWN_SERVER_ERROR
    assert "POST /v1/brokers/heartbeat" in failure.value.message


def test_an_error_body_that_does_not_read_keeps_the_status() -> None:
    assert error_body_of(502, b"<html>bad gateway</html>") == ErrorBody(
        error="UNKNOWN_SERVER_ERROR", message="HTTP 502 without the controller's error body"
    )
    assert error_body_of(
        409, b'{"error": "TOPIC_ALREADY_EXISTS", "message": "exists."}'
    ) == ErrorBody(error="TOPIC_ALREADY_EXISTS", message="exists.")


def test_snapshot_required_names_the_snapshot() -> None:
    snapshot = SnapshotRef(snapshot_id="00000000000000000042-0000000001", end_offset=43, epoch=1)
    body = ErrorBody(
        error="SNAPSHOT_REQUIRED", message="below.", snapshot=snapshot, log_start_offset=40
    )
    failure = SnapshotRequiredError(409, body.error, body.message, error_body_to_json(body))
    assert failure.snapshot == snapshot
    # Not a Kafka error: a handler that meets it answers UNKNOWN_SERVER_ERROR.
    assert isinstance(failure, ControllerRequestError)
    assert failure.code is Errors.UNKNOWN_SERVER_ERROR


def test_the_controller_listener_on_ssl_gives_the_client_its_tls() -> None:
    # Kafka's properties for the controller listener, as a broker reads them (issue 11).
    assert controller_tls_settings({}) is None
    assert (
        controller_tls_settings({"listener.security.protocol.map": "CONTROLLER:PLAINTEXT"}) is None
    )
    values = {
        "listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,CONTROLLER:SSL",
        "ssl.keystore.location": "/etc/pykraft/broker-1.pem",
        "listener.name.controller.ssl.truststore.location": "/etc/pykraft/ca.pem",
    }
    settings = controller_tls_settings(values)
    assert settings is not None
    assert settings.keystore is not None
    assert settings.keystore.location == "/etc/pykraft/broker-1.pem"
    assert settings.truststore.location == "/etc/pykraft/ca.pem"
    renamed = {
        **values,
        "controller.listener.names": "KRAFT",
        "listener.security.protocol.map": "KRAFT:SSL",
    }
    assert controller_tls_settings(renamed) is not None
    with pytest.raises(BrokerConfigError, match=r"ssl\.keystore\.type"):
        controller_tls_settings({**values, "ssl.keystore.type": "JKS"})


def test_with_an_ssl_context_bare_addresses_are_https() -> None:
    client = controller_client.ControllerClient(
        ["127.0.0.1:19093"], ssl_context=ssl.create_default_context()
    )
    assert client.urls == ["https://127.0.0.1:19093"]
    assert controller_client.ControllerClient(["127.0.0.1:19093"]).urls == [
        "http://127.0.0.1:19093"
    ]


class _Recorded(controller_client.ControllerClient):
    """Answers every call with ``payload`` and records what was sent (no controller)."""

    def __init__(self, payload: bytes) -> None:
        super().__init__(["127.0.0.1:19093"])
        self.payload = payload
        self.sent: list[tuple[routes.Route, str, dict[str, Any]]] = []

    async def _call(self, route: routes.Route, path: str, **options: Any) -> bytes:
        self.sent.append((route, path, options))
        return self.payload


def test_calls_to_routes_without_path_parameters_go_to_the_routes_path() -> None:
    """``_read_route`` / ``_write_route``: the route's own path, the options passed on."""
    reads = _Recorded(b'{"acls": []}')
    assert asyncio.run(reads.describe_acls(AclBindingFilter(principal="User:carol"))) == ()
    [(route, path, options)] = reads.sent
    assert (route, path) == (routes.DESCRIBE_ACLS, "/v1/acls")
    assert options["params"] == {"principal": "User:carol"}

    writes = _Recorded(b'{"producer_id_start": 5000, "producer_id_len": 1000}')
    assert asyncio.run(writes.allocate_producer_ids(broker_id=1, broker_epoch=7)) == (5000, 1000)
    [(route, path, options)] = writes.sent
    assert (route, path) == (routes.ALLOCATE_PRODUCER_IDS, "/v1/producer-ids")
    assert options["body"] == {"broker_id": 1, "broker_epoch": 7}
    assert options["idempotent"] is None  # the route's own: a block is not resent
    assert writes.leader_url == "http://127.0.0.1:19093"  # a write remembers its leader


@pytest.mark.integration  # a real HTTP server on a loopback port, and idle waits
@pytest.mark.parametrize(("keepalive_s", "same_connection"), [(5.0, True), (0.1, False)])
def test_an_idle_connection_is_kept_for_the_keepalive_timeout(
    keepalive_s: float, same_connection: bool
) -> None:
    """The heartbeat client keeps its connection across beats (broker/server.py passes at least
    twice broker.heartbeat.interval.ms): the controller takes a heartbeat connection closed
    while idle for a dead broker process (quorum/broker_channels.py)."""
    from aiohttp import web

    async def scenario() -> list[Any]:
        peers: list[Any] = []

        async def answer(request: web.Request) -> web.Response:
            assert request.transport is not None
            peers.append(request.transport.get_extra_info("peername"))
            return web.json_response({})

        app = web.Application()
        app.router.add_get("/v1/ping", answer)
        runner = web.AppRunner(app)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        client = controller_client.ControllerClient(
            [f"127.0.0.1:{port}"], keepalive_timeout_s=keepalive_s
        )
        try:
            for _ in range(2):
                await client._attempt("GET", "/v1/ping", None, None, True, 5.0)
                await asyncio.sleep(0.4)
        finally:
            await client.close()
            await runner.cleanup()
        return peers

    first, second = asyncio.run(scenario())
    assert (first == second) is same_connection


def test_a_connection_reset_while_sending_is_retried_like_any_lost_connection(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """aiohttp raises ClientConnectionResetError ("Cannot write to closing transport") when
    the pooled connection a request is written on was closed by a controller that died. A
    metadata poll is idempotent: the transport retries it (here at a live controller), as it
    does a refused connection, instead of letting the broker's metadata loader die of it."""
    from aiohttp import ClientConnectionResetError, ClientSession, web

    from pykraft.broker.controller_client import ControllerClient
    from pykraft.free_ports import pick_free_ports
    from pykraft.metadata.api.records import records_page_json

    async def records(request: web.Request) -> web.Response:
        return web.Response(body=records_page_json(7, 7, 7, []), content_type="application/json")

    calls = []
    real_request = ClientSession.request

    def request(self: ClientSession, *args: Any, **kwargs: Any) -> Any:
        calls.append(args[1])
        if len(calls) == 1:
            raise ClientConnectionResetError("Cannot write to closing transport")
        return real_request(self, *args, **kwargs)

    monkeypatch.setattr(ClientSession, "request", request)

    async def scenario() -> Any:
        app = web.Application()
        app.router.add_get("/v1/metadata/records", records)
        runner = web.AppRunner(app)
        await runner.setup()
        [port] = pick_free_ports(1)
        await web.TCPSite(runner, "127.0.0.1", port).start()
        try:
            async with ControllerClient([f"127.0.0.1:{port}"]) as client:
                return await client.fetch_records(7, max_wait_ms=0, max_records=10)
        finally:
            await runner.cleanup()

    page = asyncio.run(asyncio.wait_for(scenario(), timeout=30))
    assert (page.next_offset, page.batches) == (7, ())
    assert len(calls) == 2
