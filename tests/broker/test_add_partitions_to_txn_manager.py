"""The AddPartitionsToTxnManager's shell (``broker.add_partitions_to_txn_manager``) over a sender
that holds requests until told, the channel's version negotiation, the v4 verify-only codec, and
the composition from the broker's properties.

Kafka's AddPartitionsToTxnManagerTest drives its manager the same way (a mocked network client):
testGenerateRequests (one request in flight per broker, the rest in the next batch),
testTransactionCoordinatorResolution (no request without a coordinator).
"""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from typing import Any

import pytest

from pykraft.broker.add_partitions_to_txn_batches import Outcome
from pykraft.broker.add_partitions_to_txn_channel import (
    NO_BROKER_VERSION,
    add_partitions_to_txn_version,
)
from pykraft.broker.add_partitions_to_txn_manager import (
    AddPartitionsToTxnManager,
    build_add_partitions_to_txn_manager,
)
from pykraft.broker.config import BrokerConfig
from pykraft.coordinator.transaction.config import TRANSACTION_STATE_TOPIC
from pykraft.fetcher.broker_connection import ClientSecurity
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import TopicRecord
from pykraft.protocol.add_partitions_to_txn import (
    AddPartitionsToTxnAnswer,
    VerifyTransaction,
    decode_add_partitions_to_txn_response,
    encode_verify_request,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request, encode_response, response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import broker, partition_record, replay

STATE_ID = "dT2Kb4c4Qy6mpnXcWzUchw"
FOO0, FOO1 = TopicPartition("foo", 0), TopicPartition("foo", 1)


class HeldSender:
    """Records each request; answers every partition NONE once ``gate`` is set."""

    def __init__(self) -> None:
        self.requests: list[tuple[int, tuple[VerifyTransaction, ...]]] = []
        self.gate = asyncio.Event()
        self.gate.set()
        self.fail = False
        self.closed = False

    async def send(self, broker_id: int, transactions: Sequence[VerifyTransaction]) -> Outcome:
        self.requests.append((broker_id, tuple(transactions)))
        await self.gate.wait()
        if self.fail:
            raise RuntimeError("a bug in the sender")
        results = {
            t.transactional_id: dict.fromkeys(t.partitions, Errors.NONE) for t in transactions
        }
        return AddPartitionsToTxnAnswer(Errors.NONE, results)

    async def close(self) -> None:
        self.closed = True


def coordinators(*leaders: int) -> MetadataImage:
    """``__transaction_state`` partition i led by ``leaders[i]``, every leader registered."""
    records: list[Any] = [broker(b) for b in sorted(set(leaders))]
    records.append(TopicRecord(name=TRANSACTION_STATE_TOPIC, topic_id=STATE_ID))
    records.extend(partition_record(STATE_ID, i, (leader,)) for i, leader in enumerate(leaders))
    return replay(MetadataImage.EMPTY, records).apply()


def manager(image: MetadataImage, sender: HeldSender) -> AddPartitionsToTxnManager:
    return AddPartitionsToTxnManager(
        metadata=lambda: image,
        listener_name="PLAINTEXT",
        partition_for=lambda transactional_id: int(transactional_id[-1]),
        sender=sender,
    )


async def settle() -> None:
    for _ in range(20):
        await asyncio.sleep(0)


def test_one_request_in_flight_per_broker_the_rest_batched() -> None:
    # AddPartitionsToTxnManagerTest.testGenerateRequests, through the shell.
    async def scenario() -> None:
        sender = HeldSender()
        verifier = manager(coordinators(1, 2, 1), sender)
        sender.gate.clear()
        first = asyncio.ensure_future(verifier.verify_transaction("txn0", 10, 0, [FOO0]))
        await settle()
        # txn0 is in flight to broker 1; txn2 (broker 1) waits, txn1 (broker 2) goes now.
        later = asyncio.ensure_future(verifier.verify_transaction("txn2", 12, 0, [FOO0, FOO1]))
        other = asyncio.ensure_future(verifier.verify_transaction("txn1", 11, 0, [FOO1]))
        await settle()
        assert [(node, [t.transactional_id for t in txns]) for node, txns in sender.requests] == [
            (1, ["txn0"]),
            (2, ["txn1"]),
        ]
        sender.gate.set()
        assert await first == {} and await other == {} and await later == {}
        assert sender.requests[2][0] == 1
        assert [t.transactional_id for t in sender.requests[2][1]] == ["txn2"]

    asyncio.run(scenario())


def test_no_request_without_a_coordinator() -> None:
    # AddPartitionsToTxnManagerTest.testTransactionCoordinatorResolution
    async def scenario() -> None:
        sender = HeldSender()
        verifier = manager(MetadataImage.EMPTY, sender)
        assert await verifier.verify_transaction("txn0", 1, 0, [FOO0, FOO1]) == {
            FOO0: Errors.COORDINATOR_NOT_AVAILABLE,
            FOO1: Errors.COORDINATOR_NOT_AVAILABLE,
        }
        assert sender.requests == []

    asyncio.run(scenario())


def test_a_retry_supersedes_the_waiting_question() -> None:
    # AddPartitionsToTxnManagerTest.testAddTxnData's same-epoch retry, through the shell.
    async def scenario() -> None:
        sender = HeldSender()
        verifier = manager(coordinators(1), sender)
        sender.gate.clear()
        in_flight = asyncio.ensure_future(verifier.verify_transaction("txn0", 1, 0, [FOO0]))
        await settle()
        waiting = asyncio.ensure_future(verifier.verify_transaction("txn0", 1, 0, [FOO0]))
        await settle()
        retry = asyncio.ensure_future(verifier.verify_transaction("txn0", 1, 0, [FOO0]))
        await settle()
        assert await waiting == {FOO0: Errors.NETWORK_EXCEPTION}
        sender.gate.set()
        assert await in_flight == {} and await retry == {}

    asyncio.run(scenario())


def test_close_answers_every_waiting_question_and_closes_the_channel() -> None:
    async def scenario() -> None:
        sender = HeldSender()
        verifier = manager(coordinators(1), sender)
        sender.gate.clear()
        in_flight = asyncio.ensure_future(verifier.verify_transaction("txn0", 1, 0, [FOO0]))
        await settle()
        queued = asyncio.ensure_future(verifier.verify_transaction("txn0", 2, 1, [FOO1]))
        await settle()
        await verifier.close()
        assert await in_flight == {FOO0: Errors.NETWORK_EXCEPTION}
        assert await queued == {FOO1: Errors.NETWORK_EXCEPTION}
        assert sender.closed
        # After close nothing is sent.
        assert await verifier.verify_transaction("txn0", 2, 1, [FOO1]) == {
            FOO1: Errors.NETWORK_EXCEPTION
        }
        assert len(sender.requests) == 1

    asyncio.run(scenario())


def test_a_failing_sender_is_a_network_error() -> None:
    async def scenario() -> None:
        sender = HeldSender()
        sender.fail = True
        verifier = manager(coordinators(1), sender)
        assert await verifier.verify_transaction("txn0", 1, 0, [FOO0]) == {
            FOO0: Errors.NETWORK_EXCEPTION
        }

    asyncio.run(scenario())


# ---------------------------------------------------------------------------- the channel


@pytest.mark.parametrize(
    ("ranges", "expected"),
    [
        ({ApiKey.ADD_PARTITIONS_TO_TXN: (0, 4)}, 4),
        ({ApiKey.ADD_PARTITIONS_TO_TXN: (0, 5)}, 5),  # Kafka 3.8+ (v5: KIP-890's new error)
        ({ApiKey.ADD_PARTITIONS_TO_TXN: (0, 6)}, 5),  # we speak up to v5
        ({ApiKey.ADD_PARTITIONS_TO_TXN: (0, 3)}, NO_BROKER_VERSION),  # a pre-3.6 broker
        ({ApiKey.ADD_PARTITIONS_TO_TXN: (6, 7)}, NO_BROKER_VERSION),
        ({}, NO_BROKER_VERSION),
    ],
)
def test_version_negotiation(ranges: dict[int, tuple[int, int]], expected: int) -> None:
    # Kafka: a coordinator's broker without v4 means verification is skipped, not failed.
    assert add_partitions_to_txn_version(ranges) == expected


def test_the_verify_only_request_as_the_handler_reads_it() -> None:
    transactions = [
        VerifyTransaction("txn0", 5, 1, (FOO0, TopicPartition("bar", 2), FOO1)),
        VerifyTransaction("txn1", 6, 0, (FOO1,)),
    ]
    request = decode_request(
        ApiKey.ADD_PARTITIONS_TO_TXN, 4, encode_verify_request(transactions, 4)
    )
    read = [
        (
            t.transactional_id,
            t.producer_id,
            t.producer_epoch,
            t.verify_only,
            [(topic.name, list(topic.partitions)) for topic in t.topics],
        )
        for t in request.transactions
    ]
    assert read == [
        ("txn0", 5, 1, True, [("foo", [0, 1]), ("bar", [2])]),
        ("txn1", 6, 0, True, [("foo", [1])]),
    ]


def test_the_answer_as_the_handler_writes_it() -> None:
    response: Any = response_class(ApiKey.ADD_PARTITIONS_TO_TXN)
    partition = response.AddPartitionsToTxnTopicResult.AddPartitionsToTxnPartitionResult
    body = encode_response(
        ApiKey.ADD_PARTITIONS_TO_TXN,
        4,
        response(
            version=4,
            throttle_time_ms=0,
            error_code=0,
            results_by_transaction=[
                response.AddPartitionsToTxnResult(
                    transactional_id="txn0",
                    topic_results=[
                        response.AddPartitionsToTxnTopicResult(
                            name="foo",
                            results_by_partition=[
                                partition(partition_index=0, partition_error_code=0),
                                partition(partition_index=1, partition_error_code=120),
                            ],
                        )
                    ],
                )
            ],
        ),
    )
    assert decode_add_partitions_to_txn_response(body, 4) == AddPartitionsToTxnAnswer(
        Errors.NONE, {"txn0": {FOO0: Errors.NONE, FOO1: Errors.TRANSACTION_ABORTABLE}}
    )


# ---------------------------------------------------------------------------- composition


def test_built_only_when_verification_is_enabled() -> None:
    base = {
        "node.id": "1",
        "log.dirs": "/tmp/unused",
        "controller.quorum.bootstrap.servers": "127.0.0.1:19093",
    }
    enabled = BrokerConfig.from_properties(base)
    disabled = BrokerConfig.from_properties(
        {**base, "transaction.partition.verification.enable": "false"}
    )
    image = MetadataImage.EMPTY
    built = build_add_partitions_to_txn_manager(enabled, lambda: image, ClientSecurity(), lambda: 0)
    assert isinstance(built, AddPartitionsToTxnManager)
    assert (
        build_add_partitions_to_txn_manager(disabled, lambda: image, ClientSecurity(), lambda: 0)
        is None
    )
