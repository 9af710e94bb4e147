"""WriteTxnMarkers as a leader receives it, and the operator's view of transactions (KIP-664:
DescribeProducers, DescribeTransactions, ListTransactions), through ``KafkaApis`` over the real
coordinators and ``ReplicaManager`` (``tests/broker/txn_harness.py``). Cases name the
``KafkaApis`` / ``KafkaApisTest`` behaviour they hold the handlers to; the ACL refusals are in
``test_authorization_transactions.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin.transactions import (
    DescribeProducersRequest,
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)

from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.metadata.records import TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.protocol.errors import Errors
from pykraft.protocol.txn_markers import decode_write_txn_markers_response, encode_write_txn_markers
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.handler_support import by_topic, pets_and_birds
from tests.broker.replica_harness import NOW_MS, OTHER, PETS0, PETS1, partition_record
from tests.broker.txn_harness import (
    BROKER_PRINCIPAL,
    TxnBroker,
    TxnCluster,
    add_offsets,
    add_partitions,
    dispatch_bytes,
    init_producer_id,
    run,
    transactional_produce,
    txn_offset_commit,
)

TXN = "mover"
GROUP = "readers"
OFFSETS0 = TopicPartition(OFFSETS_TOPIC, 0)
BIRDS0 = TopicPartition("birds", 0)
CATS_ID = "Y2F0cy1hcmUtbm90LWhlcg"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TxnCluster]:
    harness = TxnCluster(tmp_path)
    try:
        # cats-0 lives on OTHER alone: the metadata has it, this broker does not host it.
        harness.start(
            *pets_and_birds(0),
            TopicRecord(name="cats", topic_id=CATS_ID),
            partition_record(CATS_ID, 0, (OTHER,)),
        )
        yield harness
    finally:
        harness.close()


async def open_transaction(broker: TxnBroker, *values: bytes) -> tuple[int, int]:
    """An InitProducerId'd producer with pets-0 in its transaction and ``values`` sent there."""
    answer = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id(TXN))
    pid, epoch = answer.producer_id, answer.producer_epoch
    await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(TXN, pid, epoch, PETS0))
    if values:
        request = transactional_produce(TXN, pid, epoch, 0, PETS0, *values)
        await broker.send(ApiKey.PRODUCE, 10, request)
    return pid, epoch


async def write_markers(broker: TxnBroker, *markers: TxnMarker) -> dict[Any, Errors]:
    """WriteTxnMarkers v1 as the broker's marker channel sends it (its principal)."""
    body = await dispatch_bytes(
        broker.apis,
        ApiKey.WRITE_TXN_MARKERS,
        1,
        encode_write_txn_markers(markers, 1),
        broker.channel.principal,
    )
    return decode_write_txn_markers_response(body, 1, markers)


def committed_offsets(broker: TxnBroker) -> dict[TopicPartition, int]:
    """GROUP's committed offsets (pending transactional ones are not)."""
    _, offsets = broker.groups.fetch_offsets(GROUP, None)
    return {f.topic_partition: f.offset.offset for f in offsets if f.offset is not None}


def marker(pid: int, *partitions: TopicPartition, commit: bool = True, epoch: int = 0) -> TxnMarker:
    return TxnMarker(
        producer_id=pid,
        producer_epoch=epoch,
        coordinator_epoch=0,
        commit=commit,
        partitions=partitions,
    )


# ------------------------------------------------------------------ WriteTxnMarkers


