"""The transaction APIs' refusals, each row of ``API_ACL_CHECKS`` for them, through
``KafkaApis.dispatch`` over the real coordinators (``tests/broker/txn_harness.py``): carol holds
every ACL a transactional producer needs but the one a case takes away, the refusal answers
Kafka's error code and changes nothing (no partition added, no offset, no marker). Setup steps
run as the super user ``User:admin``, as a broker would. Cases follow ``KafkaApis``' handlers
and ``KafkaApisTest`` (``testHandleAddPartitionsToTxnAuthorizationFailedAndMetrics``,
``testDescribeTransactionsFiltersUnauthorizedTopics``, ``testListTransactionsAuthorization``,
``testDescribeProducers``) and ``AuthorizerIntegrationTest``'s transactional cases.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.admin.transactions import (
    DescribeTransactionsRequest,
    ListTransactionsRequest,
)
from kafka.protocol.metadata import FindCoordinatorRequest

from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.metadata.auth.acl import CLUSTER_NAME, AclBinding, AclOperation, ResourceType
from pykraft.metadata.auth.principal import user
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import pets_and_birds
from tests.broker.replica_harness import PETS0
from tests.broker.test_authorization import ADMIN, CAROL, acl, authorizer
from tests.broker.test_handlers_txn_admin import (
    describe_producers,
    marker,
    producers_by_partition,
    write_markers,
)
from tests.broker.txn_harness import (
    TxnBroker,
    TxnCluster,
    add_offsets,
    add_partitions,
    add_partitions_batched,
    batched_transaction,
    end_txn,
    errors_by_partition,
    init_producer_id,
    run,
    transactional_produce,
    txn_offset_commit,
    txn_offset_errors,
)

TXN = "mover"
GROUP = "readers"
BIRDS0 = TopicPartition("birds", 0)
DAVE = user("dave")  # holds no ACL at all
_TXN_ID, _TOPIC, _GROUP = ResourceType.TRANSACTIONAL_ID, ResourceType.TOPIC, ResourceType.GROUP
# What a transactional producer that also commits a group's offsets needs (Kafka's docs:
# "Authorization: transactional producer").
PRODUCER_ACLS = {
    "write-txn": acl(AclOperation.WRITE, TXN, _TXN_ID),
    "write-pets": acl(AclOperation.WRITE, "pets"),
    "write-birds": acl(AclOperation.WRITE, "birds"),
    "read-group": acl(AclOperation.READ, GROUP, _GROUP),
    "read-pets": acl(AclOperation.READ, "pets"),
    "read-birds": acl(AclOperation.READ, "birds"),
}


def allowed_but(*taken: str) -> list[AclBinding]:
    return [binding for name, binding in PRODUCER_ACLS.items() if name not in taken]


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[TxnCluster]:
    harness = TxnCluster(tmp_path)
    try:
        harness.start(*pets_and_birds(0))
        yield harness
    finally:
        harness.close()


async def begun(cluster: TxnCluster, *bindings: AclBinding) -> tuple[TxnBroker, int, int]:
    """A broker whose authorizer holds ``bindings`` for carol, and a transaction of TXN begun
    by the super user (InitProducerId only)."""
    broker = TxnBroker(cluster, authorizer(*bindings))
    await broker.start()
    answer = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id(TXN), ADMIN)
    assert answer.error_code == Errors.NONE
    return broker, answer.producer_id, answer.producer_epoch


def in_transaction(broker: TxnBroker) -> tuple[str, tuple[tuple[str, tuple[int, ...]], ...]]:
    [state] = broker.transactions.describe_transactions([TXN])
    return state.state, state.topics


# ------------------------------------------------------------------ AddPartitionsToTxn


@pytest.mark.parametrize("version", [0, 3])
def test_add_partitions_without_write_on_the_transactional_id(
    cluster: TxnCluster, version: int
) -> None:
    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *allowed_but("write-txn"))
        request = add_partitions(TXN, pid, epoch, PETS0, BIRDS0, version=version)
        answer = await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, version, request, CAROL)
        assert errors_by_partition(answer.results_by_topic_v3_and_below) == {
            PETS0: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
            BIRDS0: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED,
        }
        assert in_transaction(broker) == ("Empty", ())
        await broker.shutdown()

    run(scenario)


def test_add_partitions_refuses_the_topics_not_written_and_attempts_no_other(
    cluster: TxnCluster,
) -> None:
    # testHandleAddPartitionsToTxnAuthorizationFailedAndMetrics
    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *allowed_but("write-birds"))
        request = add_partitions(TXN, pid, epoch, PETS0, BIRDS0)
        answer = await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request, CAROL)
        assert errors_by_partition(answer.results_by_topic_v3_and_below) == {
            PETS0: Errors.OPERATION_NOT_ATTEMPTED,
            BIRDS0: Errors.TOPIC_AUTHORIZATION_FAILED,
        }
        assert in_transaction(broker) == ("Empty", ())
        await broker.shutdown()

    run(scenario)


def test_batched_add_partitions_needs_cluster_action_and_nothing_else(cluster: TxnCluster) -> None:
    """v4 comes from brokers: CLUSTER_ACTION (else the top-level CLUSTER_AUTHORIZATION_FAILED),
    and then no check of the transactional id or the topics (the asking broker made them)."""

    async def scenario() -> None:
        cluster_action = acl(AclOperation.CLUSTER_ACTION, CLUSTER_NAME, ResourceType.CLUSTER)
        broker, pid, epoch = await begun(cluster, cluster_action)
        request = add_partitions_batched(batched_transaction(TXN, pid, epoch, PETS0))
        refused = await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, request, DAVE)
        assert (refused.error_code, refused.results_by_transaction) == (
            Errors.CLUSTER_AUTHORIZATION_FAILED, [],
        )  # fmt: skip
        assert in_transaction(broker) == ("Empty", ())
        answer = await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 4, request, CAROL)
        [result] = answer.results_by_transaction
        assert errors_by_partition(result.topic_results) == {PETS0: Errors.NONE}
        assert in_transaction(broker) == ("Ongoing", (("pets", (0,)),))
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ AddOffsetsToTxn, EndTxn


@pytest.mark.parametrize(
    ("taken", "expected"),
    [
        ("write-txn", Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ("read-group", Errors.GROUP_AUTHORIZATION_FAILED),
    ],
)
def test_add_offsets_refusals(cluster: TxnCluster, taken: str, expected: Errors) -> None:
    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *allowed_but(taken))
        answer = await broker.send(
            ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP), CAROL
        )
        assert answer.error_code == expected
        assert in_transaction(broker) == ("Empty", ())
        await broker.shutdown()

    run(scenario)


def test_end_txn_without_write_on_the_transactional_id(cluster: TxnCluster) -> None:
    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *allowed_but("write-txn"))
        added = await broker.send(
            ApiKey.ADD_PARTITIONS_TO_TXN, 3, add_partitions(TXN, pid, epoch, PETS0), ADMIN
        )
        assert set(errors_by_partition(added.results_by_topic_v3_and_below).values()) == {
            Errors.NONE
        }
        answer = await broker.send(ApiKey.END_TXN, 3, end_txn(TXN, pid, epoch, commit=True), CAROL)
        assert answer.error_code == Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        assert in_transaction(broker) == ("Ongoing", (("pets", (0,)),))
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ TxnOffsetCommit


@pytest.mark.parametrize(
    ("taken", "expected"),
    [
        ("write-txn", {PETS0: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED",
                       BIRDS0: "TRANSACTIONAL_ID_AUTHORIZATION_FAILED"}),
        ("read-group", {PETS0: "GROUP_AUTHORIZATION_FAILED", BIRDS0: "GROUP_AUTHORIZATION_FAILED"}),
        ("read-birds", {PETS0: "NONE", BIRDS0: "TOPIC_AUTHORIZATION_FAILED"}),
    ],
)  # fmt: skip
def test_txn_offset_commit_refusals(
    cluster: TxnCluster, taken: str, expected: dict[TopicPartition, str]
) -> None:
    """``handleTxnOffsetCommitRequest``: WRITE on the transactional id and READ on the group
    refuse every partition; READ per topic refuses that topic's and commits the others."""

    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *allowed_but(taken))
        added = await broker.send(
            ApiKey.ADD_OFFSETS_TO_TXN, 3, add_offsets(TXN, pid, epoch, GROUP), ADMIN
        )
        assert added.error_code == Errors.NONE
        offsets = {PETS0: 3, BIRDS0: 4}
        request = txn_offset_commit(TXN, pid, epoch, GROUP, offsets)
        answer = await broker.send(ApiKey.TXN_OFFSET_COMMIT, 3, request, CAROL)
        assert txn_offset_errors(answer) == {tp: Errors[e] for tp, e in expected.items()}
        offsets_log = cluster.replica_manager.partitions[TopicPartition(OFFSETS_TOPIC, 0)].log
        assert offsets_log.log_end_offset == (1 if expected[PETS0] == "NONE" else 0)
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ WriteTxnMarkers


