"""Hand-written Fetch codec (``FetchRequest.json`` / ``FetchResponse.json``, v4-v17).

The response encoder never touches record bytes: each partition's records are a tuple of chunks
(in-memory buffers or file slices) and the encoder returns ``Segments`` — its own small byte
runs interleaved with those chunks — so the network layer can ``sendfile`` straight from
segment files (DESIGN.md §3.3).

Version history that matters here (KIP numbers in brackets):

* v4 baseline (KIP-896): ``isolation_level``, ``last_stable_offset``, ``aborted_transactions``;
  v5 ``log_start_offset``; v7 fetch sessions (``session_id``, ``session_epoch``,
  ``forgotten_topics_data``, top-level ``error_code``) [KIP-227]; v9 ``current_leader_epoch``
  [KIP-320]; v11 ``rack_id`` and ``preferred_read_replica`` [KIP-392];
* v12 first flexible version: ``last_fetched_epoch`` in the request, tagged ``DivergingEpoch``
  (0), ``CurrentLeader`` (1), ``SnapshotId`` (2) per partition and ``ClusterId`` (0) in the
  request [KIP-595, KIP-320];
* v13 topic ids replace topic names [KIP-516]; v15 ``replica_id`` moves into the tagged
  ``ReplicaState`` (1) with the follower's broker epoch [KIP-903]; v16 ``NodeEndpoints`` (0) in
  the response [KIP-951]; v17 adds the tagged ``ReplicaDirectoryId`` (0) per partition, which
  only controllers read (the decoder skips it), and leaves the response as v16 [KIP-853].

Tagged struct fields are written only when they differ from their defaults, as Kafka's
generated code does, so our bytes equal Kafka's (and kafka-python's, and kio's).
"""

from __future__ import annotations

import struct
import uuid

import attrs

from pykraft.protocol.common import (
    UNKNOWN_LEADER,
    LeaderIdAndEpoch,
    NodeEndpoint,
    encode_node_endpoints,
)
from pykraft.protocol.errors import Errors, UnsupportedRequestError
from pykraft.protocol.segments import Buffer, Segment, Segments
from pykraft.protocol.wire import (
    INT32,
    ZERO_UUID,
    Reader,
    encode_array_length,
    encode_string,
    encode_tagged_fields,
    encode_uvarint,
)

FETCH_API_KEY = 1
MIN_VERSION = 4
MAX_VERSION = 17
FIRST_FLEXIBLE_VERSION = 12
# FetchRequest.MaxBytes default (Integer.MAX_VALUE).
DEFAULT_MAX_BYTES = 0x7FFFFFFF


def check_version(api_version: int) -> None:
    if not MIN_VERSION <= api_version <= MAX_VERSION:
        raise UnsupportedRequestError(FETCH_API_KEY, api_version, "fetch codec handles 4-17")


# ------------------------------------------------------------------------------------ request


@attrs.frozen
class FetchPartition:
    partition: int
    fetch_offset: int
    partition_max_bytes: int
    current_leader_epoch: int = -1
    last_fetched_epoch: int = -1
    log_start_offset: int = -1


@attrs.frozen
class FetchTopic:
    partitions: tuple[FetchPartition, ...]
    topic: str = ""  # v4-v12
    topic_id: uuid.UUID = ZERO_UUID  # v13+


@attrs.frozen
class ForgottenTopic:
    partitions: tuple[int, ...]
    topic: str = ""  # v7-v12
    topic_id: uuid.UUID = ZERO_UUID  # v13+


@attrs.frozen
class ReplicaState:
    replica_id: int = -1
    replica_epoch: int = -1


NO_REPLICA_STATE = ReplicaState()


@attrs.frozen
class FetchRequest:
    # Who fetches: -1 for a consumer, else the follower's broker id. The body field up to v14,
    # ReplicaState.replica_id from v15 — Kafka's FetchRequest.replicaId().
    replica_id: int
    max_wait_ms: int
    min_bytes: int
    topics: tuple[FetchTopic, ...]
    max_bytes: int = DEFAULT_MAX_BYTES
    isolation_level: int = 0
    session_id: int = 0
    session_epoch: int = -1
    forgotten_topics_data: tuple[ForgottenTopic, ...] = ()
    rack_id: str = ""
    cluster_id: str | None = None
    replica_state: ReplicaState = NO_REPLICA_STATE


# max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch (v7+).
_HEAD_V7 = struct.Struct(">iiibii")


