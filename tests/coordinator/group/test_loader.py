"""``coordinator.group.loader`` over a real partition log: transactional batches carry their
producer, control batches become markers, and the reading goes on to the log's end as it is
when the reading stops (Kafka's ``doLoadGroupsAndOffsets`` re-reads ``logEndOffset``)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pykraft.coordinator.group.loader import read_partition_records
from pykraft.coordinator.group.offsets import LogRecord, OffsetsReplay, TransactionMarker
from pykraft.coordinator.group.records import (
    OffsetAndMetadata,
    offset_commit_key,
    offset_commit_value,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from pykraft.storage.topic_partition import TopicPartition

GROUP = "group"
FOO0, FOO1 = TopicPartition("foo", 0), TopicPartition("foo", 1)
PRODUCER, EPOCH = 1000, 2


def commit_record(tp: TopicPartition, offset: int) -> SimpleRecord:
    value = OffsetAndMetadata(offset=offset, commit_timestamp_ms=7)
    return SimpleRecord(key=offset_commit_key(GROUP, tp), value=offset_commit_value(value))


def append(log: PartitionLog, batch: bytes, origin: AppendOrigin = AppendOrigin.CLIENT) -> None:
    log.append_as_leader(bytearray(batch), 0, 0, origin=origin)


def append_marker(log: PartitionLog, control: ControlRecordType) -> None:
    marker = build_control_batch(control, producer_id=PRODUCER, producer_epoch=EPOCH, timestamp=7)
    append(log, marker, AppendOrigin.COORDINATOR)


def transactional(*records: SimpleRecord, sequence: int = 0) -> bytes:
    return build_batch(
        list(records),
        producer_id=PRODUCER,
        producer_epoch=EPOCH,
        base_sequence=sequence,
        is_transactional=True,
    )


def read_all(log: PartitionLog, chunk_bytes: int = 100) -> list[LogRecord | TransactionMarker]:
    seen: list[LogRecord | TransactionMarker] = []
    asyncio.run(read_partition_records(log, seen.extend, chunk_bytes=chunk_bytes))
    return seen


def test_batches_are_read_back_with_their_producer_and_markers(tmp_path: Path) -> None:
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig())
    append(log, build_batch([commit_record(FOO0, 5)]))
    append(log, transactional(commit_record(FOO0, 6), commit_record(FOO1, 7)))
    append_marker(log, ControlRecordType.COMMIT)
    append(log, transactional(commit_record(FOO1, 8), sequence=2))
    append_marker(log, ControlRecordType.ABORT)
    entries = read_all(log)
    assert [(type(e).__name__, e.batch_offset) for e in entries] == [
        ("LogRecord", 0),
        ("LogRecord", 1),
        ("LogRecord", 1),
        ("TransactionMarker", 3),
        ("LogRecord", 4),
        ("TransactionMarker", 5),
    ]
    assert [e.producer_id for e in entries if isinstance(e, LogRecord)] == [
        None,
        PRODUCER,
        PRODUCER,
        PRODUCER,
    ]
    markers = [e for e in entries if isinstance(e, TransactionMarker)]
    assert markers == [
        TransactionMarker(3, PRODUCER, ControlRecordType.COMMIT),
        TransactionMarker(5, PRODUCER, ControlRecordType.ABORT),
    ]
    replay = OffsetsReplay()
    replay.replay(entries)
    [group] = replay.loaded(now_ms=0).groups
    assert {tp: c.value.offset for tp, c in group.offsets.items()} == {FOO0: 6, FOO1: 7}
    assert group.pending_txn_offset_commits == {}


def test_a_marker_appended_while_loading_is_read(tmp_path: Path) -> None:
    # The WriteTxnMarkers handler may append to the partition while it loads; its completion
    # call finds no group yet, so the load must see the marker itself.
    log = PartitionLog.open(tmp_path / "__consumer_offsets-0", LogConfig())
    append(log, transactional(commit_record(FOO0, 6)))
    chunks: list[list[LogRecord | TransactionMarker]] = []

    def replay(entries: list[LogRecord | TransactionMarker]) -> None:
        if not chunks:
            append_marker(log, ControlRecordType.COMMIT)
        chunks.append(entries)

    asyncio.run(read_partition_records(log, replay))
    assert len(chunks) == 2
    assert chunks[1] == [TransactionMarker(1, PRODUCER, ControlRecordType.COMMIT)]
