"""Hand-written Produce codec (``ProduceRequest.json`` / ``ProduceResponse.json``, v0-v11).

The request decoder hands each partition's records back as a memoryview slice of the request
frame: no copy and no re-encoding (DESIGN.md §3.3). When the frame is the ``bytearray`` the
``FrameDecoder`` returned, the slice is writable, so the broker can stamp base offsets and
partition leader epochs in place. Requests as clients send them (v3+, no tagged fields) are
read by a fast path; anything else, malformed requests included, by the checked ``Reader``
decoder, which the tests hold the fast path to.

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

import struct

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
    EMPTY_TAGGED_FIELDS,
    INT16,
    INT32,
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
    if api_version >= 3:
        try:
            decoded = _decode_common(memoryview(body), api_version >= FIRST_FLEXIBLE_VERSION)
        except (IndexError, ValueError, struct.error):
            decoded = None
        if decoded is not None:
            return decoded
    return _decode_checked(body, api_version)


def _decode_checked(body: Buffer, api_version: int) -> ProduceRequest:
    """Every field read through ``Reader``, which names the field a bad request breaks."""
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


_ACKS_AND_TIMEOUT = struct.Struct(">hi")


def _decode_common(view: memoryview, flexible: bool) -> ProduceRequest | None:
    """A v3+ request as clients send it (no tagged fields, short lengths), read without
    ``Reader``'s per-field calls, a third faster on a one-batch request. None —
    or an ``IndexError``, ``ValueError`` or ``struct.error`` — leaves the request to
    ``_decode_checked``, so every malformed request still gets its named error there. Every
    length is checked against the frame: a slice past its end would shorten, not fail."""
    end = len(view)
    if flexible:
        if view[0] >= 0x80:
            return None
        size, position = view[0] - 1, 1
    else:
        size, position = INT16.unpack_from(view, 0)[0], 2
    if size < -1 or position + size > end:
        return None
    transactional_id = None if size == -1 else str(view[position : position + size], "utf-8")
    position += max(size, 0)
    acks, timeout_ms = _ACKS_AND_TIMEOUT.unpack_from(view, position)
    position += 6
    topic_count, position = _count(view, position, flexible)
    topics = []
    for _ in range(topic_count):
        size, position = _count(view, position, flexible, string=True)
        if position + size > end:
            return None
        name = str(view[position : position + size], "utf-8")
        position += size
        partition_count, position = _count(view, position, flexible)
        partitions = []
        for _ in range(partition_count):
            index = INT32.unpack_from(view, position)[0]
            if flexible:
                size, position = _uvarint(view, position + 4)
                size -= 1
            else:
                size = INT32.unpack_from(view, position + 4)[0]
                position += 8
            length = max(size, 0)
            # Flexible versions follow the records with the partition's tagged fields.
            if size < -1 or position + length > end or (flexible and view[position + length]):
                return None
            records = None if size == -1 else view[position : position + length]
            position += length + flexible
            partitions.append(PartitionProduceData(index, records))
        if flexible and view[position]:
            return None
        position += flexible
        topics.append(TopicProduceData(name, tuple(partitions)))
    if flexible and view[position]:
        return None
    return ProduceRequest(transactional_id, acks, timeout_ms, tuple(topics))


def _count(
    view: memoryview, position: int, flexible: bool, *, string: bool = False
) -> tuple[int, int]:
    """An array count or string length and the position after it; ``ValueError`` for a null
    or negative one (``_decode_checked`` says which)."""
    if flexible:
        count, position = _uvarint(view, position)
        count -= 1
    elif string:
        count = INT16.unpack_from(view, position)[0]
        position += 2
    else:
        count = INT32.unpack_from(view, position)[0]
        position += 4
    if count < 0:
        raise ValueError(count)
    return count, position


def _uvarint(view: memoryview, position: int) -> tuple[int, int]:
    """An unsigned varint of at most four bytes (28 bits) and the position after it."""
    value = 0
    for shift in (0, 7, 14, 21):
        byte = view[position]
        position += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, position
    raise ValueError("a varint longer than this fast path reads")


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


# A partition's leading fields: index, error_code, base_offset, then log_append_time_ms (v2+)
# and log_start_offset (v5+), packed at once.
_PARTITION_HEAD_V0 = struct.Struct(">ihq")
_PARTITION_HEAD_V2 = struct.Struct(">ihqq")
_PARTITION_HEAD_V5 = struct.Struct(">ihqqq")
# v8+ without record errors or an error message: an empty array and a null string.
_NO_RECORD_ERRORS = {False: INT32.pack(0) + INT16.pack(-1), True: b"\x01\x00"}


def _encode_partition(
    out: bytearray, partition: PartitionProduceResponse, api_version: int, flexible: bool
) -> None:
    if api_version >= 5:
        out += _PARTITION_HEAD_V5.pack(
            partition.index,
            partition.error_code,
            partition.base_offset,
            partition.log_append_time_ms,
            partition.log_start_offset,
        )
    elif api_version >= 2:
        out += _PARTITION_HEAD_V2.pack(
            partition.index,
            partition.error_code,
            partition.base_offset,
            partition.log_append_time_ms,
        )
    else:
        out += _PARTITION_HEAD_V0.pack(partition.index, partition.error_code, partition.base_offset)
    if api_version >= 8:
        if not partition.record_errors and partition.error_message is None:
            out += _NO_RECORD_ERRORS[flexible]  # every successful append's answer
        else:
            _encode_record_errors(out, partition, flexible)
    if flexible:
        if api_version >= 10 and not partition.current_leader.is_default():
            out += encode_tagged_fields([(0, partition.current_leader.encode())])
        else:
            out += EMPTY_TAGGED_FIELDS


def _encode_record_errors(
    out: bytearray, partition: PartitionProduceResponse, flexible: bool
) -> None:
    """v8+: ``record_errors`` and ``error_message`` (KIP-467)."""
    out += encode_array_length(len(partition.record_errors), compact=flexible)
    for record_error in partition.record_errors:
        out += INT32.pack(record_error.batch_index)
        out += encode_nullable_string(record_error.batch_index_error_message, compact=flexible)
        if flexible:
            out += b"\x00"
    out += encode_nullable_string(partition.error_message, compact=flexible)


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
