"""End-transaction markers: what one says, and what a coordinator asks a leader to write.

A marker is a control batch (attributes: control + transactional) holding one record whose key
is ``(version int16, type int16)`` — type 0 ABORT, 1 COMMIT (``ControlRecordType``) — and whose
value is ``EndTransactionMarker`` ``(version int16, coordinatorEpoch int32)``. Like Kafka's
``EndTransactionMarker.deserialize``, newer key or value versions are read as version 0 (their
prefix is the same); a key or value too short to hold the fields is corrupt.

``TxnMarker`` is one entry of Kafka's WriteTxnMarkers request as the broker appends it
(``KafkaApis.handleWriteTxnMarkersRequest``): a producer id and epoch, the coordinator epoch,
COMMIT or ABORT, and the partitions to write it to. It lives in ``storage`` so that both the
transaction coordinator (``coordinator/``) and the broker may build and read it.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.storage.record_batch import CorruptRecordError
from pykraft.storage.records import ControlRecordType, build_control_batch, iter_records
from pykraft.storage.topic_partition import TopicPartition

_KEY = struct.Struct(">hh")  # version, type
_VALUE = struct.Struct(">hi")  # version, coordinatorEpoch


@attrs.frozen
class EndTransactionMarker:
    """Kafka ``EndTransactionMarker``."""

    control_type: ControlRecordType
    coordinator_epoch: int

    @property
    def is_abort(self) -> bool:
        return self.control_type is ControlRecordType.ABORT


def decode_end_txn_marker(
    buffer: bytes | bytearray | memoryview, position: int = 0
) -> EndTransactionMarker | None:
    """The marker of the control batch at ``position``; None for an empty control batch (a
    cleaned transaction, Kafka's ``ProducerAppendInfo.append``) or another control type (a
    KRaft record). Raises ``CorruptRecordError`` when the batch or its key/value is damaged."""
    record = next(iter_records(buffer, position), None)
    if record is None:
        return None
    key, value = record.key or b"", record.value or b""
    if len(key) < _KEY.size:
        raise CorruptRecordError("controlRecordKey", f"{len(key)} bytes, needs 4", position)
    _, type_id = _KEY.unpack_from(key)
    if type_id not in (ControlRecordType.ABORT, ControlRecordType.COMMIT):
        return None
    if len(value) < _VALUE.size:
        raise CorruptRecordError("endTxnMarker", f"{len(value)} bytes, needs 6", position)
    _, coordinator_epoch = _VALUE.unpack_from(value)
    return EndTransactionMarker(ControlRecordType(type_id), coordinator_epoch)


@attrs.frozen(kw_only=True)
class TxnMarker:
    """One WriteTxnMarkers entry (``WritableTxnMarker``), as
    ``ReplicaManager.append_txn_markers`` takes it."""

    producer_id: int
    producer_epoch: int
    coordinator_epoch: int
    commit: bool  # True: COMMIT, False: ABORT (Kafka's ``TransactionResult``)
    partitions: tuple[TopicPartition, ...]

    @property
    def control_type(self) -> ControlRecordType:
        return ControlRecordType.COMMIT if self.commit else ControlRecordType.ABORT

    def control_batch(self, timestamp_ms: int) -> bytearray:
        """The marker batch (Kafka ``MemoryRecords.withEndTransactionMarker``), offsets unset."""
        return bytearray(
            build_control_batch(
                self.control_type,
                producer_id=self.producer_id,
                producer_epoch=self.producer_epoch,
                timestamp=timestamp_ms,
                coordinator_epoch=self.coordinator_epoch,
            )
        )
