"""The transactional producer's APIs through ``KafkaApis``, over the real transaction and group
coordinators and a real ``ReplicaManager`` (``tests/broker/txn_harness.py``): whole transactions
from InitProducerId to the markers, what each handler answers before the coordinator decides
(unknown partitions, OPERATION_NOT_ATTEMPTED, v4 batches), and PRODUCER_FENCED as older clients
understand it. Each case names the ``KafkaApis`` / ``KafkaApisTest`` behaviour it holds the
handlers to; the ACL refusals are in ``test_authorization_transactions.py``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchResponse, OffsetFetchRequest

from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker
from tests.broker.handler_support import pets_and_birds
from tests.broker.replica_harness import LOCAL, PETS0, PETS1
from tests.broker.test_handlers_fetch import fetch_request, partition_of
from tests.broker.test_handlers_groups import OFFSETS_ID
from tests.broker.test_transactions import READ_COMMITTED, consume
from tests.broker.txn_harness import (
    ANYONE,
    BROKER_PRINCIPAL,
    TxnBroker,
    TxnCluster,
    add_offsets,
    add_partitions,
    add_partitions_batched,
    batched_transaction,
    dispatch_bytes,
    end_txn,
    errors_by_partition,
    init_producer_id,
    produce_error,
    run,
    settle,
    transactional_produce,
    txn_offset_commit,
    txn_offset_errors,
)

TXN = "mover"
GROUP = "readers"
OFFSETS0 = TopicPartition(OFFSETS_TOPIC, 0)
BIRDS0 = TopicPartition("birds", 0)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TxnCluster]:
    harness = TxnCluster(tmp_path)
    try:
        harness.start(*pets_and_birds(0))
        yield harness
    finally:
        harness.close()


async def begin(broker: TxnBroker, transactional_id: str = TXN) -> tuple[int, int]:
    """InitProducerId for ``transactional_id``: its producer id and epoch."""
    answer = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id(transactional_id))
    assert answer.error_code == Errors.NONE, answer
    return answer.producer_id, answer.producer_epoch


async def add(broker: TxnBroker, pid: int, epoch: int, *partitions: TopicPartition) -> Any:
    answer = await broker.send(
        ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(TXN, pid, epoch, *partitions)
    )
    return errors_by_partition(answer.results_by_topic_v3_and_below)


def stable_offset(group_id: str = GROUP) -> Any:
    topic = OffsetFetchRequest.OffsetFetchRequestTopic
    return OffsetFetchRequest(
        version=7,
        group_id=group_id,
        topics=[topic(name="pets", partition_indexes=[0])],
        require_stable=True,
    )


async def committed(broker: TxnBroker) -> tuple[Errors, int]:
    """(error, committed offset) of pets-0 for GROUP, read with require_stable (KIP-447)."""
    answer = await broker.send(ApiKey.OFFSET_FETCH, 7, stable_offset())
    [topic] = answer.topics
    [partition] = topic.partitions
    return Errors(partition.error_code), partition.committed_offset


async def read_committed(broker: TxnBroker) -> tuple[int, list[bytes]]:
    """pets-0's last stable offset and what a READ_COMMITTED consumer keeps of it (Fetch v12)."""
    request = fetch_request(12, {("pets", 0): 0}, isolation_level=READ_COMMITTED)
    body = await dispatch_bytes(broker.apis, ApiKey.FETCH, 12, request, ANYONE)
    answer = partition_of(FetchResponse.decode(body, version=12))
    return answer.last_stable_offset, consume(answer.records, answer.aborted_transactions)


# ------------------------------------------------------------------ whole transactions


