"""The records of ``__transaction_state``: Kafka's key and value formats, bytes in and out.

One record per transactional id (``TransactionLog.scala``, the schemas in
``transaction-coordinator/src/main/resources/common/message``), big-endian:

  key    int16 record type 0 (``TransactionLogKey``, key version 0), transactional_id string
  value  int16 version, then ``TransactionLogValue``:
      v0  producer_id int64, producer_epoch int16, transaction_timeout_ms int32,
          transaction_status int8 (``TransactionState.id``), transaction_partitions: nullable
          int32-counted array of {topic string, partition_ids int32-counted array of int32},
          transaction_last_update_timestamp_ms int64, transaction_start_timestamp_ms int64
      v1  the same fields, flexible (KIP-915): compact strings and arrays (unsigned varint
          length + 1, 0 = null), a tagged-field section after each partition entry and after
          the value, whose tags are 0 previous_producer_id int64, 1 next_producer_id int64,
          2 client_transaction_version int16 (Kafka 4.0 with ``transaction.version`` >= 1)

A null value is a tombstone: the transactional id expired. An EMPTY value carries a null
partition array (Kafka writes none and ignores any on reading).

pykraft writes key version 0 and value v0, as Kafka 3.x does and Kafka 4 with
``transaction.version`` 0; it reads v0 and v1 (unknown tags are skipped, as the flexible
format allows). A key of another record type is not ours: ``decode_key`` returns its version
and the loader skips it, as Kafka's loader does ("left over from an aborted upgrade"). Anything
malformed raises ``TransactionLogError``.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.coordinator.record_reader import RecordReader
from pykraft.coordinator.transaction.metadata import TxnTransitMetadata
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.record_batch import NO_PRODUCER_ID
from pykraft.storage.topic_partition import TopicPartition

# CoordinatorRecordType.TRANSACTION_LOG: the version prefix of every key of this topic.
TRANSACTION_LOG_KEY_VERSION = 0
TRANSACTION_LOG_VALUE_VERSION = 0
HIGHEST_VALUE_VERSION = 1
_FLEXIBLE_VERSION = 1
_TAG_PREVIOUS_PRODUCER_ID = 0
_TAG_NEXT_PRODUCER_ID = 1
_TAG_CLIENT_TRANSACTION_VERSION = 2
# A varint past this many bytes is corrupt: an unsigned 32-bit value needs at most 5.

_INT8 = struct.Struct(">b")
_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_INT64 = struct.Struct(">q")


class TransactionLogError(ValueError):
    """A ``__transaction_state`` record that is malformed or of a version pykraft cannot read."""


@attrs.frozen(kw_only=True)
class TransactionLogValue:
    """The fields of one value, as written."""

    producer_id: int
    producer_epoch: int
    transaction_timeout_ms: int
    transaction_status: TransactionState
    # None: a null array (an EMPTY value); else (topic, partition ids) as written.
    transaction_partitions: tuple[tuple[str, tuple[int, ...]], ...] | None
    transaction_last_update_timestamp_ms: int
    transaction_start_timestamp_ms: int
    # v1 tagged fields (their defaults when absent, and always in v0).
    previous_producer_id: int = NO_PRODUCER_ID
    next_producer_id: int = NO_PRODUCER_ID
    client_transaction_version: int = 0

    @property
    def topic_partitions(self) -> frozenset[TopicPartition]:
        return frozenset(
            TopicPartition(topic, partition)
            for topic, partitions in self.transaction_partitions or ()
            for partition in partitions
        )


@attrs.frozen
class UnknownKey:
    """A key whose record type is not ``TransactionLogKey``'s."""

    version: int


# ------------------------------------------------------------------ keys


def transaction_log_key(transactional_id: str) -> bytes:
    """``TransactionLog.keyToBytes``."""
    out = bytearray(_INT16.pack(TRANSACTION_LOG_KEY_VERSION))
    _put_string(out, transactional_id)
    return bytes(out)