def test_markers_are_appended_and_settle_the_groups_pending_offsets(cluster: TxnCluster) -> None:
    """``shouldAppendToLogOnWriteTxnMarkersWhenCorrectMagicVersion``: each marker is appended
    (coordinator origin, acks=-1); one in ``__consumer_offsets`` makes the producer's pending
    TxnOffsetCommit offsets committed (``onTransactionCompleted``)."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await open_transaction(broker, b"a")
        await broker.send(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP))
        commit = txn_offset_commit(TXN, pid, epoch, GROUP, {PETS0: 1})
        await broker.send(ApiKey.TXN_OFFSET_COMMIT, 3, commit)
        assert committed_offsets(broker) == {}
        errors = await write_markers(broker, marker(pid, PETS0, OFFSETS0, epoch=epoch))
        assert errors == {(pid, PETS0): Errors.NONE, (pid, OFFSETS0): Errors.NONE}
        assert committed_offsets(broker) == {PETS0: 1}
        for tp, end in [(PETS0, 2), (OFFSETS0, 2)]:
            log = cluster.replica_manager.get_partition(tp).log  # type: ignore[union-attr]
            assert log.last_stable_offset == log.log_end_offset == end
        await broker.shutdown()

    run(scenario)


def test_marker_errors_per_partition_leave_the_offsets_pending(cluster: TxnCluster) -> None:
    """``shouldRespondWithUnknownTopicWhenPartitionIsNotHosted`` and
    ``shouldRespondWithUnknownTopicOrPartitionForBadPartitionAndNoErrorsForGoodPartition``:
    each partition answers for itself; an ``__consumer_offsets`` marker the log refuses (a
    fenced producer epoch) settles nothing."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id(TXN))
        pid, epoch = await open_transaction(broker, b"a")  # a second instance: epoch 1
        assert epoch == 1
        await broker.send(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP))
        commit = txn_offset_commit(TXN, pid, epoch, GROUP, {PETS0: 1})
        await broker.send(ApiKey.TXN_OFFSET_COMMIT, 3, commit)
        # ProducerAppendInfo.appendEndTxnMarker: a marker of the fenced epoch is refused.
        stale = marker(pid, OFFSETS0, epoch=0, commit=True)
        assert await write_markers(broker, stale) == {
            (pid, OFFSETS0): Errors.INVALID_PRODUCER_EPOCH
        }
        assert committed_offsets(broker) == {}
        ghost, cats0 = TopicPartition("pets", 9), TopicPartition("cats", 0)
        errors = await write_markers(broker, marker(pid, PETS0, ghost, BIRDS0, cats0, epoch=epoch))
        assert errors == {
            (pid, PETS0): Errors.NONE,
            (pid, ghost): Errors.UNKNOWN_TOPIC_OR_PARTITION,
            (pid, cats0): Errors.UNKNOWN_TOPIC_OR_PARTITION,  # not hosted here
            (pid, BIRDS0): Errors.NOT_LEADER_OR_FOLLOWER,  # followed here
        }
        # No markers, an empty answer (KafkaApis answers at once).
        body = await dispatch_bytes(
            broker.apis, ApiKey.WRITE_TXN_MARKERS, 1, encode_write_txn_markers([], 1),
            BROKER_PRINCIPAL,
        )  # fmt: skip
        assert decode_response(ApiKey.WRITE_TXN_MARKERS, 1, body).markers == []
        await broker.shutdown()

    run(scenario)