def decode_fetch_request(body: Buffer, api_version: int) -> FetchRequest:
    """Decode a Fetch request body; raises ``MalformedRequestError`` on bad bytes."""
    check_version(api_version)
    if api_version >= FIRST_FLEXIBLE_VERSION:
        try:
            decoded = _decode_common(memoryview(body), api_version)
        except (IndexError, ValueError, struct.error):
            decoded = None
        if decoded is not None:
            return decoded
    return _decode_checked(body, api_version)


def _decode_checked(body: Buffer, api_version: int) -> FetchRequest:
    """Every field read through ``Reader``, which names the field a bad request breaks."""
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    reader = Reader(body)
    replica_id, session_id, session_epoch = -1, 0, -1
    if api_version >= 7 and reader.remaining >= _HEAD_V7.size + 4 * (api_version <= 14):
        # The fixed head in one unpack (each follower fetch); short input takes the field by
        # field path below, which names the field that is cut off.
        if api_version <= 14:
            replica_id = reader.int32("replica_id")
        start = reader.position
        max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = (
            _HEAD_V7.unpack_from(body, start)
        )
        reader.position = start + _HEAD_V7.size
    else:
        replica_id = reader.int32("replica_id") if api_version <= 14 else -1
        max_wait_ms = reader.int32("max_wait_ms")
        min_bytes = reader.int32("min_bytes")
        max_bytes = reader.int32("max_bytes")
        isolation_level = reader.int8("isolation_level")
        if api_version >= 7:
            session_id = reader.int32("session_id")
            session_epoch = reader.int32("session_epoch")
    topics = tuple(
        _decode_fetch_topic(reader, api_version, flexible)
        for _ in range(reader.array_length("topics", compact=flexible))
    )
    forgotten: tuple[ForgottenTopic, ...] = ()
    if api_version >= 7:
        forgotten = tuple(
            _decode_forgotten_topic(reader, api_version, flexible)
            for _ in range(reader.array_length("forgotten_topics_data", compact=flexible))
        )
    rack_id = reader.string("rack_id", compact=flexible) if api_version >= 11 else ""
    cluster_id, replica_state = None, NO_REPLICA_STATE
    if flexible:
        tags = reader.tagged_fields("FetchRequest tagged fields")
        if 0 in tags:
            cluster_id = Reader(tags[0]).nullable_string("cluster_id", compact=True)
        if 1 in tags and api_version >= 15:
            replica_state = _decode_replica_state(Reader(tags[1]))
            replica_id = replica_state.replica_id
    return FetchRequest(
        replica_id,
        max_wait_ms,
        min_bytes,
        topics,
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        forgotten,
        rack_id,
        cluster_id,
        replica_state,
    )


# partition, current_leader_epoch, fetch_offset, last_fetched_epoch, log_start_offset,
# partition_max_bytes (v12+).
_PARTITION_V12 = struct.Struct(">iiqiqi")
# ReplicaState (v15+, tag 1): replica_id, replica_epoch, its empty tagged fields.
_REPLICA_STATE = struct.Struct(">iqb")


