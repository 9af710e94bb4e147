"""Hostile bodies to the controller's admin API (issue 9: deeply nested JSON answered 500).

Every route that reads a body goes through ``metadata.api.json_fields.parse_json_object``: each case
gets the project's error body with the exact status and code, writes nothing (no topic appears),
is answered within a bound, and the controller and broker still serve a well-behaved client.
"""

from __future__ import annotations

import contextlib
import http.client
import json
import socket
import time
from typing import Any

import pytest

from pykraft.metadata.api.json_fields import MAX_JSON_DEPTH, MAX_REQUEST_BODY_BYTES
from tests.hostile.conftest import SingleBroker

# A hostile body is answered within this, however it is built.
ANSWER_WITHIN_S = 2.0
TOPIC = "hostile-json"


def post(
    url: str, path: str, raw: bytes, content_type: str = "application/json", method: str = "POST"
) -> tuple[int, Any]:
    """Sends ``raw`` as is; returns (status, parsed JSON body) and checks the answer's time."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    started = time.monotonic()
    try:
        connection.request(method, path, body=raw, headers={"Content-Type": content_type})
        response = connection.getresponse()
        status, payload = response.status, response.read()
    finally:
        connection.close()
    assert time.monotonic() - started < ANSWER_WITHIN_S, (path, raw[:80])
    assert response.getheader("Content-Type", "").startswith("application/json"), payload[:200]
    return status, json.loads(payload)


def nested(depth: int) -> bytes:
    return b'{"name": "' + TOPIC.encode() + b'", "configs": ' + b"[" * depth + b"]" * depth + b"}"


# Every route that reads a body (quorum/service_admin.py, quorum/service_brokers.py).
BODY_ROUTES = [
    ("POST", "/v1/topics"), ("POST", f"/v1/topics/{TOPIC}/partitions"), ("POST", "/v1/elections"),
    ("PUT", "/v1/configs/topic/x"), ("POST", "/v1/brokers/register"),
    ("POST", "/v1/brokers/heartbeat"), ("POST", "/v1/alter-partition"),
    ("POST", "/v1/producer-ids"), ("POST", "/v1/configs"),
]  # fmt: skip

BODY_CASES: list[tuple[str, str, bytes, int, str]] = [
    # (case, "METHOD path", body, status, error code)
    *[(f"nested 100,000 deep: {method} {path}", f"{method} {path}", nested(100_000),
       400, "INVALID_REQUEST") for method, path in BODY_ROUTES],
    ("nested one past the bound", "/v1/topics", nested(MAX_JSON_DEPTH), 400, "INVALID_REQUEST"),
    ("unclosed nesting", "/v1/brokers/register", b'{"endpoints":' + b"[" * 50_000,
     400, "INVALID_REQUEST"),
    ("nested objects", "PUT /v1/configs/topic/x", b'{"set":' + b'{"a":' * 5000 + b"1" +
     b"}" * 5001, 400, "INVALID_REQUEST"),
    ("truncated JSON", "/v1/topics", b'{"name": "' + TOPIC.encode(), 400, "INVALID_REQUEST"),
    ("empty body", "/v1/topics", b"", 400, "INVALID_REQUEST"),
    ("an array", "/v1/topics", b"[]", 400, "INVALID_REQUEST"),
    ("a string", "/v1/brokers/heartbeat", b'"x"', 400, "INVALID_REQUEST"),
    ("null", "/v1/elections", b"null", 400, "INVALID_REQUEST"),
    ("NaN", "/v1/topics", b'{"name": "' + TOPIC.encode() + b'", "partitions": NaN}',
     400, "INVALID_REQUEST"),
    ("latin-1", "/v1/topics", '{"name": "hostile-é"}'.encode("latin-1"), 400, "INVALID_REQUEST"),
    ("name not a string", "/v1/topics", b'{"name": 5}', 400, "INVALID_REQUEST"),
    ("partitions a string", "/v1/topics", b'{"name": "hostile-json", "partitions": "3"}',
     400, "INVALID_REQUEST"),
    ("partitions a float", "/v1/topics", b'{"name": "hostile-json", "partitions": 1.5}',
     400, "INVALID_REQUEST"),
    ("partitions a boolean", "/v1/topics", b'{"name": "hostile-json", "partitions": true}',
     400, "INVALID_REQUEST"),
    ("partitions 5,000 digits", "/v1/topics",
     b'{"name": "hostile-json", "partitions": ' + b"9" * 5000 + b"}", 400, "INVALID_REQUEST"),
    ("a config value not a string", "/v1/topics",
     b'{"name": "hostile-json", "configs": {"retention.ms": 5}}', 400, "INVALID_REQUEST"),
    ("assignments not lists", "/v1/topics",
     b'{"name": "hostile-json", "assignments": {"0": "1"}}', 400, "INVALID_REQUEST"),
    ("an endpoint not an object", "/v1/brokers/register",
     b'{"broker_id": 7, "incarnation_id": "x", "endpoints": [3]}', 400, "INVALID_REQUEST"),
    ("an election item not an object", "/v1/elections", b'{"partitions": [1]}',
     400, "INVALID_REQUEST"),
]  # fmt: skip


@pytest.fixture
def single_broker(shared_single_broker: SingleBroker) -> SingleBroker:
    """One broker for the module's cases: each compares the topics before and after."""
    return shared_single_broker


