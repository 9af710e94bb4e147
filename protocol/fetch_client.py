"""The client side of the Fetch codec: what a follower sends and reads, hand-written.

The replica fetcher speaks Fetch with it (``fetcher.leader_codecs``, issue 18: kafka-python's
generated classes copied every partition's records and took ~5 us a partition to encode a
request); the tests use both directions too (the codec round-trips on its own, and the hostile
suite speaks it).

``encode_fetch_request`` is the inverse of ``fetch.decode_fetch_request`` and
``decode_fetch_response`` the inverse of ``fetch.encode_fetch_response``; together they make
the Fetch codec round-trip testable on its own. Decoded records are one zero-copy memoryview
slice of the response frame per partition (``records == (view,)``), ready for
``PartitionLog.append_as_follower``.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch, decode_node_endpoints
from pykraft.protocol.errors import MalformedRequestError
from pykraft.protocol.fetch import (
    FIRST_FLEXIBLE_VERSION,
    NO_DIVERGING_EPOCH,
    NO_REPLICA_STATE,
    NO_SNAPSHOT_ID,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
    SnapshotId,
    check_version,
    read_topic_id,
)
from pykraft.protocol.segments import Buffer
from pykraft.protocol.wire import (
    INT8,
    INT32,
    INT64,
    ZERO_UUID,
    Reader,
    encode_array_length,
    encode_nullable_string,
    encode_string,
    encode_tagged_fields,
)

# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes: a partition of a Fetch request from v12 on.
_PARTITION_V12 = struct.Struct(">iiqiqi")


def encode_fetch_request(request: FetchRequest, api_version: int) -> bytes:
    """Encode a Fetch request body (no size, no header) for ``api_version``."""
    check_version(api_version)
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    out = bytearray()
    if api_version <= 14:
        out += INT32.pack(request.replica_id)
    out += INT32.pack(request.max_wait_ms) + INT32.pack(request.min_bytes)
    out += INT32.pack(request.max_bytes) + INT8.pack(request.isolation_level)
    if api_version >= 7:
        out += INT32.pack(request.session_id) + INT32.pack(request.session_epoch)
    out += encode_array_length(len(request.topics), compact=flexible)
    for topic in request.topics:
        out += _topic_key(topic.topic, topic.topic_id.bytes, api_version, flexible)
        out += encode_array_length(len(topic.partitions), compact=flexible)
        for p in topic.partitions:
            if api_version >= 12:  # every field of a follower's partition in one pack (issue 18)
                out += _PARTITION_V12.pack(
                    p.partition,
                    p.current_leader_epoch,
                    p.fetch_offset,
                    p.last_fetched_epoch,
                    p.log_start_offset,
                    p.partition_max_bytes,
                )
                out += b"\x00" if flexible else b""
                continue
            out += INT32.pack(p.partition)
            if api_version >= 9:
                out += INT32.pack(p.current_leader_epoch)
            out += INT64.pack(p.fetch_offset)
            if api_version >= 12:
                out += INT32.pack(p.last_fetched_epoch)
            if api_version >= 5:
                out += INT64.pack(p.log_start_offset)
            out += INT32.pack(p.partition_max_bytes)
            out += b"\x00" if flexible else b""
        out += b"\x00" if flexible else b""
    if api_version >= 7:
        out += encode_array_length(len(request.forgotten_topics_data), compact=flexible)
        for forgotten in request.forgotten_topics_data:
            out += _topic_key(forgotten.topic, forgotten.topic_id.bytes, api_version, flexible)
            out += encode_array_length(len(forgotten.partitions), compact=flexible)
            out += b"".join(INT32.pack(partition) for partition in forgotten.partitions)
            out += b"\x00" if flexible else b""
    if api_version >= 11:
        out += encode_string(request.rack_id, compact=flexible)
    if flexible:
        out += encode_tagged_fields(_request_tags(request, api_version))
    return bytes(out)


def _topic_key(topic: str, topic_id: bytes, api_version: int, flexible: bool) -> bytes:
    return topic_id if api_version >= 13 else encode_string(topic, compact=flexible)


def _request_tags(request: FetchRequest, api_version: int) -> list[tuple[int, bytes]]:
    tags = []
    if request.cluster_id is not None:
        tags.append((0, encode_nullable_string(request.cluster_id, compact=True)))
    state = request.replica_state
    if api_version >= 15 and state != NO_REPLICA_STATE:
        tags.append((1, INT32.pack(state.replica_id) + INT64.pack(state.replica_epoch) + b"\x00"))
    return tags


# The fields every partition answer opens with, read with one unpack: a follower decodes them
# every round (issue 18). partition_index, error_code, high_watermark, last_stable_offset, and
# from v5 log_start_offset.
_PARTITION_HEAD = struct.Struct(">ihqq")
_PARTITION_HEAD_V5 = struct.Struct(">ihqqq")
_TOP_LEVEL = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id (v7+)


def decode_fetch_response(body: Buffer, api_version: int) -> FetchResponse:
    """Decode a Fetch response body; raises ``MalformedRequestError`` on bad bytes."""
    check_version(api_version)
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    reader = Reader(body)
    error_code, session_id = 0, 0
    if api_version >= 7 and reader.remaining >= _TOP_LEVEL.size:
        head = reader.bytes_view(_TOP_LEVEL.size, "FetchResponse fixed fields")
        throttle_time_ms, error_code, session_id = _TOP_LEVEL.unpack(head)
    else:
        throttle_time_ms = reader.int32("throttle_time_ms")
        if api_version >= 7:
            error_code = reader.int16("error_code")
            session_id = reader.int32("session_id")
    responses = []
    for _ in range(reader.array_length("responses", compact=flexible)):
        topic, topic_id = "", ZERO_UUID
        if api_version >= 13:
            topic_id = read_topic_id(reader)
        else:
            topic = reader.string("topic", compact=flexible)
        count = reader.array_length("partitions", compact=flexible)
        partitions = tuple(_decode_partition(reader, api_version, flexible) for _ in range(count))
        if flexible:
            reader.skip_tagged_fields("FetchableTopicResponse tagged fields")
        responses.append(FetchableTopicResponse(partitions, topic, topic_id))
    response = FetchResponse(tuple(responses), throttle_time_ms, error_code, session_id)
    if flexible:
        tags = reader.tagged_fields("FetchResponse tagged fields")
        if 0 in tags and api_version >= 16:
            response = attrs.evolve(response, node_endpoints=decode_node_endpoints(Reader(tags[0])))
    if reader.remaining:
        # A length that lied short leaves bytes behind: the answer is not what it says.
        raise MalformedRequestError(
            "FetchResponse", f"{reader.remaining} bytes left after the response", reader.position
        )
    return response


# A flexible (v12+) partition answer's fixed fields, then its usual next ones: null aborted
# transactions (compact count 0) and preferred_read_replica.
_USUAL_PARTITION_FIXED = struct.Struct(">ihqqqBi")


def _decode_partition(reader: Reader, api_version: int, flexible: bool) -> PartitionData:
    if flexible:
        fast = _decode_usual_partition(reader)
        if fast is not None:
            return fast
    if api_version >= 5:
        head = reader.bytes_view(_PARTITION_HEAD_V5.size, "PartitionData fixed fields")
        fields = _PARTITION_HEAD_V5.unpack(head)
        partition_index, error_code, high_watermark, last_stable_offset, log_start_offset = fields
    else:
        head = reader.bytes_view(_PARTITION_HEAD.size, "PartitionData fixed fields")
        partition_index, error_code, high_watermark, last_stable_offset = _PARTITION_HEAD.unpack(
            head
        )
        log_start_offset = -1
    aborted: tuple[AbortedTransaction, ...] | None = None
    count = reader.array_length("aborted_transactions", compact=flexible, nullable=True)
    if count >= 0:
        aborted = tuple(_decode_aborted(reader, flexible) for _ in range(count))
    preferred_read_replica = reader.int32("preferred_read_replica") if api_version >= 11 else -1
    view = reader.nullable_bytes("records", compact=flexible)
    records = None if view is None else ((view,) if view.nbytes else ())
    diverging, leader, snapshot = NO_DIVERGING_EPOCH, UNKNOWN_LEADER, NO_SNAPSHOT_ID
    if flexible:
        tags = reader.tagged_fields("PartitionData tagged fields")
        if 0 in tags:
            diverging = _decode_epoch_end_offset(Reader(tags[0]))
        if 1 in tags:
            leader = LeaderIdAndEpoch.decode(Reader(tags[1]))
        if 2 in tags:
            snapshot = _decode_snapshot_id(Reader(tags[2]))
    return PartitionData(
        partition_index,
        error_code,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        diverging,
        leader,
        snapshot,
        aborted,
        preferred_read_replica,
        records,
    )


def _decode_usual_partition(reader: Reader) -> PartitionData | None:
    """A follower's every answer (issue 18): a flexible partition with null aborted
    transactions and no tagged fields, read with one unpack and four reads instead of a read
    per field; None (the reader where it was) for any other shape, which the general path
    reads and checks field by field."""
    start = reader.position
    if reader.remaining <= _USUAL_PARTITION_FIXED.size:
        return None
    fixed = reader.bytes_view(_USUAL_PARTITION_FIXED.size, "PartitionData fixed fields")
    (
        partition_index,
        error_code,
        high_watermark,
        last_stable_offset,
        log_start_offset,
        aborted_count,
        preferred_read_replica,
    ) = _USUAL_PARTITION_FIXED.unpack(fixed)
    if aborted_count == 0:  # compact 0: null aborted transactions
        size = reader.uvarint("records") - 1
        if 0 <= size < reader.remaining:
            records = reader.bytes_view(size, "records")
            if reader.bytes_view(1, "PartitionData tagged fields")[0] == 0:
                return PartitionData(
                    partition_index,
                    error_code,
                    high_watermark,
                    last_stable_offset,
                    log_start_offset,
                    preferred_read_replica=preferred_read_replica,
                    records=(records,) if size else (),
                )
    reader.position = start  # another shape: null records, aborted transactions or tags
    return None


def _decode_aborted(reader: Reader, flexible: bool) -> AbortedTransaction:
    transaction = AbortedTransaction(reader.int64("producer_id"), reader.int64("first_offset"))
    if flexible:
        reader.skip_tagged_fields("AbortedTransaction tagged fields")
    return transaction


def _decode_epoch_end_offset(reader: Reader) -> EpochEndOffset:
    value = EpochEndOffset(reader.int32("epoch"), reader.int64("end_offset"))
    reader.skip_tagged_fields("EpochEndOffset tagged fields")
    return value


def _decode_snapshot_id(reader: Reader) -> SnapshotId:
    value = SnapshotId(reader.int64("end_offset"), reader.int32("epoch"))
    reader.skip_tagged_fields("SnapshotId tagged fields")
    return value