def _decode_common(view: memoryview, api_version: int) -> FetchRequest | None:
    """A flexible request as brokers and clients send it (counts and lengths below 127, no
    tagged fields but the request's own), read without ``Reader``'s per-field calls: a
    follower's one-partition fetch in about a third of the time (issue 18: the leader decodes
    two per acks=all record). None — or an ``IndexError``, ``ValueError`` or ``struct.error`` —
    leaves the request to the checked path, so every malformed request still gets its named
    error there. Every length is checked against the frame: a slice past its end would
    shorten, not fail."""
    end = len(view)
    replica_id, position = -1, 0
    if api_version <= 14:
        replica_id, position = INT32.unpack_from(view, 0)[0], 4
    max_wait_ms, min_bytes, max_bytes, isolation_level, session_id, session_epoch = (
        _HEAD_V7.unpack_from(view, position)
    )
    position += _HEAD_V7.size
    by_id = api_version >= 13
    topics = []
    topic_count, position = _small_count(view, position)
    for _ in range(topic_count):
        topic, topic_id, position = _topic_key(view, position, by_id, end)
        partitions = []
        partition_count, position = _small_count(view, position)
        for _ in range(partition_count):
            fields = _PARTITION_V12.unpack_from(view, position)
            position += _PARTITION_V12.size
            if view[position]:  # the partition's tagged fields (v17's ReplicaDirectoryId)
                return None
            position += 1
            partitions.append(
                FetchPartition(fields[0], fields[2], fields[5], fields[1], fields[3], fields[4])
            )
        if view[position]:
            return None
        position += 1
        topics.append(FetchTopic(tuple(partitions), topic, topic_id))
    forgotten = []
    forgotten_count, position = _small_count(view, position)
    for _ in range(forgotten_count):
        topic, topic_id, position = _topic_key(view, position, by_id, end)
        count, position = _small_count(view, position)
        numbers = struct.unpack_from(f">{count}i", view, position)
        position += 4 * count
        if view[position]:
            return None
        position += 1
        forgotten.append(ForgottenTopic(numbers, topic, topic_id))
    size, position = _small_count(view, position)
    if position + size > end:
        return None
    rack_id = str(view[position : position + size], "utf-8")
    position += size
    cluster_id, replica_state = None, NO_REPLICA_STATE
    tag_count = view[position]
    if tag_count >= 0x80:
        return None
    position += 1
    for _ in range(tag_count):
        tag, size = view[position], view[position + 1]
        position += 2
        if tag >= 0x80 or size >= 0x80 or position + size > end:
            return None
        if tag == 0:
            cluster_id = Reader(view[position : position + size]).nullable_string(
                "cluster_id", compact=True
            )
        elif tag == 1 and api_version >= 15:
            if size != _REPLICA_STATE.size or view[position + size - 1]:
                return None
            replica_id, replica_epoch, _ = _REPLICA_STATE.unpack_from(view, position)
            replica_state = ReplicaState(replica_id, replica_epoch)
        position += size
    return FetchRequest(
        replica_id,
        max_wait_ms,
        min_bytes,
        tuple(topics),
        max_bytes,
        isolation_level,
        session_id,
        session_epoch,
        tuple(forgotten),
        rack_id,
        cluster_id,
        replica_state,
    )


def _small_count(view: memoryview, position: int) -> tuple[int, int]:
    """A compact array's count or string's length in one varint byte, and the position after
    it; ``ValueError`` for a null or longer one (the checked path says which)."""
    byte = view[position]
    if byte == 0 or byte >= 0x80:
        raise ValueError(byte)
    return byte - 1, position + 1


def _topic_key(
    view: memoryview, position: int, by_id: bool, end: int
) -> tuple[str, uuid.UUID, int]:
    """A topic's name (v12) or id (v13+), and the position after it."""
    if by_id:
        if position + 16 > end:
            raise ValueError(position)
        return "", _cached_topic_id(bytes(view[position : position + 16])), position + 16
    size, position = _small_count(view, position)
    if position + size > end:
        raise ValueError(position)
    return str(view[position : position + size], "utf-8"), ZERO_UUID, position + size


# Topic ids decoded lately, by their 16 bytes, for Fetch requests and responses alike: a follower
# names the same few topics in every round, and building a ``uuid.UUID`` (~1.5 us) costs more
# than the rest of a topic's head. Bounded: cleared when full.
_TOPIC_IDS: dict[bytes, uuid.UUID] = {}
MAX_CACHED_TOPIC_IDS = 10_000


def read_topic_id(reader: Reader) -> uuid.UUID:
    """A Fetch topic's 16-byte id (``MalformedRequestError`` naming ``topic_id`` if short)."""
    return _cached_topic_id(bytes(reader.bytes_view(16, "topic_id")))


def _cached_topic_id(raw: bytes) -> uuid.UUID:
    topic_id = _TOPIC_IDS.get(raw)
    if topic_id is None:
        if len(_TOPIC_IDS) >= MAX_CACHED_TOPIC_IDS:
            _TOPIC_IDS.clear()
        topic_id = _TOPIC_IDS[raw] = uuid.UUID(bytes=raw)
    return topic_id