@pytest.mark.parametrize("commit", [True, False])
def test_a_consume_transform_produce_transaction_through_the_handlers(
    cluster: TxnCluster, commit: bool
) -> None:
    """InitProducerId → AddPartitionsToTxn → Produce → AddOffsetsToTxn → TxnOffsetCommit →
    EndTxn, the calls a transactional producer's ``send_offsets_to_transaction`` makes; the
    coordinator's markers reach the WriteTxnMarkers handler, which appends them and settles the
    group's pending offsets (``onTransactionCompleted``)."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        assert (pid, epoch) == (4000, 0)
        assert await add(broker, pid, epoch, PETS0) == {PETS0: Errors.NONE}
        produced = await broker.send(
            ApiKey.PRODUCE, 10, transactional_produce(TXN, pid, epoch, 0, PETS0, b"a", b"b")
        )
        assert produce_error(produced) is Errors.NONE
        offsets = await broker.send(
            ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP)
        )
        assert offsets.error_code == Errors.NONE
        commit_request = txn_offset_commit(TXN, pid, epoch, GROUP, {PETS0: 2})
        answer = await broker.send(ApiKey.TXN_OFFSET_COMMIT, 3, commit_request)
        assert txn_offset_errors(answer) == {PETS0: Errors.NONE}
        # Open: nothing is stable yet.
        assert await read_committed(broker) == (0, [])
        assert await committed(broker) == (Errors.UNSTABLE_OFFSET_COMMIT, -1)

        ended = await broker.send(ApiKey.END_TXN, 3, end_txn(TXN, pid, epoch, commit=commit))
        assert ended.error_code == Errors.NONE
        await settle()
        [(leader, markers)] = broker.channel.sent
        assert leader == LOCAL
        assert markers == (
            TxnMarker(
                producer_id=pid,
                producer_epoch=epoch,
                coordinator_epoch=0,  # __transaction_state-0's leader epoch
                commit=commit,
                partitions=markers[0].partitions,
            ),
        )
        assert set(markers[0].partitions) == {PETS0, OFFSETS0}
        # The marker is at offset 2: the LSO passed it, READ_COMMITTED sees the outcome.
        assert await read_committed(broker) == (3, [b"a", b"b"] if commit else [])
        assert await committed(broker) == (Errors.NONE, 2 if commit else -1)
        [state] = broker.transactions.describe_transactions([TXN])
        assert state.state == ("CompleteCommit" if commit else "CompleteAbort")
        await broker.shutdown()

    run(scenario)


def test_a_lost_marker_request_is_sent_again(cluster: TxnCluster) -> None:
    # TransactionMarkerRequestCompletionHandler: a disconnect resends the markers
    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        await add(broker, pid, epoch, PETS0)
        await broker.send(
            ApiKey.PRODUCE, 10, transactional_produce(TXN, pid, epoch, 0, PETS0, b"x")
        )
        broker.channel.lose = 1
        ended = await broker.send(ApiKey.END_TXN, 3, end_txn(TXN, pid, epoch, commit=True))
        assert ended.error_code == Errors.NONE
        await settle()
        assert len(broker.channel.sent) == 1 and await read_committed(broker) == (0, [])
        cluster.clock.now_ms += 1_000  # past the marker retry backoff
        broker.transactions.poll()
        await settle()
        assert len(broker.channel.sent) == 2
        assert await read_committed(broker) == (2, [b"x"])
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ before the coordinator


def test_unknown_partitions_fail_the_whole_add(cluster: TxnCluster) -> None:
    """``testAddPartitionsToTxnWithInvalidPartition`` and
    ``testAddPartitionsToTxnOperationNotAttempted``: a partition the metadata does not know
    fails the request; the others are OPERATION_NOT_ATTEMPTED and nothing joins the
    transaction."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        ghost, far = TopicPartition("ghosts", 0), TopicPartition("pets", 9)
        assert await add(broker, pid, epoch, PETS0, ghost, far) == {
            PETS0: Errors.OPERATION_NOT_ATTEMPTED,
            ghost: Errors.UNKNOWN_TOPIC_OR_PARTITION,
            far: Errors.UNKNOWN_TOPIC_OR_PARTITION,
        }
        [state] = broker.transactions.describe_transactions([TXN])
        assert (state.state, state.topics) == ("Empty", ())
        # A followed partition is known: a transaction may span leaders.
        assert await add(broker, pid, epoch, PETS1, BIRDS0) == {
            PETS1: Errors.NONE,
            BIRDS0: Errors.NONE,
        }
        await broker.shutdown()

    run(scenario)


def test_clients_may_not_add_internal_topics(cluster: TxnCluster) -> None:
    # handleAddPartitionsToTxnRequest leaves Topic.isInternal topics out of the authorized
    # ones: offsets join a transaction only through AddOffsetsToTxn
    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        assert await add(broker, pid, epoch, OFFSETS0, PETS0) == {
            OFFSETS0: Errors.TOPIC_AUTHORIZATION_FAILED,
            PETS0: Errors.OPERATION_NOT_ATTEMPTED,
        }
        await broker.shutdown()

    run(scenario)


