"""Hostile requests at the Kafka listener's header level: ApiVersions from the future (KIP-511),
APIs and versions the broker does not serve, headers that do not parse, oversize frames.

Each case sends its bytes on a raw connection, checks the exact answer (or that the connection
closed without one), that the victim partition's log end offset and files did not change, and
that a well-behaved client is still served.
"""

from __future__ import annotations

import socket
import struct
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from tests.broker.wire_client import (
    api_versions_frame,
    correlation_id,
    decode_api_versions,
    request_frame,
)
from tests.hostile.conftest import SingleBroker
from tests.hostile.support import VICTIM, nothing_written

TIMEOUT_S = 10.0


@pytest.fixture
def single_broker(shared_single_broker: SingleBroker) -> SingleBroker:
    """One broker for the module's cases: each checks before and after (``harmless``)."""
    return shared_single_broker


class RawConnection:
    """One TCP connection: send bytes, read whole response frames, see the close."""

    def __init__(self, address: tuple[str, int]) -> None:
        self.sock = socket.create_connection(address, timeout=TIMEOUT_S)

    def send(self, data: bytes) -> None:
        self.sock.sendall(data)

    def _read_exactly(self, size: int) -> bytes | None:
        data = bytearray()
        while len(data) < size:
            chunk = self.sock.recv(size - len(data))
            if not chunk:
                assert not data, "the connection closed inside a frame"
                return None
            data += chunk
        return bytes(data)

    def frame(self) -> bytes:
        """The next response frame (without its size prefix); fails if the broker closed."""
        prefix = self._read_exactly(4)
        assert prefix is not None, "the broker closed the connection instead of answering"
        (size,) = struct.unpack(">i", prefix)
        payload = self._read_exactly(size)
        assert payload is not None
        return payload

    def closed_without_answer(self) -> bool:
        """True when the broker closed the connection and sent nothing more."""
        try:
            return self.sock.recv(1) == b""
        except ConnectionResetError:
            return True


@contextmanager
def raw(broker: SingleBroker) -> Iterator[RawConnection]:
    connection = RawConnection(broker.host_port)
    try:
        yield connection
    finally:
        connection.sock.close()


@contextmanager
def harmless(broker: SingleBroker) -> Iterator[None]:
    """Nothing written to the victim partition, and a well-behaved client served after."""
    with nothing_written(broker):
        yield
    broker.assert_still_serves()


def assert_full_api_versions(connection: RawConnection, correlation: int) -> None:
    connection.send(api_versions_frame(correlation, 3))
    frame = connection.frame()
    response = decode_api_versions(frame, 3)
    assert (correlation_id(frame), response.error_code) == (correlation, Errors.NONE)
    assert len(response.api_keys) == len(SUPPORTED_API_VERSIONS)


def metadata_body(version: int) -> bytes:
    request = MetadataRequest(version=version, topics=None, allow_auto_topic_creation=False)
    return bytes(request.encode(version=version))


def v1_layout_frame(api_key: int, api_version: int, correlation: int, body: bytes) -> bytes:
    """A header in v1 layout (client id, no tagged section) whatever the version says."""
    payload = struct.pack(">hhih", api_key, api_version, correlation, 3) + b"old" + body
    return struct.pack(">i", len(payload)) + payload


@pytest.mark.parametrize(
    "frame",
    [
        request_frame(ApiKey.API_VERSIONS, 99, 41, b"\x00"),  # header v2, as Kafka reads v3+
        v1_layout_frame(ApiKey.API_VERSIONS, 99, 41, b""),  # a layout we cannot know
    ],
    ids=["header-v2", "header-v1-layout"],
)
def test_api_versions_v99_gets_the_v0_unsupported_answer_and_the_connection_stays(
    single_broker: SingleBroker, frame: bytes
) -> None:
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(frame)
        answer = connection.frame()
        # KIP-511: response header v0 (correlation id only), body v0: error 35 and the
        # ApiVersions range alone (ApiVersionsRequest.getErrorResponse).
        assert correlation_id(answer) == 41
        response = decode_api_versions(answer, 0)
        assert response.error_code == int(Errors.UNSUPPORTED_VERSION) == 35
        assert [(k.api_key, k.min_version, k.max_version) for k in response.api_keys] == [
            (18, 0, 4)
        ]
        assert answer[4:] == bytes.fromhex("0023 00000001 0012 0000 0004")
        # The client falls back (here to v3) on the same connection, then carries on.
        assert_full_api_versions(connection, 42)
        connection.send(request_frame(ApiKey.METADATA, 12, 43, metadata_body(12)))
        metadata = connection.frame()
        assert correlation_id(metadata) == 43


def test_an_unknown_api_key_closes_the_connection_after_earlier_answers(
    single_broker: SingleBroker,
) -> None:
    # No schema knows key 999, so no error response can be encoded: Kafka's
    # RequestHeader.parse throws "Unknown API key" and the connection closes.
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(api_versions_frame(1, 3) + request_frame(999, 0, 2, b"\x00" * 8))
        assert correlation_id(connection.frame()) == 1
        assert connection.closed_without_answer()


