"""The AddPartitionsToTxnManager's decisions (``broker.add_partitions_to_txn_batches``) and the
produce errors they turn into (``broker.transaction_verification``), pure.

The cases are Kafka's AddPartitionsToTxnManagerTest (core/src/test/scala/unit/kafka/server):
testAddTxnData, testGenerateRequests, testTransactionCoordinatorResolution,
testAddPartitionsToTxnHandlerErrorHandling; and ReplicaManager's translation of coordinator
errors ("translate transaction coordinator errors to known producer response errors").
"""

from __future__ import annotations

import pytest

from pykraft.broker.add_partitions_to_txn_batches import (
    Sent,
    Unanswered,
    VerificationBatches,
    transaction_coordinator,
    unverified,
)
from pykraft.broker.transaction_verification import (
    DEFAULT_ERROR,
    TransactionSupportedOperation,
    one_producer,
    produce_error,
    supported_operation,
    transactional_header,
)
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord, TopicRecord
from pykraft.protocol.add_partitions_to_txn import AddPartitionsToTxnAnswer, VerifyTransaction
from pykraft.protocol.errors import Errors
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import broker, partition_record, replay

FOO1, FOO2, FOO3 = (TopicPartition("foo", p) for p in (1, 2, 3))
PARTITIONS = (FOO1, FOO2, FOO3)
GENERIC = TransactionSupportedOperation.GENERIC_ERROR_SUPPORTED


def txn(transactional_id: str, producer_id: int = 0, epoch: int = 0) -> VerifyTransaction:
    return VerifyTransaction(transactional_id, producer_id, epoch, PARTITIONS)


def every(error: Errors) -> dict[TopicPartition, Errors]:
    return dict.fromkeys(PARTITIONS, error)


# ---------------------------------------------------------------------------- batching


def test_add_txn_data_replaces_by_epoch() -> None:
    # AddPartitionsToTxnManagerTest.testAddTxnData
    batches = VerificationBatches()
    assert batches.add(0, txn("txn1", 0), waiter=1) == []
    assert batches.add(1, txn("txn2", 1), waiter=2) == []
    assert batches.add(0, txn("txn3", 2), waiter=3) == []
    # Same id, same epoch: a retry; the one waiting gets a retriable error and is replaced.
    assert batches.add(0, txn("txn1", 0), waiter=4) == [(1, every(Errors.NETWORK_EXCEPTION))]
    # A newer epoch fences the one waiting.
    assert batches.add(0, txn("txn1", 0, epoch=1), waiter=5) == [
        (4, every(Errors.INVALID_PRODUCER_EPOCH))
    ]
    # An older epoch is fenced at once and never queued.
    assert batches.add(0, txn("txn1", 0), waiter=6) == [(6, every(Errors.INVALID_PRODUCER_EPOCH))]
    # Insertion order: txn3, then the replacing txn1.
    assert batches.next_request(0) == Sent(0, (txn("txn3", 2), txn("txn1", 0, epoch=1)), (3, 5))
    assert batches.next_request(1) == Sent(1, (txn("txn2", 1),), (2,))


def test_generate_requests_one_in_flight_per_node() -> None:
    # AddPartitionsToTxnManagerTest.testGenerateRequests
    batches = VerificationBatches()
    batches.add(0, txn("txn1"), waiter=1)
    batches.add(1, txn("txn2"), waiter=2)
    to_node0, to_node1 = batches.next_request(0), batches.next_request(1)
    assert to_node0 is not None and to_node1 is not None
    batches.add(1, txn("txn2"), waiter=3)
    batches.add(2, txn("txn3"), waiter=4)
    assert batches.next_request(1) is None  # one request already in flight to node 1
    assert batches.next_request(2) == Sent(2, (txn("txn3"),), (4,))
    assert batches.next_request(0) is None  # nothing waiting
    # The answer to node 1 lets its next batch go.
    assert batches.on_outcome(to_node1, Unanswered.NETWORK) == [
        (2, every(Errors.NETWORK_EXCEPTION))
    ]
    assert batches.next_request(1) == Sent(1, (txn("txn2"),), (3,))
    assert batches.pending_nodes() == []


def test_a_verification_answered_early_is_still_in_flight_for_others() -> None:
    batches = VerificationBatches()
    batches.add(0, txn("txn1"), waiter=1)
    sent = batches.next_request(0)
    assert sent is not None
    # The same id arriving while its first question is in flight waits for the next batch
    # (only waiting questions are replaced, as Kafka's nodesToTransactions).
    assert batches.add(0, txn("txn1"), waiter=2) == []
    assert batches.waiters() == [2]