def _decode_fetch_topic(reader: Reader, api_version: int, flexible: bool) -> FetchTopic:
    topic, topic_id = "", ZERO_UUID
    if api_version >= 13:
        topic_id = read_topic_id(reader)
    else:
        topic = reader.string("topic", compact=flexible)
    partitions = []
    for _ in range(reader.array_length("partitions", compact=flexible)):
        if flexible and reader.remaining > _PARTITION_V12.size:
            # A whole partition in one unpack (each follower fetch); short input takes the
            # field by field path below, which names the field that is cut off.
            fields = _PARTITION_V12.unpack(reader.bytes_view(_PARTITION_V12.size, "partition"))
            reader.skip_tagged_fields("FetchPartition tagged fields")
            partitions.append(
                FetchPartition(fields[0], fields[2], fields[5], fields[1], fields[3], fields[4])
            )
            continue
        partition = reader.int32("partition")
        current_leader_epoch = reader.int32("current_leader_epoch") if api_version >= 9 else -1
        fetch_offset = reader.int64("fetch_offset")
        last_fetched_epoch = reader.int32("last_fetched_epoch") if api_version >= 12 else -1
        log_start_offset = reader.int64("log_start_offset") if api_version >= 5 else -1
        partition_max_bytes = reader.int32("partition_max_bytes")
        if flexible:
            reader.skip_tagged_fields("FetchPartition tagged fields")
        partitions.append(
            FetchPartition(
                partition,
                fetch_offset,
                partition_max_bytes,
                current_leader_epoch,
                last_fetched_epoch,
                log_start_offset,
            )
        )
    if flexible:
        reader.skip_tagged_fields("FetchTopic tagged fields")
    return FetchTopic(tuple(partitions), topic, topic_id)


def _decode_forgotten_topic(reader: Reader, api_version: int, flexible: bool) -> ForgottenTopic:
    topic, topic_id = "", ZERO_UUID
    if api_version >= 13:
        topic_id = read_topic_id(reader)
    else:
        topic = reader.string("topic", compact=flexible)
    count = reader.array_length("partitions", compact=flexible)
    partitions = tuple(reader.int32("partitions") for _ in range(count))
    if flexible:
        reader.skip_tagged_fields("ForgottenTopic tagged fields")
    return ForgottenTopic(partitions, topic, topic_id)


def _decode_replica_state(reader: Reader) -> ReplicaState:
    state = ReplicaState(reader.int32("replica_id"), reader.int64("replica_epoch"))
    reader.skip_tagged_fields("ReplicaState tagged fields")
    return state


# ----------------------------------------------------------------------------------- response


@attrs.frozen
class EpochEndOffset:
    epoch: int = -1
    end_offset: int = -1


@attrs.frozen
class SnapshotId:
    end_offset: int = -1
    epoch: int = -1


NO_DIVERGING_EPOCH = EpochEndOffset()
NO_SNAPSHOT_ID = SnapshotId()


@attrs.frozen
class AbortedTransaction:
    producer_id: int
    first_offset: int


@attrs.frozen
class PartitionData:
    partition_index: int
    error_code: int = Errors.NONE
    high_watermark: int = -1
    last_stable_offset: int = -1
    log_start_offset: int = -1
    diverging_epoch: EpochEndOffset = NO_DIVERGING_EPOCH
    current_leader: LeaderIdAndEpoch = UNKNOWN_LEADER
    snapshot_id: SnapshotId = NO_SNAPSHOT_ID
    # None = null: Kafka sends null unless the fetch is READ_COMMITTED.
    aborted_transactions: tuple[AbortedTransaction, ...] | None = None
    preferred_read_replica: int = -1
    # Record chunks sent back to back (buffers or file slices); None = null records.
    records: tuple[Segment, ...] | None = ()


@attrs.frozen
class FetchableTopicResponse:
    partitions: tuple[PartitionData, ...]
    topic: str = ""  # v4-v12
    topic_id: uuid.UUID = ZERO_UUID  # v13+


@attrs.frozen
class FetchResponse:
    responses: tuple[FetchableTopicResponse, ...]
    throttle_time_ms: int = 0
    error_code: int = Errors.NONE
    session_id: int = 0
    node_endpoints: tuple[NodeEndpoint, ...] = ()


# partition_index, error_code, high_watermark, last_stable_offset (+ log_start_offset from v5)
_PARTITION_HEAD_V4 = struct.Struct(">ihqq")
_PARTITION_HEAD_V5 = struct.Struct(">ihqqq")
_TOP_LEVEL_V7 = struct.Struct(">ihi")  # throttle_time_ms, error_code, session_id
_ABORTED = struct.Struct(">qq")
_EPOCH_END_OFFSET = struct.Struct(">iqb")  # epoch, end_offset, empty tagged fields
_SNAPSHOT_ID = struct.Struct(">qib")  # end_offset, epoch, empty tagged fields
# A null array / null bytes, and an empty array, in both encodings.
_NULL = {False: b"\xff\xff\xff\xff", True: b"\x00"}
_EMPTY_ARRAY = {False: b"\x00\x00\x00\x00", True: b"\x01"}