def test_a_version_not_served_gets_unsupported_version_per_partition(
    single_broker: SingleBroker,
) -> None:
    # ListOffsets v11: Kafka 4.x's schema, past the maximum we advertise (Kafka 3.9's).
    topic = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        version=11, replica_id=-1, isolation_level=0, timeout_ms=1000,
        topics=[topic(name=VICTIM, partitions=[topic.ListOffsetsPartition(
            partition_index=0, current_leader_epoch=-1, timestamp=-1)])],
    )  # fmt: skip
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(request_frame(ApiKey.LIST_OFFSETS, 11, 7, request.encode(version=11)))
        answer = connection.frame()
        assert correlation_id(answer) == 7
        response = ListOffsetsResponse.decode(answer[5:], version=11)  # header v1: a tag byte
        assert [
            (t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in response.topics
        ] == [(VICTIM, [(0, Errors.UNSUPPORTED_VERSION)])]
        assert_full_api_versions(connection, 8)


def produce_v12(records: bytes) -> bytes:
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        version=12, acks=-1, timeout_ms=1000, transactional_id=None,
        topic_data=[data(name=VICTIM, partition_data=[
            data.PartitionProduceData(index=0, records=records)])],
    )  # fmt: skip
    return bytes(request.encode(version=12))


@pytest.mark.parametrize(
    ("api_key", "api_version", "body", "check"),
    [
        # Metadata v13 exists in Kafka's schema; we advertise up to v12.
        (ApiKey.METADATA, 13, metadata_body(13), "metadata"),
        # Produce v12 (we advertise up to v11, Kafka 3.9's) must not write its batch.
        (ApiKey.PRODUCE, 12, produce_v12(b"\x00" * 70), "produce"),
    ],
    ids=["metadata-v13", "produce-v12"],
)
def test_a_known_api_at_an_unsupported_version_gets_unsupported_version(
    single_broker: SingleBroker, api_key: int, api_version: int, body: bytes, check: str
) -> None:
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(request_frame(api_key, api_version, 9, body))
        answer = connection.frame()
        assert correlation_id(answer) == 9
        # Both versions are flexible: response header v1 (correlation id + empty tags).
        assert answer[4] == 0
        codes: Any
        if check == "metadata":
            metadata = MetadataResponse.decode(answer[5:], version=13)
            codes = (metadata.error_code, metadata.topics)
            assert codes == (Errors.UNSUPPORTED_VERSION, [])
        else:
            produced = ProduceResponse.decode(answer[5:], version=12)
            codes = [
                (t.name, [(p.index, p.error_code) for p in t.partition_responses])
                for t in produced.responses
            ]
            assert codes == [(VICTIM, [(0, Errors.UNSUPPORTED_VERSION)])]
        assert_full_api_versions(connection, 10)


@pytest.mark.parametrize(
    "payload",
    [
        struct.pack(">hhih", ApiKey.METADATA, 12, 5, 200) + b"cut",  # client id runs past the end
        struct.pack(">hhih", ApiKey.METADATA, 4, 5, 2) + b"\xc3\x28",  # client id not UTF-8
        struct.pack(">hh", ApiKey.METADATA, 12),  # no correlation id
        struct.pack(">hhih", ApiKey.METADATA, 12, 5, 0) + b"\x05",  # tagged fields cut short
    ],
    ids=["client-id-overrun", "client-id-not-utf8", "no-correlation-id", "tags-cut"],
)
def test_a_header_that_does_not_parse_closes_the_connection(
    single_broker: SingleBroker, payload: bytes
) -> None:
    # Kafka: RequestHeader.parse throws InvalidRequestException, the channel is closed.
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(api_versions_frame(1, 3) + struct.pack(">i", len(payload)) + payload)
        assert correlation_id(connection.frame()) == 1
        assert connection.closed_without_answer()


@pytest.mark.broker_properties({"socket.request.max.bytes": "4096"})
@pytest.mark.parametrize("size", [4097, 2**31 - 1, -1])
def test_a_size_prefix_over_socket_request_max_bytes_closes_the_connection(
    single_broker: SingleBroker, size: int
) -> None:
    # Kafka's NetworkReceive.readFrom: "Invalid receive (size = N larger than M)", closed.
    with harmless(single_broker), raw(single_broker) as connection:
        connection.send(api_versions_frame(1, 3) + struct.pack(">i", size) + b"\x00" * 64)
        assert correlation_id(connection.frame()) == 1
        assert connection.closed_without_answer()
    # A request of exactly socket.request.max.bytes is still served.
    body = metadata_body(12)
    padding = 4096 - (len(request_frame(ApiKey.METADATA, 12, 2, body)) - 4)
    frame = request_frame(ApiKey.METADATA, 12, 2, body + b"\x00" * padding)
    assert struct.unpack_from(">i", frame)[0] == 4096
    with raw(single_broker) as connection:
        connection.send(frame)
        assert correlation_id(connection.frame()) == 2
