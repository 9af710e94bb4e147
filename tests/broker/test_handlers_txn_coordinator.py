"""Finding and joining the transaction coordinator through ``KafkaApis``: FindCoordinator for
transactional ids (key type 1, creating ``__transaction_state`` the way Kafka's
``AutoTopicCreationManager`` does) and InitProducerId's transactional path in front of the real
transaction coordinator (``tests/broker/txn_harness.py``). Cases name the ``KafkaApis``,
``KafkaApisTest`` or ``TransactionCoordinatorTest`` behaviour they hold the handlers to.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.metadata import FindCoordinatorRequest

from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.metadata.api.topics import CreatableTopic
from pykraft.metadata.records import ConfigResourceType, PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from tests.broker.replica_harness import LOCAL, OTHER, PETS0, broker, pets_led_here
from tests.broker.txn_harness import (
    TRANSACTION_TIMEOUT_MS,
    TXN_STATE_ID,
    TxnBroker,
    TxnCluster,
    add_partitions,
    init_producer_id,
    run,
    settle,
    transactional_produce,
)

TXN = "mover"


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TxnCluster]:
    harness = TxnCluster(tmp_path)
    try:
        harness.start(*pets_led_here())
        yield harness
    finally:
        harness.close()


def find(version: int, *keys: str) -> Any:
    """FindCoordinator for transactional ids (key types exist from v1)."""
    assert version >= 1
    if version >= 4:
        return FindCoordinatorRequest(version=version, key_type=1, coordinator_keys=list(keys))
    [key] = keys
    return FindCoordinatorRequest(version=version, key=key, key_type=1)


async def init(broker: TxnBroker, transactional_id: str | None = TXN, **fields: Any) -> Any:
    version = fields.pop("version", 4)
    request = init_producer_id(transactional_id, version, **fields)
    answer = await broker.send(ApiKey.INIT_PRODUCER_ID, version, request)
    return Errors(answer.error_code), answer.producer_id, answer.producer_epoch


# ------------------------------------------------------------------ FindCoordinator, key type 1


@pytest.mark.parametrize("alive", [(LOCAL, OTHER), (LOCAL,)])
def test_find_coordinator_creates_the_transaction_state_topic(
    tmp_path: Path, alive: tuple[int, ...]
) -> None:
    """``testFindCoordinatorAutoTopicCreationForTxnTopic``: no ``__transaction_state`` yet →
    create it with ``transaction.state.log.*`` and ``transactionTopicConfigs``, answer
    COORDINATOR_NOT_AVAILABLE meanwhile. With fewer alive brokers than
    ``transaction.state.log.replication.factor`` nothing is created
    (``AutoTopicCreationManager.hasEnoughLiveBrokers``), never a smaller topic."""
    cluster = TxnCluster(tmp_path)
    cluster.publish(broker(LOCAL), broker(OTHER, fenced=OTHER not in alive), *pets_led_here())

    async def scenario() -> None:
        txn = TxnBroker(
            cluster,
            transaction_state_log_num_partitions=3,
            transaction_state_log_replication_factor=2,
            transaction_state_log_min_isr=2,
        )
        first = await txn.send(ApiKey.FIND_COORDINATOR, 3, find(3, TXN))
        assert (first.error_code, first.node_id) == (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        await settle()
        if len(alive) < 2:
            assert txn.controller.calls == []
            again = await txn.send(ApiKey.FIND_COORDINATOR, 3, find(3, TXN))
            assert again.error_code == Errors.COORDINATOR_NOT_AVAILABLE
            assert TRANSACTION_STATE_TOPIC not in cluster.image.topics.by_name
            await txn.shutdown()
            return
        [(call, topic)] = txn.controller.calls
        assert call == "create_topic" and isinstance(topic, CreatableTopic)
        assert (topic.name, topic.num_partitions) == (TRANSACTION_STATE_TOPIC, 3)
        assert topic.replication_factor == 2
        assert dict((c.name, c.value) for c in topic.configs) == {
            "unclean.leader.election.enable": "false",
            "compression.type": "uncompressed",
            "cleanup.policy": "compact",
            "min.insync.replicas": "2",
            "segment.bytes": str(100 * 1024 * 1024),
        }
        configs = cluster.image.configs.config(ConfigResourceType.TOPIC, TRANSACTION_STATE_TOPIC)
        assert configs["min.insync.replicas"] == "2"
        created = cluster.image.topics.by_name[TRANSACTION_STATE_TOPIC]
        leader = created.partitions[txn.transactions.partition_for(TXN)].leader
        found = await txn.send(ApiKey.FIND_COORDINATOR, 3, find(3, TXN))
        assert (found.error_code, found.node_id, found.host, found.port) == (
            Errors.NONE, leader, f"broker{leader}.local", 9090 + leader,
        )  # fmt: skip
        await txn.shutdown()

    try:
        run(scenario)
    finally:
        cluster.close()


def test_find_coordinator_answers_each_transactional_id_from_its_partition(
    cluster: TxnCluster,
) -> None:
    """``getCoordinator``: the leader of ``partitionFor(key)``, an alive broker reachable on the
    listener; a leaderless partition is COORDINATOR_NOT_AVAILABLE. v4 answers key by key
    (KIP-699)."""

    async def scenario() -> None:
        txn = TxnBroker(cluster, transaction_state_log_num_partitions=1)
        await txn.start()
        answer = await txn.send(ApiKey.FIND_COORDINATOR, 4, find(4, "a", "b"))
        assert [(c.key, c.error_code, c.node_id) for c in answer.coordinators] == [
            ("a", Errors.NONE, LOCAL),
            ("b", Errors.NONE, LOCAL),
        ]
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=TXN_STATE_ID, leader=OTHER))
        moved = await txn.send(ApiKey.FIND_COORDINATOR, 1, find(1, TXN))
        assert (moved.error_code, moved.node_id, moved.port) == (Errors.NONE, OTHER, 9090 + OTHER)
        cluster.publish(PartitionChangeRecord(partition_id=0, topic_id=TXN_STATE_ID, leader=-1))
        gone = await txn.send(ApiKey.FIND_COORDINATOR, 4, find(4, TXN))
        assert [(c.error_code, c.node_id) for c in gone.coordinators] == [
            (Errors.COORDINATOR_NOT_AVAILABLE, -1)
        ]
        await txn.shutdown()

    run(scenario)


# ------------------------------------------------------------------ InitProducerId, transactional


def test_init_producer_id_starts_and_fences_instances(cluster: TxnCluster) -> None:
    """``handleInitProducerId``: a new transactional id gets a new producer id at epoch 0; each
    new instance bumps the epoch (fencing the one before); a v3+ client naming its current id
    and epoch is bumped too (KIP-360), one naming an older epoch is fenced."""

    async def scenario() -> None:
        txn = TxnBroker(cluster)
        await txn.start()
        assert await init(txn) == (Errors.NONE, 4000, 0)
        assert await init(txn) == (Errors.NONE, 4000, 1)
        assert await init(txn, "other") == (Errors.NONE, 4001, 0)
        assert await init(txn, producer_id=4000, producer_epoch=1) == (Errors.NONE, 4000, 2)
        # prepareIncrementProducerEpoch: a retry naming the epoch before gets the same answer
        assert await init(txn, producer_id=4000, producer_epoch=1) == (Errors.NONE, 4000, 2)
        assert await init(txn, producer_id=4000, producer_epoch=0) == (
            Errors.PRODUCER_FENCED, -1, -1,
        )  # fmt: skip
        await txn.shutdown()

    run(scenario)


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # TransactionCoordinator.handleInitProducerId: "" is not a transactional id.
        ({"transactional_id": ""}, Errors.INVALID_REQUEST),
        # KafkaApis: producer id and epoch are both -1 or both name the producer (KIP-360).
        ({"producer_id": 4000, "producer_epoch": -1}, Errors.INVALID_REQUEST),
        ({"producer_id": -1, "producer_epoch": 0}, Errors.INVALID_REQUEST),
        # transaction.timeout.ms above transaction.max.timeout.ms (15 minutes).
        ({"timeout_ms": 15 * 60 * 1000 + 1}, Errors.INVALID_TRANSACTION_TIMEOUT),
    ],
)
def test_init_producer_id_refusals(
    cluster: TxnCluster, fields: dict[str, Any], expected: Errors
) -> None:
    async def scenario() -> None:
        txn = TxnBroker(cluster)
        await txn.start()
        transactional_id = fields.pop("transactional_id", TXN)
        request = init_producer_id(transactional_id, 4, **{
            k: v for k, v in fields.items() if k != "timeout_ms"
        })  # fmt: skip
        request.transaction_timeout_ms = fields.get("timeout_ms", TRANSACTION_TIMEOUT_MS)
        answer = await txn.send(ApiKey.INIT_PRODUCER_ID, 4, request)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (expected, -1, -1)
        await txn.shutdown()

    run(scenario)


def test_init_producer_id_where_the_coordinator_is_not(cluster: TxnCluster) -> None:
    """NOT_COORDINATOR on a broker that does not lead the id's partition; retriable
    COORDINATOR_LOAD_IN_PROGRESS while no producer id is at hand (``RPCProducerIdManager``)."""

    async def scenario() -> None:
        txn = TxnBroker(cluster)
        assert await init(txn) == (Errors.NOT_COORDINATOR, -1, -1)
        await txn.start()
        txn.producer_ids.available = False
        assert await init(txn) == (Errors.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
        txn.producer_ids.available = True
        assert await init(txn) == (Errors.NONE, 4000, 0)
        await txn.shutdown()

    run(scenario)


def test_a_new_instance_aborts_the_open_transaction_first(cluster: TxnCluster) -> None:
    """``TransactionCoordinatorTest.shouldAbortTransactionOnHandleInitPidWhenExistingTransactionInOngoingState``:
    the new instance hears CONCURRENT_TRANSACTIONS while the old one's transaction is aborted
    (epoch fenced, ABORT markers written); its retry gets the next epoch."""

    async def scenario() -> None:
        txn = TxnBroker(cluster)
        await txn.start()
        _, pid, epoch = await init(txn)
        added = await txn.send(
            ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(TXN, pid, epoch, PETS0)
        )
        assert (
            added.results_by_topic_v3_and_below[0].results_by_partition[0].partition_error_code == 0
        )
        await txn.send(ApiKey.PRODUCE, 10, transactional_produce(TXN, pid, epoch, 0, PETS0, b"z"))
        assert await init(txn) == (Errors.CONCURRENT_TRANSACTIONS, -1, -1)
        await settle()
        [(_, [marker])] = [(b, list(m)) for b, m in txn.channel.sent]
        assert (marker.commit, marker.producer_epoch, marker.partitions) == (False, 1, (PETS0,))
        assert await init(txn) == (Errors.NONE, pid, 2)
        log = cluster.replica_manager.get_partition(PETS0).log  # type: ignore[union-attr]
        assert log.last_stable_offset == log.log_end_offset == 2
        await txn.shutdown()

    run(scenario)