def test_batched_add_partitions_verifies_and_adds(cluster: TxnCluster) -> None:
    """``testBatchedAddPartitionsToTxnRequest``: v4 carries several transactions, each verified
    (KIP-890: TRANSACTION_ABORTABLE for a partition not in it) or added, answered per id."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        other_pid, other_epoch = await begin(broker, "other")
        await add(broker, pid, epoch, PETS0)
        request = add_partitions_batched(
            batched_transaction(TXN, pid, epoch, PETS0, PETS1, verify_only=True),
            batched_transaction("other", other_pid, other_epoch, BIRDS0),
            batched_transaction("other", other_pid, other_epoch, TopicPartition("ghosts", 1)),
        )
        answer = await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, request, BROKER_PRINCIPAL)
        assert answer.error_code == Errors.NONE
        results = [
            (r.transactional_id, errors_by_partition(r.topic_results))
            for r in answer.results_by_transaction
        ]
        assert results == [
            (TXN, {PETS0: Errors.NONE, PETS1: Errors.TRANSACTION_ABORTABLE}),
            ("other", {BIRDS0: Errors.NONE}),
            ("other", {TopicPartition("ghosts", 1): Errors.UNKNOWN_TOPIC_OR_PARTITION}),
        ]
        [state] = broker.transactions.describe_transactions(["other"])
        assert state.topics == (("birds", (0,)),)
        await broker.shutdown()

    run(scenario)


def test_txn_offset_commit_refuses_unknown_partitions_and_commits_the_rest(
    cluster: TxnCluster,
) -> None:
    """``testHandleTxnOffsetCommitRequestTopicsAndPartitionsValidation``: unknown topics and
    partitions answer UNKNOWN_TOPIC_OR_PARTITION; the valid ones go to the group coordinator."""

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        await broker.send(ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP))
        offsets = {PETS0: 5, TopicPartition("pets", 9): 5, TopicPartition("ghosts", 0): 5}
        answer = await broker.send(
            ApiKey.TXN_OFFSET_COMMIT, 3, txn_offset_commit(TXN, pid, epoch, GROUP, offsets)
        )
        assert txn_offset_errors(answer) == {
            PETS0: Errors.NONE,
            TopicPartition("pets", 9): Errors.UNKNOWN_TOPIC_OR_PARTITION,
            TopicPartition("ghosts", 0): Errors.UNKNOWN_TOPIC_OR_PARTITION,
        }
        assert await committed(broker) == (Errors.UNSTABLE_OFFSET_COMMIT, -1)
        await broker.shutdown()

    run(scenario)


@pytest.mark.parametrize(("version", "expected"), [(1, "COORDINATOR_NOT_AVAILABLE"), (2, None)])
def test_txn_offset_commit_while_loading(
    cluster: TxnCluster, version: int, expected: str | None
) -> None:
    # shouldReplaceCoordinatorNotAvailableWithLoadInProcessInTxnOffsetCommitWithOlderClient:
    # below v2 COORDINATOR_LOAD_IN_PROGRESS is answered COORDINATOR_NOT_AVAILABLE (0.11-2.0
    # producers treated the former as fatal, KAFKA-7296)
    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, epoch = await begin(broker)
        # A new leader epoch: the group coordinator reloads the partition.
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=OFFSETS_ID, leader=LOCAL))
        request = txn_offset_commit(TXN, pid, epoch, GROUP, {PETS0: 1}, version=version)
        answer = await broker.send(ApiKey.TXN_OFFSET_COMMIT, version, request)
        error = Errors[expected] if expected else Errors.COORDINATOR_LOAD_IN_PROGRESS
        assert txn_offset_errors(answer) == {PETS0: error}
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ PRODUCER_FENCED by version


@pytest.mark.parametrize(
    ("api_key", "old", "new"),
    [
        (ApiKey.ADD_PARTITIONS_TO_TXN, 1, 2),
        (ApiKey.ADD_OFFSETS_TO_TXN, 1, 2),
        (ApiKey.END_TXN, 1, 2),
        (ApiKey.INIT_PRODUCER_ID, 3, 4),
    ],
)
def test_a_fenced_producer_gets_the_error_its_version_knows(
    cluster: TxnCluster, api_key: ApiKey, old: int, new: int
) -> None:
    """KIP-588: PRODUCER_FENCED to versions that know it, INVALID_PRODUCER_EPOCH below
    (``shouldReplaceProducerFencedWithInvalidProducerEpochInAddPartitionToTxnWithOlderClient``,
    ``...InAddOffsetToTxnWithOlderClient``, ``...InEndTxnWithOlderClient``;
    ``handleInitProducerIdRequest`` below v4)."""

    def request(pid: int, epoch: int, version: int) -> Any:
        if api_key is ApiKey.ADD_PARTITIONS_TO_TXN:
            return add_partitions(TXN, pid, epoch, PETS0, version=version)
        if api_key is ApiKey.ADD_OFFSETS_TO_TXN:
            return add_offsets(TXN, pid, epoch, GROUP, version=version)
        if api_key is ApiKey.END_TXN:
            return end_txn(TXN, pid, epoch, commit=True, version=version)
        return init_producer_id(TXN, version, producer_id=pid, producer_epoch=epoch)

    def error_of(answer: Any) -> Errors:
        if api_key is ApiKey.ADD_PARTITIONS_TO_TXN:
            [error] = errors_by_partition(answer.results_by_topic_v3_and_below).values()
            return error
        return Errors(answer.error_code)

    async def scenario() -> None:
        broker = TxnBroker(cluster)
        await broker.start()
        pid, zombie_epoch = await begin(broker)
        assert await begin(broker) == (pid, zombie_epoch + 1)  # a new instance fences it
        for version, expected in [
            (old, Errors.INVALID_PRODUCER_EPOCH),
            (new, Errors.PRODUCER_FENCED),
        ]:
            answer = await broker.send(api_key, version, request(pid, zombie_epoch, version))
            assert error_of(answer) is expected, (version, answer)
        await broker.shutdown()

    run(scenario)