def test_write_txn_markers_needs_cluster_action(cluster: TxnCluster) -> None:
    async def scenario() -> None:
        broker, pid, epoch = await begun(cluster, *PRODUCER_ACLS.values())
        request = transactional_produce(TXN, pid, epoch, 0, PETS0, b"a")
        added = add_partitions(TXN, pid, epoch, PETS0)
        await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, added, ADMIN)
        await broker.send(ApiKey.PRODUCE, 10, request, ADMIN)
        broker.channel.principal = CAROL  # carol is no broker
        errors = await write_markers(broker, marker(pid, PETS0, BIRDS0, epoch=epoch))
        assert errors == {
            (pid, PETS0): Errors.CLUSTER_AUTHORIZATION_FAILED,
            (pid, BIRDS0): Errors.CLUSTER_AUTHORIZATION_FAILED,
        }
        log = cluster.replica_manager.partitions[PETS0].log
        assert (log.log_end_offset, log.last_stable_offset) == (1, 0)  # no marker
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ the operator's APIs


def test_describe_producers_needs_read_per_topic(cluster: TxnCluster) -> None:
    # testDescribeProducers: an unauthorized topic's partitions answer TOPIC_AUTHORIZATION_FAILED
    async def scenario() -> None:
        broker, _, _ = await begun(cluster, *allowed_but("read-birds"))
        answer = await broker.send(
            ApiKey.DESCRIBE_PRODUCERS, 0, describe_producers(PETS0, BIRDS0), CAROL
        )
        assert producers_by_partition(answer) == {
            PETS0: (Errors.NONE, []),
            BIRDS0: (Errors.TOPIC_AUTHORIZATION_FAILED, []),
        }
        await broker.shutdown()

    run(scenario)


