"""Replaying ``__transaction_state``: the last record of an id wins, tombstones remove, what
cannot be read is skipped and reported (``TransactionStateManagerTest``'s loading cases,
``testLoadTransactionMetadataWithCorruptedLog``), over a real partition log."""

from __future__ import annotations

import asyncio
from pathlib import Path

from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.coordinator.transaction.loader import load_transactions
from pykraft.coordinator.transaction.records import (
    TransactionLogValue,
    encode_value,
    transaction_log_key,
)
from pykraft.coordinator.transaction.replay import TransactionLogReplay, TxnLogEntry
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)
from pykraft.storage.topic_partition import TopicPartition

S = TransactionState
TP0 = TopicPartition("pets", 0)


def value(state: TransactionState, epoch: int = 1, **changes: object) -> bytes:
    fields: dict[str, object] = {
        "producer_id": 7,
        "producer_epoch": epoch,
        "transaction_timeout_ms": 60_000,
        "transaction_status": state,
        "transaction_partitions": (("pets", (0,)),),
        "transaction_last_update_timestamp_ms": 200,
        "transaction_start_timestamp_ms": 100,
    }
    fields.update(changes)
    return encode_value(TransactionLogValue(**fields))  # type: ignore[arg-type]


def entry(offset: int, tid: str | None, data: bytes | None) -> TxnLogEntry:
    return TxnLogEntry(offset, None if tid is None else transaction_log_key(tid), data)


def test_the_last_record_of_an_id_wins_and_tombstones_remove() -> None:
    replay = TransactionLogReplay()
    replay.replay([entry(0, "a", value(S.EMPTY, 0)), entry(1, "b", value(S.ONGOING))])
    replay.replay([entry(2, "a", value(S.PREPARE_COMMIT, 0)), entry(3, "b", None)])
    assert replay.records == 4 and replay.problems == []
    loaded = replay.loaded()
    assert list(loaded) == ["a"]
    txn = loaded["a"]
    assert (txn.state, txn.producer_id, txn.producer_epoch, txn.topic_partitions) == (
        S.PREPARE_COMMIT,
        7,
        0,
        {TP0},
    )
    assert (txn.txn_start_timestamp_ms, txn.txn_last_update_timestamp_ms) == (100, 200)
    assert (txn.last_producer_epoch, txn.pending_state) == (-1, None)


def test_an_id_is_read_as_kafka_reads_it() -> None:
    # readTxnRecordValue: partitions only outside EMPTY; the previous producer id from v1.
    replay = TransactionLogReplay()
    v1 = encode_value(
        TransactionLogValue(
            producer_id=8,
            producer_epoch=0,
            transaction_timeout_ms=1000,
            transaction_status=S.EMPTY,
            transaction_partitions=(("pets", (0,)),),
            transaction_last_update_timestamp_ms=5,
            transaction_start_timestamp_ms=-1,
            previous_producer_id=7,
        ),
        version=1,
    )
    replay.replay([entry(0, "a", v1), entry(1, "b", value(S.COMPLETE_ABORT))])
    loaded = replay.loaded()
    assert (loaded["a"].last_producer_id, loaded["a"].topic_partitions) == (7, set())
    assert loaded["b"].last_producer_id == -1  # v0 has none
    assert loaded["b"].topic_partitions == {TP0}


def test_unreadable_records_are_skipped_and_reported() -> None:
    # testLoadTransactionMetadataWithCorruptedLog: what came before a bad record stays.
    replay = TransactionLogReplay()
    replay.replay(
        [
            entry(0, "a", value(S.ONGOING)),
            entry(1, "a", b"\x00\x00\x01"),  # a truncated value
            entry(2, None, value(S.EMPTY)),  # no key
            TxnLogEntry(3, bytes.fromhex("0002000161"), value(S.EMPTY)),  # not our key type
            entry(4, "b", value(S.DEAD)),  # a state never written
            entry(5, "c", value(S.PREPARE_EPOCH_FENCE)),
            TxnLogEntry(6, b"\x00", b""),  # a broken key
        ]
    )
    assert list(replay.loaded()) == ["a"]
    assert replay.loaded()["a"].state is S.ONGOING
    assert replay.problem_count == 6
    assert replay.problems[0].startswith("record at offset 1:")
    assert "record type 2" in replay.problems[2]
    assert "never written" in replay.problems[3]


def test_problems_kept_are_bounded() -> None:
    replay = TransactionLogReplay()
    replay.replay([entry(n, None, None) for n in range(250)])
    assert replay.problem_count == 250 and len(replay.problems) == 100


def test_load_transactions_reads_a_partition_log_in_chunks() -> None:
    log = PartitionLog.open(MemoryDisk(Path(f"memory/{TRANSACTION_STATE_TOPIC}-0")), LogConfig())
    for n in range(30):
        record = SimpleRecord(key=transaction_log_key(f"id{n % 7}"), value=value(S.EMPTY, n))
        log.append_as_leader(bytearray(build_batch([record])), 0, 0)
    # A control batch is not ours: skipped.
    marker = build_control_batch(
        ControlRecordType.COMMIT, producer_id=1, producer_epoch=0, timestamp=0
    )
    log.append_as_leader(bytearray(marker), 0, 0, origin=AppendOrigin.COORDINATOR)
    tombstone = SimpleRecord(key=transaction_log_key("id0"), value=None)
    log.append_as_leader(bytearray(build_batch([tombstone])), 0, 0)
    replay = asyncio.run(load_transactions(log, chunk_bytes=200))
    assert replay.problems == []
    assert replay.records == 31
    loaded = replay.loaded()
    assert sorted(loaded) == [f"id{n}" for n in range(1, 7)]
    assert loaded["id6"].producer_epoch == 27  # the last of 6, 13, 20, 27