def decode_key(data: bytes) -> str | UnknownKey:
    """The transactional id of a key (``TransactionLog.readTxnRecordKey``)."""
    reader = _Reader(data, "transaction log key")
    version = reader.int16()
    if version != TRANSACTION_LOG_KEY_VERSION:
        return UnknownKey(version)
    transactional_id = reader.string()
    reader.end()
    return transactional_id


# ------------------------------------------------------------------ values


def value_of(transit: TxnTransitMetadata) -> TransactionLogValue:
    """What ``TransactionLog.valueToBytes`` writes for a transition: partitions grouped by
    topic (sorted, so the bytes are deterministic), none for EMPTY."""
    if transit.txn_state is TransactionState.EMPTY:
        # Invariant: an EMPTY transition holds no partitions (Kafka: IllegalStateException).
        assert not transit.topic_partitions, transit
        partitions = None
    else:
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(transit.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        partitions = tuple((topic, tuple(ids)) for topic, ids in by_topic.items())
    return TransactionLogValue(
        producer_id=transit.producer_id,
        producer_epoch=transit.producer_epoch,
        transaction_timeout_ms=transit.txn_timeout_ms,
        transaction_status=transit.txn_state,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=transit.txn_last_update_timestamp_ms,
        transaction_start_timestamp_ms=transit.txn_start_timestamp_ms,
    )


def transaction_log_value(
    transit: TxnTransitMetadata, version: int = TRANSACTION_LOG_VALUE_VERSION
) -> bytes:
    return encode_value(value_of(transit), version)


def encode_value(value: TransactionLogValue, version: int = TRANSACTION_LOG_VALUE_VERSION) -> bytes:
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise TransactionLogError(f"transaction log value version {version} is not writable")
    flexible = version >= _FLEXIBLE_VERSION
    out = bytearray(_INT16.pack(version))
    out += _INT64.pack(value.producer_id)
    out += _INT16.pack(value.producer_epoch)
    out += _INT32.pack(value.transaction_timeout_ms)
    out += _INT8.pack(value.transaction_status.id)
    _put_partitions(out, value.transaction_partitions, flexible)
    out += _INT64.pack(value.transaction_last_update_timestamp_ms)
    out += _INT64.pack(value.transaction_start_timestamp_ms)
    if flexible:
        _put_value_tags(out, value)
    return bytes(out)


def decode_value(data: bytes) -> TransactionLogValue:
    reader = _Reader(data, "transaction log value")
    version = reader.int16()
    if not 0 <= version <= HIGHEST_VALUE_VERSION:
        raise TransactionLogError(
            f"transaction log value version {version} is not readable (0-{HIGHEST_VALUE_VERSION})"
        )
    flexible = version >= _FLEXIBLE_VERSION
    producer_id, producer_epoch = reader.int64(), reader.int16()
    timeout_ms, status_id = reader.int32(), reader.int8()
    try:
        status = TransactionState.from_id(status_id)
    except ValueError as error:
        raise TransactionLogError(f"transaction log value: {error}") from None
    partitions = _read_partitions(reader, flexible)
    last_update_ms, start_ms = reader.int64(), reader.int64()
    tags = _read_tags(reader) if flexible else {}
    reader.end()
    return TransactionLogValue(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        transaction_timeout_ms=timeout_ms,
        transaction_status=status,
        transaction_partitions=partitions,
        transaction_last_update_timestamp_ms=last_update_ms,
        transaction_start_timestamp_ms=start_ms,
        previous_producer_id=_tag(tags, _TAG_PREVIOUS_PRODUCER_ID, _INT64, NO_PRODUCER_ID),
        next_producer_id=_tag(tags, _TAG_NEXT_PRODUCER_ID, _INT64, NO_PRODUCER_ID),
        client_transaction_version=_tag(tags, _TAG_CLIENT_TRANSACTION_VERSION, _INT16, 0),
    )


# ------------------------------------------------------------------ writing


def _put_string(out: bytearray, value: str) -> None:
    data = value.encode("utf-8")
    if len(data) > 0x7FFF:
        raise TransactionLogError(f"a string of {len(data)} bytes does not fit an int16")
    out += _INT16.pack(len(data))
    out += data


def _put_uvarint(out: bytearray, value: int) -> None:
    assert value >= 0, value
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)