def _chunk_length(chunk: Segment) -> int:
    if isinstance(chunk, (bytes, bytearray)):
        return len(chunk)
    if isinstance(chunk, memoryview):
        return chunk.nbytes
    return chunk.length


def encode_fetch_response(response: FetchResponse, api_version: int) -> Segments:
    """Encode a Fetch response body as segments; record chunks are passed through, not read.

    This is the broker's hottest encoder: one pass, no intermediate objects, record lengths
    summed as they are passed through.
    """
    check_version(api_version)
    flexible = api_version >= FIRST_FLEXIBLE_VERSION
    parts: list[Segment] = []
    out = bytearray()
    if api_version >= 7:
        out += _TOP_LEVEL_V7.pack(
            response.throttle_time_ms, response.error_code, response.session_id
        )
    else:
        out += INT32.pack(response.throttle_time_ms)
    out += encode_array_length(len(response.responses), compact=flexible)
    length = 0  # bytes already moved to ``parts``
    for topic in response.responses:
        if api_version >= 13:
            out += topic.topic_id.bytes
        else:
            out += encode_string(topic.topic, compact=flexible)
        out += encode_array_length(len(topic.partitions), compact=flexible)
        for partition in topic.partitions:
            out, flushed = _encode_partition(out, parts, partition, api_version, flexible)
            length += flushed
        if flexible:
            out += b"\x00"
    if flexible:
        tagged = []
        if api_version >= 16 and response.node_endpoints:
            tagged.append((0, encode_node_endpoints(response.node_endpoints)))
        out += encode_tagged_fields(tagged)
    parts.append(out)
    return Segments(tuple(parts), length + len(out))


def _encode_partition(
    out: bytearray, parts: list[Segment], partition: PartitionData, api_version: int, flexible: bool
) -> tuple[bytearray, int]:
    """Append one partition. Returns the buffer to continue in (a new one after record chunks)
    and how many bytes were moved to ``parts``."""
    if api_version >= 5:
        out += _PARTITION_HEAD_V5.pack(
            partition.partition_index,
            partition.error_code,
            partition.high_watermark,
            partition.last_stable_offset,
            partition.log_start_offset,
        )
    else:
        out += _PARTITION_HEAD_V4.pack(
            partition.partition_index,
            partition.error_code,
            partition.high_watermark,
            partition.last_stable_offset,
        )
    aborted = partition.aborted_transactions
    if aborted is None:
        out += _NULL[flexible]
    elif not aborted:
        out += _EMPTY_ARRAY[flexible]
    else:
        out += encode_array_length(len(aborted), compact=flexible)
        for transaction in aborted:
            out += _ABORTED.pack(transaction.producer_id, transaction.first_offset)
            if flexible:
                out += b"\x00"
    if api_version >= 11:
        out += INT32.pack(partition.preferred_read_replica)
    flushed = 0
    records = partition.records
    if records is None:
        out += _NULL[flexible]
    else:
        size = 0
        for chunk in records:
            length = _chunk_length(chunk)
            if length:
                if not size:
                    # Records follow: close this run of codec bytes first (lengths go after).
                    parts.append(out)
                    flushed = len(out)
                parts.append(chunk)
                size += length
        # The size prefix precedes the chunks on the wire: put it at the end of the closed run.
        prefix = encode_uvarint(size + 1) if flexible else INT32.pack(size)
        if size:
            out += prefix
            flushed += len(prefix) + size
            out = bytearray()
        else:
            out += prefix
    if flexible:
        if (
            partition.diverging_epoch is NO_DIVERGING_EPOCH
            and partition.current_leader is UNKNOWN_LEADER
            and partition.snapshot_id is NO_SNAPSHOT_ID
        ):
            out += b"\x00"  # the common case: no tagged field differs from its default
        else:
            out += encode_tagged_fields(_partition_tags(partition))
    return out, flushed


def _partition_tags(partition: PartitionData) -> list[tuple[int, bytes]]:
    tagged = []
    diverging = partition.diverging_epoch
    if diverging != NO_DIVERGING_EPOCH:
        tagged.append((0, _EPOCH_END_OFFSET.pack(diverging.epoch, diverging.end_offset, 0)))
    if not partition.current_leader.is_default():
        tagged.append((1, partition.current_leader.encode()))
    snapshot = partition.snapshot_id
    if snapshot != NO_SNAPSHOT_ID:
        tagged.append((2, _SNAPSHOT_ID.pack(snapshot.end_offset, snapshot.epoch, 0)))
    return tagged