# ---------------------------------------------------------------------------- the coordinator


def image(*records: MetadataRecord) -> MetadataImage:
    return replay(MetadataImage.EMPTY, records).apply()


STATE_ID = "dT2Kb4c4Qy6mpnXcWzUchw"


def test_transaction_coordinator_resolution() -> None:
    # AddPartitionsToTxnManagerTest.testTransactionCoordinatorResolution
    topic = TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=STATE_ID)
    led_by_2 = partition_record(STATE_ID, 0, (2, 3))
    # The transaction state topic does not exist.
    assert transaction_coordinator(image(broker(2)), 0, "PLAINTEXT") is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )
    # The partition does not exist.
    assert transaction_coordinator(image(broker(2), topic, led_by_2), 1, "PLAINTEXT") is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )
    # The leader is not available: fenced, unknown, or not on the listener.
    assert transaction_coordinator(
        image(broker(2, fenced=True), topic, led_by_2), 0, "PLAINTEXT"
    ) is (Errors.COORDINATOR_NOT_AVAILABLE)
    assert transaction_coordinator(image(broker(3), topic, led_by_2), 0, "PLAINTEXT") is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )
    assert transaction_coordinator(image(broker(2), topic, led_by_2), 0, "INTERNAL") is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )
    assert transaction_coordinator(image(broker(2), topic, led_by_2), 0, "PLAINTEXT") == 2


def test_the_partition_without_a_leader_has_no_coordinator() -> None:
    topic = TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=STATE_ID)
    leaderless = partition_record(STATE_ID, 0, (2,), leader=-1, isr=())
    assert transaction_coordinator(image(broker(2), topic, leaderless), 0, "PLAINTEXT") is (
        Errors.COORDINATOR_NOT_AVAILABLE
    )


# ---------------------------------------------------------------------------- answers


def answer(
    error: Errors = Errors.NONE, **results: dict[TopicPartition, Errors]
) -> AddPartitionsToTxnAnswer:
    return AddPartitionsToTxnAnswer(error, results)


def test_add_partitions_to_txn_handler_error_handling() -> None:
    # AddPartitionsToTxnManagerTest.testAddPartitionsToTxnHandlerErrorHandling
    # On version mismatch verification is skipped: nothing is unverified.
    assert unverified(txn("txn1"), Unanswered.VERSION_MISMATCH) == {}
    # A lost connection (or timeout): retriable for every partition.
    assert unverified(txn("txn1"), Unanswered.NETWORK) == every(Errors.NETWORK_EXCEPTION)
    # The brokers' authorization failing is not for the client to see.
    top_level = answer(Errors.CLUSTER_AUTHORIZATION_FAILED)
    assert unverified(txn("txn1"), top_level) == every(Errors.INVALID_TXN_STATE)
    assert unverified(txn("txn1"), answer(Errors.NOT_COORDINATOR)) == every(Errors.NOT_COORDINATOR)
    # Mixed answers: PRODUCER_FENCED becomes INVALID_PRODUCER_EPOCH; NONE is verified.
    mixed = answer(
        txn1=every(Errors.PRODUCER_FENCED),
        txn2={FOO1: Errors.NONE, FOO2: Errors.INVALID_TXN_STATE, FOO3: Errors.NONE},
    )
    assert unverified(txn("txn1"), mixed) == every(Errors.INVALID_PRODUCER_EPOCH)
    assert unverified(txn("txn2"), mixed) == {FOO2: Errors.INVALID_TXN_STATE}
    # TRANSACTION_ABORTABLE is passed on; the produce version decides what the client sees.
    abortable = answer(txn1=every(Errors.TRANSACTION_ABORTABLE))
    assert unverified(txn("txn1"), abortable) == every(Errors.TRANSACTION_ABORTABLE)


def test_what_the_answer_leaves_out_is_not_verified() -> None:
    # Kafka would take a partition missing from the answer as verified; here it is retried.
    partial = answer(txn1={FOO1: Errors.NONE})
    assert unverified(txn("txn1"), partial) == {
        FOO2: Errors.NETWORK_EXCEPTION,
        FOO3: Errors.NETWORK_EXCEPTION,
    }
    assert unverified(txn("txn2"), partial) == every(Errors.NETWORK_EXCEPTION)