def topic_names(single_broker: SingleBroker) -> set[str]:
    return {t["name"] for t in single_broker.cluster.request("GET", "/v1/topics")["topics"]}


def test_hostile_bodies_answer_400_and_write_nothing(single_broker: SingleBroker) -> None:
    url = single_broker.cluster.controllers[0].url
    topics_before = topic_names(single_broker)
    answers = {}
    for case, route, raw, _, _ in BODY_CASES:
        method, _, path = route.rpartition(" ")
        answered, body = post(url, path, raw, method=method or "POST")
        answers[case] = (answered, body.get("error"))
        assert set(body) >= {"error", "message"} and body["message"].endswith("."), (case, body)
    assert answers == {case: (status, code) for case, _, _, status, code in BODY_CASES}
    assert topic_names(single_broker) == topics_before
    single_broker.assert_still_serves()


def test_a_bogus_charset_is_ignored_json_is_utf8(single_broker: SingleBroker) -> None:
    url = single_broker.cluster.controllers[0].url
    status, body = post(url, "/v1/topics", b'{"name": 5}', "application/json; charset=no-such")
    assert (status, body["error"]) == (400, "INVALID_REQUEST")
    single_broker.assert_still_serves()


def test_a_body_over_the_bound_answers_413(single_broker: SingleBroker) -> None:
    controller = single_broker.cluster.controllers[0]
    topics_before = topic_names(single_broker)
    body = b'{"name": "' + TOPIC.encode() + b'", "x": "' + b"a" * MAX_REQUEST_BODY_BYTES + b'"}'
    head = (
        f"POST /v1/topics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
        f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n"
    ).encode()
    started = time.monotonic()
    with socket.create_connection(("127.0.0.1", controller.http_port), timeout=10) as sock:
        with contextlib.suppress(OSError):  # the controller may stop reading once it answered
            sock.sendall(head + body)
        answer = b""
        while chunk := sock.recv(65536):
            answer += chunk
    assert time.monotonic() - started < 5 * ANSWER_WITHIN_S
    status_line, _, rest = answer.partition(b"\r\n")
    assert status_line.split()[1] == b"413", answer[:300]
    parsed = json.loads(rest.partition(b"\r\n\r\n")[2])
    assert parsed["error"] == "REQUEST_TOO_LARGE" and parsed["message"].endswith(".")
    assert topic_names(single_broker) == topics_before
    single_broker.assert_still_serves()