def _put_partitions(
    out: bytearray, partitions: tuple[tuple[str, tuple[int, ...]], ...] | None, flexible: bool
) -> None:
    if partitions is None:
        if flexible:
            _put_uvarint(out, 0)
        else:
            out += _INT32.pack(-1)
        return
    _put_count(out, len(partitions), flexible)
    for topic, ids in partitions:
        if flexible:
            data = topic.encode("utf-8")
            _put_uvarint(out, len(data) + 1)
            out += data
        else:
            _put_string(out, topic)
        _put_count(out, len(ids), flexible)
        for partition in ids:
            out += _INT32.pack(partition)
        if flexible:
            _put_uvarint(out, 0)  # no tagged fields in a partition entry


def _put_count(out: bytearray, count: int, flexible: bool) -> None:
    if flexible:
        _put_uvarint(out, count + 1)
    else:
        out += _INT32.pack(count)


def _put_value_tags(out: bytearray, value: TransactionLogValue) -> None:
    """Tagged fields are written only when they differ from their defaults, in tag order."""
    tags: list[tuple[int, bytes]] = []
    if value.previous_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_PREVIOUS_PRODUCER_ID, _INT64.pack(value.previous_producer_id)))
    if value.next_producer_id != NO_PRODUCER_ID:
        tags.append((_TAG_NEXT_PRODUCER_ID, _INT64.pack(value.next_producer_id)))
    if value.client_transaction_version != 0:
        tags.append(
            (_TAG_CLIENT_TRANSACTION_VERSION, _INT16.pack(value.client_transaction_version))
        )
    _put_uvarint(out, len(tags))
    for tag, payload in tags:
        _put_uvarint(out, tag)
        _put_uvarint(out, len(payload))
        out += payload


# ------------------------------------------------------------------ reading


class _Reader(RecordReader):
    def __init__(self, data: bytes, what: str) -> None:
        super().__init__(data, what, TransactionLogError)

    def string(self) -> str:
        size = self.int16()
        if size < 0:
            raise TransactionLogError(f"{self.what}: a non-nullable string is null")
        return self.text(size)

    def compact_string(self) -> str:
        size = self.uvarint() - 1
        if size < 0:
            raise TransactionLogError(f"{self.what}: a non-nullable string is null")
        return self.text(size)

    def count(self, flexible: bool) -> int:
        """An array's length; -1 for a null array."""
        count = self.uvarint() - 1 if flexible else self.int32()
        if count < -1 or count > len(self.data) - self.position:
            # Every element takes at least one byte: a longer count is corrupt.
            raise TransactionLogError(f"{self.what}: an array of {count} elements")
        return count


def _read_partitions(
    reader: _Reader, flexible: bool
) -> tuple[tuple[str, tuple[int, ...]], ...] | None:
    count = reader.count(flexible)
    if count == -1:
        return None
    entries = []
    for _ in range(count):
        topic = reader.compact_string() if flexible else reader.string()
        size = reader.count(flexible)
        if size == -1:
            raise TransactionLogError(f"{reader.what}: null partition ids of topic {topic!r}")
        entries.append((topic, tuple(reader.int32() for _ in range(size))))
        if flexible:
            _read_tags(reader)
    return tuple(entries)


def _read_tags(reader: _Reader) -> dict[int, bytes]:
    tags: dict[int, bytes] = {}
    for _ in range(reader.uvarint()):
        tag = reader.uvarint()
        payload = reader.take(reader.uvarint())
        if tag in tags:
            raise TransactionLogError(f"{reader.what}: tag {tag} appears twice")
        tags[tag] = payload
    return tags


def _tag(tags: dict[int, bytes], tag: int, codec: struct.Struct, default: int) -> int:
    payload = tags.get(tag)
    if payload is None:
        return default
    if len(payload) != codec.size:
        raise TransactionLogError(f"tagged field {tag} has {len(payload)} bytes, not {codec.size}")
    value: int = codec.unpack(payload)[0]
    return value