def test_on_outcome_answers_every_waiter_of_the_request() -> None:
    batches = VerificationBatches()
    batches.add(0, txn("txn1", 1), waiter=1)
    batches.add(0, txn("txn2", 2), waiter=2)
    sent = batches.next_request(0)
    assert sent is not None
    outcome = answer(txn1=every(Errors.NONE), txn2={FOO1: Errors.CONCURRENT_TRANSACTIONS})
    assert batches.on_outcome(sent, outcome) == [
        (1, {}),
        (
            2,
            {
                FOO1: Errors.CONCURRENT_TRANSACTIONS,
                **{FOO2: Errors.NETWORK_EXCEPTION, FOO3: Errors.NETWORK_EXCEPTION},
            },
        ),
    ]


# ---------------------------------------------------------------------------- produce errors


@pytest.mark.parametrize(
    ("error", "operation", "expected"),
    [
        # AddPartitionsToTxnManager's backward compatibility: Produce <= v10 knows no abortable.
        (Errors.TRANSACTION_ABORTABLE, DEFAULT_ERROR, Errors.INVALID_TXN_STATE),
        (Errors.TRANSACTION_ABORTABLE, GENERIC, Errors.TRANSACTION_ABORTABLE),
        (Errors.INVALID_TXN_STATE, DEFAULT_ERROR, Errors.INVALID_TXN_STATE),
        # Retriable coordinator errors older clients may not retry -> NOT_ENOUGH_REPLICAS.
        (Errors.NETWORK_EXCEPTION, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_LOAD_IN_PROGRESS, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.COORDINATOR_NOT_AVAILABLE, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.NOT_COORDINATOR, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        (Errors.CONCURRENT_TRANSACTIONS, DEFAULT_ERROR, Errors.NOT_ENOUGH_REPLICAS),
        # The rest reach the producer as they are.
        (Errors.INVALID_PRODUCER_EPOCH, DEFAULT_ERROR, Errors.INVALID_PRODUCER_EPOCH),
        (Errors.INVALID_PRODUCER_ID_MAPPING, DEFAULT_ERROR, Errors.INVALID_PRODUCER_ID_MAPPING),
        (Errors.NOT_LEADER_OR_FOLLOWER, DEFAULT_ERROR, Errors.NOT_LEADER_OR_FOLLOWER),
    ],
)
def test_produce_error(
    error: Errors, operation: TransactionSupportedOperation, expected: Errors
) -> None:
    code, message = produce_error(error, operation)
    assert code is expected
    if expected is Errors.NOT_ENOUGH_REPLICAS:
        assert message == (
            "Unable to verify the partition has been added to the transaction. "
            f"Underlying error: {error.name}"
        )
    elif expected is Errors.INVALID_TXN_STATE:
        assert message == "Partition was not added to the transaction"
    else:
        assert message is None


@pytest.mark.parametrize(
    ("version", "expected"),
    [(3, DEFAULT_ERROR), (10, DEFAULT_ERROR), (11, GENERIC), (12, GENERIC)],
)
def test_supported_operation_by_produce_version(
    version: int, expected: TransactionSupportedOperation
) -> None:
    # AddPartitionsToTxnManager.produceRequestVersionToTransactionSupportedOperation
    assert supported_operation(version) is expected


# ---------------------------------------------------------------------------- the batches


def batch(producer_id: int = 7, *, transactional: bool = True, sequence: int = 0) -> bytes:
    return build_batch(
        [SimpleRecord(value=b"v")],
        producer_id=producer_id,
        producer_epoch=3,
        base_sequence=sequence,
        is_transactional=transactional,
    )


def test_only_transactional_batches_with_a_producer_id_are_verified() -> None:
    header = transactional_header(batch(sequence=4))
    assert header is not None
    assert (header.producer_id, header.producer_epoch, header.base_sequence) == (7, 3, 4)
    assert transactional_header(batch(transactional=False)) is None
    assert transactional_header(build_batch([SimpleRecord(value=b"plain")])) is None
    assert transactional_header(None) is None
    assert transactional_header(b"\x00" * 20) is None  # the log refuses what is not a batch


def test_one_producer_per_request() -> None:
    first, second = transactional_header(batch(7)), transactional_header(batch(8))
    assert first is not None and second is not None
    assert one_producer([]) is None
    producer = one_producer([first, first])
    assert producer is not None and not isinstance(producer, Errors)
    assert (producer.producer_id, producer.producer_epoch) == (7, 3)
    # Kafka's InvalidPidMappingException: "more than one producer ID".
    assert one_producer([first, second]) is Errors.INVALID_PRODUCER_ID_MAPPING
