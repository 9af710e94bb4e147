"""Hand-written Produce codec (``ProduceRequest.json`` / ``ProduceResponse.json``, v0-v11).

The request decoder hands each partition's records back as a memoryview slice of the request
frame: no copy and no re-encoding (DESIGN.md §3.3). When the frame is the ``bytearray`` the
``FrameDecoder`` returned, the slice is writable, so the broker can stamp base offsets and
partition leader epochs in place.

Version history that matters here:

* v0-v2 carry message format v0/v1; we decode them only to answer UNSUPPORTED_VERSION on every
  partition (``unsupported_version_response``, see ``apis.request_disposition``).
* v3 adds ``transactional_id``; v9 is the first flexible version (compact types, tagged fields);
  v10 adds the ``CurrentLeader`` and ``NodeEndpoints`` tagged fields to the response (KIP-951);
  v11 has v10's layout: it tells the broker the client knows TRANSACTION_ABORTABLE (KIP-890,
  ``broker.transaction_verification.supported_operation``).
* Response: v1 adds ``throttle_time_ms``, v2 ``log_append_time_ms``, v5 ``log_start_offset``,
  v8 ``record_errors`` and ``error_message`` (KIP-467).

A request with ``acks == 0`` gets no response at all (Kafka's ``KafkaApis.handleProduceRequest``).
"""

from __future__ import annotations

import attrs

from pykraft.protocol.common import (
    UNKNOWN_LEADER,
    LeaderIdAndEpoch,
    NodeEndpoint,
    encode_node_endpoints,
)
from pykraft.protocol.errors import Errors, UnsupportedRequestError
from pykraft.protocol.segments import Buffer
from pykraft.protocol.wire import (
    INT16,
    INT32,
    INT64,
    Reader,
    encode_array_length,
    encode_nullable_string,
    encode_string,
    encode_tagged_fields,
)

PRODUCE_API_KEY = 0
MIN_VERSION = 0
MAX_VERSION = 11
FIRST_FLEXIBLE_VERSION = 9


@attrs.frozen
class PartitionProduceData:
    index: int
    # Zero-copy slice of the request frame; None when the client sent null records.
    records: memoryview | None


@attrs.frozen
class TopicProduceData:
    name: str
    partition_data: tuple[PartitionProduceData, ...]


@attrs.frozen
class ProduceRequest:
    transactional_id: str | None
    acks: int
    timeout_ms: int
    topic_data: tuple[TopicProduceData, ...]


def _check_version(api_version: int) -> None:
    if not MIN_VERSION <= api_version <= MAX_VERSION:
        raise UnsupportedRequestError(PRODUCE_API_KEY, api_version, "produce codec handles 0-10")


def decode_produce_request(body: Buffer, api_version: int) -> ProduceRequest:
    """Decode a Produce request body; raises ``MalformedRequestError`` on bad bytes."""
    _check_version(api_version)
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    reader = Reader(body)
    transactional_id = None
    if api_version >= 3:
        transactional_id = reader.nullable_string("transactional_id", compact=flexible)
    acks = reader.int16("acks")
    timeout_ms = reader.int32("timeout_ms")
    topics = []
    for _ in range(reader.array_length("topic_data", compact=flexible)):
        name = reader.string("name", compact=flexible)
        partitions = []
        for _ in range(reader.array_length("partition_data", compact=flexible)):
            index = reader.int32("index")
            records = reader.nullable_bytes("records", compact=flexible)
            if flexible:
                reader.skip_tagged_fields("PartitionProduceData tagged fields")
            partitions.append(PartitionProduceData(index, records))
        if flexible:
            reader.skip_tagged_fields("TopicProduceData tagged fields")
        topics.append(TopicProduceData(name, tuple(partitions)))
    if flexible:
        reader.skip_tagged_fields("ProduceRequest tagged fields")
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


@attrs.frozen
class BatchIndexAndErrorMessage:
    batch_index: int
    batch_index_error_message: str | None = None


@attrs.frozen
class PartitionProduceResponse:
    index: int
    error_code: int = Errors.NONE
    base_offset: int = -1
    log_append_time_ms: int = -1
    log_start_offset: int = -1
    record_errors: tuple[BatchIndexAndErrorMessage, ...] = ()
    error_message: str | None = None
    current_leader: LeaderIdAndEpoch = UNKNOWN_LEADER


@attrs.frozen
class TopicProduceResponse:
    name: str
    partition_responses: tuple[PartitionProduceResponse, ...]


@attrs.frozen
class ProduceResponse:
    responses: tuple[TopicProduceResponse, ...]
    throttle_time_ms: int = 0
    node_endpoints: tuple[NodeEndpoint, ...] = ()


def encode_produce_response(response: ProduceResponse, api_version: int) -> bytes:
    """Encode a Produce response body (no size prefix, no header) for ``api_version``."""
    _check_version(api_version)
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(encode_array_length(len(response.responses), compact=flexible))
    for topic in response.responses:
        out += encode_string(topic.name, compact=flexible)
        out += encode_array_length(len(topic.partition_responses), compact=flexible)
        for partition in topic.partition_responses:
            _encode_partition(out, partition, api_version, flexible)
        if flexible:
            out += b"\x00"
    if api_version >= 1:
        out += INT32.pack(response.throttle_time_ms)
    if flexible:
        tagged = []
        if api_version >= 10 and response.node_endpoints:
            tagged.append((0, encode_node_endpoints(response.node_endpoints)))
        out += encode_tagged_fields(tagged)
    return bytes(out)


def _encode_partition(
    out: bytearray, partition: PartitionProduceResponse, api_version: int, flexible: bool
) -> None:
    out += INT32.pack(partition.index)
    out += INT16.pack(partition.error_code)
    out += INT64.pack(partition.base_offset)
    if api_version >= 2:
        out += INT64.pack(partition.log_append_time_ms)
    if api_version >= 5:
        out += INT64.pack(partition.log_start_offset)
    if api_version >= 8:
        out += encode_array_length(len(partition.record_errors), compact=flexible)
        for record_error in partition.record_errors:
            out += INT32.pack(record_error.batch_index)
            out += encode_nullable_string(record_error.batch_index_error_message, compact=flexible)
            if flexible:
                out += b"\x00"
        out += encode_nullable_string(partition.error_message, compact=flexible)
    if flexible:
        tagged = []
        if api_version >= 10 and not partition.current_leader.is_default():
            tagged.append((0, partition.current_leader.encode()))
        out += encode_tagged_fields(tagged)


def unsupported_version_response(request: ProduceRequest) -> ProduceResponse:
    """UNSUPPORTED_VERSION for every partition: the answer to Produce v0-v2 (KIP-896)."""
    return ProduceResponse(
        tuple(
            TopicProduceResponse(
                topic.name,
                tuple(
                    PartitionProduceResponse(p.index, error_code=Errors.UNSUPPORTED_VERSION)
                    for p in topic.partition_data
                ),
            )
            for topic in request.topic_data
        )
    )
