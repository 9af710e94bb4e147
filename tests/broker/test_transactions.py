"""Transactions on the broker's data path: WriteTxnMarkers' appends (``append_txn_markers``),
then Fetch and ListOffsets with READ_COMMITTED and READ_UNCOMMITTED through the real handlers,
kafka-python encoding the requests and decoding the answers (Kafka's
KafkaApis.handleWriteTxnMarkersRequest, ReplicaManager.appendRecords with AppendOrigin
COORDINATOR, Partition.readRecords / fetchOffsetForTimestamp, DelayedFetch with
FetchIsolation.TXN_COMMITTED); and a broker restart that has to rebuild the aborted-transaction
index (LogLoaderTest.testFullTransactionIndexRecovery, through the broker).
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import ListOffsetsRequest, ListOffsetsResponse

from pykraft.broker.handlers.list_offsets import list_offsets_handler
from pykraft.broker.replica_manager import FetchParams, LogReadResult
from pykraft.metadata.records import MetadataRecord, PartitionChangeRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker, decode_end_txn_marker
from tests.broker.handler_support import pets_and_birds, started_cluster
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    Cluster,
    at,
    call,
    encode,
    partition_record,
    services,
)
from tests.broker.test_handlers_fetch import fetch, partition_of

BIRDS0 = TopicPartition("birds", 0)
OFFSETS0 = TopicPartition("__consumer_offsets", 0)
OFFSETS_ID = "Xq3V0xyPSnqP6tQf1e3uSA"
READ_UNCOMMITTED, READ_COMMITTED = 0, 1


def cluster_records() -> list[MetadataRecord]:
    """pets-0 led here alone, pets-1 led here with OTHER in the ISR, birds-0 followed here,
    __consumer_offsets-0 led here (markers may go to internal topics)."""
    return [
        *pets_and_birds(pets0_leader_epoch=0),
        TopicRecord(name="__consumer_offsets", topic_id=OFFSETS_ID),
        partition_record(OFFSETS_ID, 0, (LOCAL,)),
    ]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *cluster_records())


class TransactionalProducer:
    """A transactional producer's batches built with storage/records.py, as a client sends
    them (one sequence per partition)."""

    def __init__(self, cluster: Cluster, producer_id: int, epoch: int = 0) -> None:
        self.cluster, self.producer_id, self.epoch = cluster, producer_id, epoch
        self.sequences: dict[TopicPartition, int] = {}

    def send(self, topic_partition: TopicPartition, *values: bytes) -> int:
        sequence = self.sequences.get(topic_partition, 0)
        records = [SimpleRecord(value=v, timestamp=NOW_MS) for v in values]
        data = build_batch(
            records,
            producer_id=self.producer_id,
            producer_epoch=self.epoch,
            base_sequence=sequence,
            is_transactional=True,
        )
        result = self.cluster.produce(topic_partition, bytearray(data))
        assert result.error is Errors.NONE, result
        self.sequences[topic_partition] = sequence + len(values)
        return result.base_offset


def txn_offset_commit(cluster: Cluster, producer_id: int, value: bytes) -> Errors:
    """What the group coordinator writes for TxnOffsetCommit: a transactional batch of the
    producer without a sequence (Kafka GroupMetadataManager, AppendOrigin.COORDINATOR)."""
    data = build_batch(
        [SimpleRecord(value=value, key=b"group", timestamp=NOW_MS)],
        producer_id=producer_id,
        producer_epoch=0,
        is_transactional=True,
    )
    results = cluster.replica_manager.append_to_local_log(
        {OFFSETS0: bytearray(data)},
        required_acks=-1,
        now_ms=NOW_MS,
        internal_topics_allowed=True,
        origin=AppendOrigin.COORDINATOR,
    )
    return results[OFFSETS0].error


def marker(
    producer_id: int,
    *partitions: TopicPartition,
    commit: bool,
    epoch: int = 0,
    coordinator_epoch: int = 0,
) -> TxnMarker:
    return TxnMarker(
        producer_id=producer_id,
        producer_epoch=epoch,
        coordinator_epoch=coordinator_epoch,
        commit=commit,
        partitions=partitions,
    )


def write_markers(
    cluster: Cluster, *markers: TxnMarker, timeout_ms: int = 30_000
) -> dict[tuple[int, TopicPartition], Errors]:
    async def run() -> dict[tuple[int, TopicPartition], Errors]:
        return await cluster.replica_manager.append_txn_markers(
            markers, timeout_ms=timeout_ms, now_ms=NOW_MS
        )

    return asyncio.run(run())


def consume(records: bytes, aborted: Sequence[Any] | None) -> list[bytes]:
    """What a READ_COMMITTED consumer keeps (Kafka's ``CompletedFetch``): control batches are
    dropped, and a producer's transactional batches from an aborted transaction's first offset
    up to its ABORT marker are skipped."""
    pending = sorted((txn.first_offset, txn.producer_id) for txn in aborted or ())
    aborting: set[int] = set()
    kept: list[bytes] = []
    for position, header in iter_batches(records):
        while pending and pending[0][0] <= header.last_offset:
            aborting.add(pending.pop(0)[1])
        if header.is_control:
            end = decode_end_txn_marker(records, position)
            if end is not None and end.is_abort:
                aborting.discard(header.producer_id)
            continue
        if header.is_transactional and header.producer_id in aborting:
            continue
        kept.extend(r.value or b"" for r in iter_records(records, position))
    return kept


def test_markers_are_appended_as_control_batches(cluster: Cluster) -> None:
    producer = TransactionalProducer(cluster, 7)
    producer.send(PETS0, b"a", b"b")
    assert txn_offset_commit(cluster, 7, b"offset-commit") is Errors.NONE
    errors = write_markers(cluster, marker(7, PETS0, OFFSETS0, commit=True, coordinator_epoch=3))
    assert errors == {(7, PETS0): Errors.NONE, (7, OFFSETS0): Errors.NONE}
    log = cluster.replica_manager.get_partition(PETS0).log  # type: ignore[union-attr]
    stored = log.read(2, 1 << 20, log.log_end_offset).read_bytes()
    [(position, header)] = list(iter_batches(stored))
    assert header.is_control and header.is_transactional and header.producer_id == 7
    end = decode_end_txn_marker(stored, position)
    assert end is not None and not end.is_abort and end.coordinator_epoch == 3
    assert log.last_stable_offset == log.log_end_offset == 3


def test_marker_errors_per_producer_and_partition(cluster: Cluster) -> None:
    # Kafka: the marker's epochs are checked by the log (ProducerAppendInfo.appendEndTxnMarker)
    TransactionalProducer(cluster, 7, epoch=2).send(PETS0, b"a")
    assert write_markers(cluster, marker(7, PETS0, commit=False, epoch=2, coordinator_epoch=5)) == {
        (7, PETS0): Errors.NONE
    }
    errors = write_markers(
        cluster,
        marker(7, PETS0, commit=False, epoch=1, coordinator_epoch=5),  # a fenced producer
        marker(8, BIRDS0, TopicPartition("pets", 9), commit=True),  # followed; not hosted
    )
    assert errors == {
        (7, PETS0): Errors.INVALID_PRODUCER_EPOCH,
        (8, BIRDS0): Errors.NOT_LEADER_OR_FOLLOWER,
        (8, TopicPartition("pets", 9)): Errors.UNKNOWN_TOPIC_OR_PARTITION,
    }
    zombie = marker(7, PETS0, commit=False, epoch=2, coordinator_epoch=4)
    assert write_markers(cluster, zombie) == {(7, PETS0): Errors.TRANSACTION_COORDINATOR_FENCED}
    assert write_markers(cluster) == {}


def test_markers_wait_for_the_isr(cluster: Cluster) -> None:
    # acks=-1 (Kafka appends markers with requiredAcks -1): pets-1 has OTHER in its ISR
    TransactionalProducer(cluster, 7).send(PETS1, b"a")
    replica_manager = cluster.replica_manager

    async def scenario() -> dict[tuple[int, TopicPartition], Errors]:
        waiting = replica_manager.append_txn_markers(
            [marker(7, PETS1, commit=True)], timeout_ms=30_000, now_ms=NOW_MS
        )
        assert replica_manager.get_partition(PETS1).log_end_offset == 2  # type: ignore[union-attr]
        await asyncio.sleep(0)
        assert not asyncio.ensure_future(waiting).done()
        follower_fetch(cluster, PETS1, 2)  # OTHER has both batches: the high watermark is 2
        return await waiting

    assert asyncio.run(scenario()) == {(7, PETS1): Errors.NONE}


def test_markers_time_out_and_a_cancelled_wait_is_forgotten(cluster: Cluster) -> None:
    # DelayedProduce: REQUEST_TIMED_OUT when the ISR does not catch up within timeout_ms
    producer = TransactionalProducer(cluster, 7)
    producer.send(PETS1, b"a")
    replica_manager = cluster.replica_manager
    purgatory = replica_manager.delayed_produces.purgatory

    async def scenario() -> dict[tuple[int, TopicPartition], Errors]:
        cancelled = asyncio.ensure_future(  # the Future itself
            replica_manager.append_txn_markers(
                [marker(7, PETS1, commit=False)], timeout_ms=1_000, now_ms=NOW_MS
            )
        )
        assert purgatory.watching(PETS1) == 1
        cancelled.cancel()
        await asyncio.sleep(0)
        assert purgatory.watching(PETS1) == 0  # forgotten
        waiting = replica_manager.append_txn_markers(
            [marker(7, PETS1, commit=False)], timeout_ms=1_000, now_ms=NOW_MS
        )
        cluster.clock.now_ms += 1_000
        replica_manager.tick()
        return await waiting

    assert asyncio.run(scenario()) == {(7, PETS1): Errors.REQUEST_TIMED_OUT}


def follower_fetch(cluster: Cluster, topic_partition: TopicPartition, offset: int) -> None:
    params = FetchParams(
        replica_id=OTHER, max_wait_ms=0, min_bytes=1, max_bytes=1 << 20,
        partitions=(at(topic_partition, offset),),
    )  # fmt: skip
    cluster.replica_manager.read_from_log(params)


def test_fetch_read_committed_against_read_uncommitted(cluster: Cluster) -> None:
    aborted, committed, open_txn = (TransactionalProducer(cluster, pid) for pid in (7, 8, 9))
    aborted.send(PETS0, b"gone-1", b"gone-2")  # 0-1
    committed.send(PETS0, b"kept-1")  # 2
    aborted.send(PETS0, b"gone-3")  # 3
    write_markers(cluster, marker(7, PETS0, commit=False))  # 4
    committed.send(PETS0, b"kept-2")  # 5
    write_markers(cluster, marker(8, PETS0, commit=True))  # 6
    open_txn.send(PETS0, b"pending")  # 7: still open

    for version in (4, 12, 16):
        uncommitted = partition_of(fetch(cluster, version, {("pets", 0): 0}))
        assert (uncommitted.high_watermark, uncommitted.last_stable_offset) == (8, 7)
        assert uncommitted.aborted_transactions is None
        assert consume(uncommitted.records, None) == [
            b"gone-1", b"gone-2", b"kept-1", b"gone-3", b"kept-2", b"pending",
        ]  # fmt: skip
        read_committed = fetch(cluster, version, {("pets", 0): 0}, isolation_level=READ_COMMITTED)
        committed_part = partition_of(read_committed)
        assert (committed_part.high_watermark, committed_part.last_stable_offset) == (8, 7)
        assert [(t.producer_id, t.first_offset) for t in committed_part.aborted_transactions] == [
            (7, 0)
        ]
        assert consume(committed_part.records, committed_part.aborted_transactions) == [
            b"kept-1",
            b"kept-2",
        ]
    # From past the aborted transaction, none is listed.
    later = partition_of(fetch(cluster, 12, {("pets", 0): 5}, isolation_level=READ_COMMITTED))
    assert later.aborted_transactions == []
    # At the LSO a READ_COMMITTED fetch reads nothing until the open transaction ends.
    stable = partition_of(fetch(cluster, 12, {("pets", 0): 7}, isolation_level=READ_COMMITTED))
    assert (stable.records, stable.aborted_transactions) == (b"", [])
    write_markers(cluster, marker(9, PETS0, commit=False))
    ended = partition_of(fetch(cluster, 12, {("pets", 0): 7}, isolation_level=READ_COMMITTED))
    assert ended.last_stable_offset == 9
    assert [(t.producer_id, t.first_offset) for t in ended.aborted_transactions] == [(9, 7)]
    assert consume(ended.records, ended.aborted_transactions) == []


def list_latest(cluster: Cluster, isolation_level: int) -> int:
    request = ListOffsetsRequest(
        version=7,
        replica_id=-1,
        isolation_level=isolation_level,
        topics=[
            ListOffsetsRequest.ListOffsetsTopic(
                name="pets",
                partitions=[
                    ListOffsetsRequest.ListOffsetsTopic.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=-1
                    )
                ],
            )
        ],
    )
    body = call(list_offsets_handler(services(cluster)), ApiKey.LIST_OFFSETS, 7, encode(request, 7))
    assert body is not None
    [topic] = ListOffsetsResponse.decode(body, version=7).topics
    [partition] = topic.partitions
    assert partition.error_code == Errors.NONE
    offset: int = partition.offset
    return offset


def test_list_offsets_latest_is_the_lso_for_read_committed(cluster: Cluster) -> None:
    # Partition.fetchOffsetForTimestamp: lastFetchableOffset by isolation level
    producer = TransactionalProducer(cluster, 7)
    producer.send(PETS0, b"a")
    producer.send(PETS0, b"b")
    assert (list_latest(cluster, READ_UNCOMMITTED), list_latest(cluster, READ_COMMITTED)) == (2, 0)
    write_markers(cluster, marker(7, PETS0, commit=True))
    assert (list_latest(cluster, READ_UNCOMMITTED), list_latest(cluster, READ_COMMITTED)) == (3, 3)


def test_a_waiting_read_committed_fetch_is_woken_when_the_lso_moves(cluster: Cluster) -> None:
    # DelayedFetch with FetchIsolation.TXN_COMMITTED: bytes below the LSO count, not the HW
    producer = TransactionalProducer(cluster, 7)
    replica_manager = cluster.replica_manager

    def params(isolation_level: int) -> FetchParams:
        return FetchParams(
            replica_id=-1, max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20,
            isolation_level=isolation_level, partitions=(at(PETS0, 0),),
        )  # fmt: skip

    async def scenario() -> tuple[list[LogReadResult], list[LogReadResult]]:
        committed = asyncio.ensure_future(replica_manager.fetch_messages(params(READ_COMMITTED)))
        uncommitted = asyncio.ensure_future(
            replica_manager.fetch_messages(params(READ_UNCOMMITTED))
        )
        await asyncio.sleep(0)
        producer.send(PETS0, b"a")  # the high watermark moves, the LSO does not
        await asyncio.sleep(0)
        assert uncommitted.done() and not committed.done()
        await replica_manager.append_txn_markers(
            [marker(7, PETS0, commit=True)], timeout_ms=30_000, now_ms=NOW_MS
        )
        return await committed, await uncommitted

    [committed], [uncommitted] = asyncio.run(scenario())
    assert uncommitted.size_in_bytes > 0 and uncommitted.last_stable_offset == 0
    assert committed.last_stable_offset == 2 and committed.aborted_transactions == ()
    assert committed.size_in_bytes > uncommitted.size_in_bytes  # the data and the marker


def test_restart_rebuilds_the_aborted_transaction_index(tmp_path: Path) -> None:
    # An unclean stop (no clean-shutdown marker) with every .txnindex gone: the restarted
    # broker recovers the log and READ_COMMITTED still learns of the aborted transaction
    first = Cluster(tmp_path)
    first.start(*cluster_records())
    aborted, still_open = TransactionalProducer(first, 7), TransactionalProducer(first, 8)
    aborted.send(PETS0, b"gone")  # 0
    write_markers(first, marker(7, PETS0, commit=False))  # 1
    first.produce(PETS0, bytearray(build_batch([SimpleRecord(b"plain")])))  # 2
    still_open.send(PETS0, b"pending")  # 3
    first.replica_manager.shutdown()
    for log in first.log_manager.logs.values():
        log.close_handlers()  # a dying process: nothing flushed, no clean-shutdown marker
    index_files = list(first.log_dir.glob(f"*/*{TXN_INDEX_SUFFIX}"))
    assert [path.parent.name for path in index_files] == ["pets-0"]
    for path in index_files:
        path.unlink()

    restarted = Cluster(tmp_path)
    try:
        restarted.start(*cluster_records())
        log = restarted.replica_manager.get_partition(PETS0).log  # type: ignore[union-attr]
        assert log.load_report.recovered_segments == (0,)
        assert [path.name for path in index_files if path.exists()] == [
            f"{0:020d}{TXN_INDEX_SUFFIX}"
        ]
        partition = partition_of(
            fetch(restarted, 12, {("pets", 0): 0}, isolation_level=READ_COMMITTED)
        )
        assert (partition.high_watermark, partition.last_stable_offset) == (4, 3)
        assert [(t.producer_id, t.first_offset) for t in partition.aborted_transactions] == [(7, 0)]
        assert consume(partition.records, partition.aborted_transactions) == [b"plain"]
        # the open transaction was restored too: its producer can still end it
        errors = write_markers(restarted, marker(8, PETS0, commit=True))
        assert errors == {(8, PETS0): Errors.NONE}
        assert list_latest(restarted, READ_COMMITTED) == 5
    finally:
        restarted.close()


def read(result: LogReadResult) -> bytes:
    return b"".join(piece.read_bytes() for piece in result.slices)


def committed_fetch_of_both_pets(cluster: Cluster, *markers: TxnMarker) -> list[LogReadResult]:
    """A READ_COMMITTED consumer of pets-0 and pets-1 (each led here alone) waits, then one
    WriteTxnMarkers request writes ``markers``: what the consumer reads."""
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, isr=(LOCAL,)))
    consumer = FetchParams(
        replica_id=-1, max_wait_ms=30_000, min_bytes=1, max_bytes=1 << 20,
        isolation_level=READ_COMMITTED, partitions=(at(PETS0, 0), at(PETS1, 0)),
    )  # fmt: skip

    async def scenario() -> list[LogReadResult]:
        loop = asyncio.get_running_loop()
        task = asyncio.ensure_future(cluster.replica_manager.fetch_messages(consumer))
        await asyncio.sleep(0)
        assert not task.done()  # the open transactions keep the LSO at 0
        loop.call_soon(
            lambda: cluster.replica_manager.append_txn_markers(
                markers, timeout_ms=30_000, now_ms=NOW_MS
            )
        )
        return await task

    return asyncio.run(scenario())


def test_a_read_committed_consumer_woken_by_a_marker_reads_all_its_partitions(
    cluster: Cluster,
) -> None:
    # The LSO moves inside each partition's marker append (the leader is alone in the ISR);
    # Kafka completes the DelayedFetches after the request's appends (its action queue).
    producer = TransactionalProducer(cluster, 7)
    producer.send(PETS0, b"a")
    producer.send(PETS1, b"b")
    results = committed_fetch_of_both_pets(cluster, marker(7, PETS0, PETS1, commit=True))
    assert [result.last_stable_offset for result in results] == [2, 2]
    assert [consume(read(result), ()) for result in results] == [[b"a"], [b"b"]]


def test_a_read_committed_consumer_woken_by_a_write_txn_markers_reads_all_its_markers(
    cluster: Cluster,
) -> None:
    # One WriteTxnMarkers request, one marker per producer: Kafka runs the action queue once
    # the handler has appended every marker.
    TransactionalProducer(cluster, 7).send(PETS0, b"a")
    TransactionalProducer(cluster, 8).send(PETS1, b"b")
    results = committed_fetch_of_both_pets(
        cluster, marker(7, PETS0, commit=True), marker(8, PETS1, commit=True)
    )
    assert [result.last_stable_offset for result in results] == [2, 2]
    assert [consume(read(result), ()) for result in results] == [[b"a"], [b"b"]]