def test_describe_transactions_refuses_ids_and_hides_topics_not_described(
    cluster: TxnCluster,
) -> None:
    """``testDescribeTransactions``, ``testDescribeTransactionsFiltersUnauthorizedTopics``:
    DESCRIBE on each id, else TRANSACTIONAL_ID_AUTHORIZATION_FAILED; partitions of topics not
    described are left out."""

    async def scenario() -> None:
        describe = [
            acl(AclOperation.DESCRIBE, TXN, _TXN_ID),
            acl(AclOperation.DESCRIBE, "pets"),
        ]
        broker, pid, epoch = await begun(cluster, *describe)
        request = add_partitions(TXN, pid, epoch, PETS0, BIRDS0)
        await broker.send(ApiKey.ADD_PARTITIONS_TO_TXN, 3, request, ADMIN)
        await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id("secret"), ADMIN)
        ids = DescribeTransactionsRequest(version=0, transactional_ids=[TXN, "secret"])
        answer = await broker.send(ApiKey.DESCRIBE_TRANSACTIONS, 0, ids, CAROL)
        mover, secret = answer.transaction_states
        assert (mover.error_code, mover.transaction_state) == (Errors.NONE, "Ongoing")
        assert [(t.topic, t.partitions) for t in mover.topics] == [("pets", [0])]
        assert (secret.error_code, secret.transactional_id, secret.producer_id) == (
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, "secret", 0,
        )  # fmt: skip
        await broker.shutdown()

    run(scenario)


def test_list_transactions_lists_only_the_ids_described(cluster: TxnCluster) -> None:
    # testListTransactionsAuthorization
    async def scenario() -> None:
        broker, pid, _ = await begun(cluster, acl(AclOperation.DESCRIBE, TXN, _TXN_ID))
        await broker.send(ApiKey.INIT_PRODUCER_ID, 4, init_producer_id("secret"), ADMIN)
        request = ListTransactionsRequest(version=0, state_filters=[], producer_id_filters=[])
        answer = await broker.send(ApiKey.LIST_TRANSACTIONS, 0, request, CAROL)
        assert answer.error_code == Errors.NONE
        assert [(t.transactional_id, t.producer_id) for t in answer.transaction_states] == [
            (TXN, pid)
        ]
        everything = await broker.send(ApiKey.LIST_TRANSACTIONS, 0, request, ADMIN)
        assert len(everything.transaction_states) == 2
        await broker.shutdown()

    run(scenario)


# ------------------------------------------------------------------ finding and joining


@pytest.mark.parametrize("transactional_id", [TXN, ""])
def test_init_producer_id_needs_write_on_the_transactional_id(
    cluster: TxnCluster, transactional_id: str
) -> None:
    """``handleInitProducerIdRequest``: WRITE on the id (even "", checked before the
    coordinator refuses it), else TRANSACTIONAL_ID_AUTHORIZATION_FAILED and no producer id."""

    async def scenario() -> None:
        broker = TxnBroker(cluster, authorizer(*allowed_but("write-txn")))
        await broker.start()
        request = init_producer_id(transactional_id)
        answer = await broker.send(ApiKey.INIT_PRODUCER_ID, 4, request, CAROL)
        assert (answer.error_code, answer.producer_id, answer.producer_epoch) == (
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1,
        )  # fmt: skip
        assert broker.producer_ids.next == 4000  # no id handed out
        assert broker.transactions.list_transactions().transactions == ()
        await broker.shutdown()

    run(scenario)


def test_find_coordinator_needs_describe_per_transactional_id(cluster: TxnCluster) -> None:
    # KafkaApis.getCoordinator: DESCRIBE on each key (WRITE implies it)
    async def scenario() -> None:
        broker = TxnBroker(cluster, authorizer(*PRODUCER_ACLS.values()))
        await broker.start()
        request = FindCoordinatorRequest(version=4, key_type=1, coordinator_keys=[TXN, "secret"])
        answer = await broker.send(ApiKey.FIND_COORDINATOR, 4, request, CAROL)
        assert [(c.key, c.error_code) for c in answer.coordinators] == [
            (TXN, Errors.NONE),
            ("secret", Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
        ]
        old = FindCoordinatorRequest(version=1, key="secret", key_type=1)
        refused = await broker.send(ApiKey.FIND_COORDINATOR, 1, old, CAROL)
        assert (refused.error_code, refused.node_id) == (
            Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1,
        )  # fmt: skip
        await broker.shutdown()

    run(scenario)
