"""ControllerClient's reading of answers, without a controller: what the contract cannot read is
the controller's failure, never a KeyError in the broker (the transport is tested against real
controllers in tests/integration/test_broker_controller_client.py)."""

from __future__ import annotations

import pytest

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.controller_client import (
    ControllerRequestError,
    SnapshotRequiredError,
    decode_answer,
    error_body_of,
)
from pykraft.metadata.api import brokers, routes
from pykraft.metadata.api.errors import ErrorBody, SnapshotRef, error_body_to_json
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