def test_a_group_coordinator_failure_answers_unknown_server_error(
    cluster: TxnCluster, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``handleWriteTxnMarkersRequest``: an exception from ``onTransactionCompleted`` answers
    the ``__consumer_offsets`` partitions UNKNOWN_SERVER_ERROR (the coordinator resends), the
    other partitions keep theirs."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await open_transaction(broker, b"a")

        def broken(partition: int, producer_id: int, commit: bool) -> None:
            raise RuntimeError("a bug in the group coordinator")

        monkeypatch.setattr(broker.groups, "complete_transaction", broken)
        errors = await write_markers(broker, marker(pid, PETS0, OFFSETS0, epoch=epoch))
        assert errors == {(pid, PETS0): Errors.NONE, (pid, OFFSETS0): Errors.UNKNOWN_SERVER_ERROR}
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ DescribeProducers


def describe_producers(*partitions: TopicPartition) -> Any:
    topics = by_topic((tp.topic, tp.partition) for tp in partitions)
    return DescribeProducersRequest(
        version=0,
        topics=[
            DescribeProducersRequest.TopicRequest(name=name, partition_indexes=indexes)
            for name, indexes in topics.items()
        ],
    )


ProducerRow = tuple[int, int, int, int, int, int]


def producer_row(state: Any) -> ProducerRow:
    """id, epoch, last sequence, last timestamp, coordinator epoch, open transaction's start."""
    return (
        state.producer_id,
        state.producer_epoch,
        state.last_sequence,
        state.last_timestamp,
        state.coordinator_epoch,
        state.current_txn_start_offset,
    )


def producers_by_partition(response: Any) -> dict[TopicPartition, tuple[Errors, list[ProducerRow]]]:
    return {
        TopicPartition(topic.name, p.partition_index): (
            Errors(p.error_code),
            [producer_row(state) for state in p.active_producers],
        )
        for topic in response.topics
        for p in topic.partitions
    }


def test_describe_producers_on_the_leader_a_follower_and_elsewhere(cluster: TxnCluster) -> None:
    """``testDescribeProducers`` / ``ReplicaManager.activeProducerState``: a replica's producers,
    on a follower too (KIP-664: any replica may be asked); a partition this broker does not host
    is NOT_LEADER_OR_FOLLOWER when the metadata has it, UNKNOWN_TOPIC_OR_PARTITION when not; an
    illegal topic name is INVALID_TOPIC_EXCEPTION."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await open_transaction(broker, b"a", b"b")
        # An idempotent producer on pets-1, and one the follower of birds-0 replicated.
        idempotent = build_batch(
            [SimpleRecord(value=b"i", timestamp=NOW_MS)], producer_id=77, producer_epoch=3,
            base_sequence=0,
        )  # fmt: skip
        cluster.produce(PETS1, bytearray(idempotent))
        birds = cluster.replica_manager.get_partition(BIRDS0).log  # type: ignore[union-attr]
        replicated = build_batch(
            [SimpleRecord(value=b"f", timestamp=NOW_MS + 1)],
            producer_id=88,
            producer_epoch=1,
            base_sequence=4,
            partition_leader_epoch=6,
        )
        birds.append_as_follower(replicated)
        ghost, cats0 = TopicPartition("pets", 9), TopicPartition("cats", 0)
        request = describe_producers(
            PETS0, PETS1, BIRDS0, ghost, cats0, TopicPartition("ghosts", 0),
            TopicPartition("invalid;topic", 1),
        )  # fmt: skip
        answer = await broker.send(ApiKey.DESCRIBE_PRODUCERS, 0, request)
        assert producers_by_partition(answer) == {
            PETS0: (Errors.NONE, [(pid, epoch, 1, NOW_MS, -1, 0)]),  # open since offset 0
            PETS1: (Errors.NONE, [(77, 3, 0, NOW_MS, -1, -1)]),
            BIRDS0: (Errors.NONE, [(88, 1, 4, NOW_MS + 1, -1, -1)]),
            ghost: (Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
            cats0: (Errors.NOT_LEADER_OR_FOLLOWER, []),
            TopicPartition("ghosts", 0): (Errors.UNKNOWN_TOPIC_OR_PARTITION, []),
            TopicPartition("invalid;topic", 1): (Errors.INVALID_TOPIC_EXCEPTION, []),
        }
        await broker.shutdown()

    run(scenario)


def test_describe_producers_shows_the_coordinator_epoch_of_the_last_marker(
    cluster: TxnCluster,
) -> None:
    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await open_transaction(broker, b"a")
        ended = TxnMarker(
            producer_id=pid, producer_epoch=epoch, coordinator_epoch=4, commit=True,
            partitions=(PETS0,),
        )  # fmt: skip
        assert await write_markers(broker, ended) == {(pid, PETS0): Errors.NONE}
        answer = await broker.send(ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers(PETS0))
        [(error, [state])] = producers_by_partition(answer).values()
        assert (error, state[4], state[5]) == (Errors.NONE, 4, -1)  # no transaction open
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ DescribeTransactions, List


def test_describe_transactions(cluster: TxnCluster) -> None:
    """``testDescribeTransactions``: the coordinator's state of each id; an id it never saw is
    TRANSACTIONAL_ID_NOT_FOUND."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await open_transaction(broker, b"a")
        request = DescribeTransactionsRequest(version=0, transactional_ids=[TXN, "nobody"])
        answer = await broker.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, request)
        found, missing = answer.transaction_states
        assert (found.error_code, found.transactional_id, found.transaction_state) == (
            Errors.NONE, TXN, "Ongoing",
        )  # fmt: skip
        assert (found.producer_id, found.producer_epoch, found.transaction_timeout_ms) == (
            pid, epoch, 60_000,
        )  # fmt: skip
        assert found.transaction_start_time_ms == cluster.clock.wall_clock_ms()
        assert [(t.topic, t.partitions) for t in found.topics] == [("pets", [0])]
        assert (missing.error_code, missing.transactional_id) == (
            Errors.TRANSACTIONAL_ID_NOT_FOUND, "nobody",
        )  # fmt: skip
        await broker.shutdown()

    run(scenario)


def list_transactions(
    states: list[str], producer_ids: list[int], version: int = 0, duration_filter: int = -1
) -> Any:
    return ListTransactionsRequest(
        version=version,
        state_filters=states,
        producer_id_filters=producer_ids,
        duration_filter=duration_filter,
    )


def test_list_transactions_filters_by_state_and_producer(cluster: TxnCluster) -> None:
    """``TransactionStateManager.listTransactionStates``: every id of this coordinator, or
    those in the states and of the producers asked; unknown states are echoed back."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, _ = await open_transaction(broker, b"a")
        idle = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id("idle"))

        async def listed(states: list[str], producer_ids: list[int]) -> tuple[Any, ...]:
            answer = await broker.send(
                ApiKey.LIST_TRANSACTIONS, 0, list_transactions(states, producer_ids)
            )
            assert answer.error_code == Errors.NONE
            return tuple(answer.unknown_state_filters), tuple(sorted(
                (t.transactional_id, t.producer_id, t.transaction_state)
                for t in answer.transaction_states
            ))  # fmt: skip

        everyone = ((), (("idle", idle.producer_id, "Empty"), (TXN, pid, "Ongoing")))
        assert await listed([], []) == everyone
        assert await listed(["Ongoing"], []) == ((), ((TXN, pid, "Ongoing"),))
        assert await listed([], [idle.producer_id]) == ((), (("idle", idle.producer_id, "Empty"),))
        assert await listed(["Bogus", "Empty"], []) == (
            ("Bogus",), (("idle", idle.producer_id, "Empty"),),
        )  # fmt: skip
        await broker.shutdown()

    run(scenario)


def test_list_transactions_v1_filters_by_duration(cluster: TxnCluster) -> None:
    """KIP-994 (ListTransactions v1): with ``duration_filter`` >= 0 only transactions running
    longer than it (``now - txnStartTimestamp > filter``); an id with no transaction started
    (start -1) always qualifies, as in Kafka's ``listTransactionStates``."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, _ = await open_transaction(broker, b"a")  # started now
        idle = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id("idle"))

        async def listed(version: int, duration_filter: int) -> list[str]:
            request = list_transactions([], [], version, duration_filter)
            answer = await broker.send(ApiKey.LIST_TRANSACTIONS, version, request)
            assert answer.error_code == Errors.NONE
            return sorted(t.transactional_id for t in answer.transaction_states)

        cluster.clock.now_ms += 1000
        assert await listed(1, -1) == ["idle", TXN]
        assert await listed(1, 999) == ["idle", TXN]
        assert await listed(1, 1000) == ["idle"]  # not longer than 1000 ms
        assert await listed(0, 1000) == ["idle", TXN]  # v0 carries no filter
        assert pid != idle.producer_id
        await broker.shutdown()

    run(scenario)
