"""AddPartitionsToTxn v4+ as one broker sends it to another: KIP-890 part 1's verify-only
question, the client side (the server side is ``broker/handlers/transactions.py``).

Version 4 batches transactions (``AddPartitionsToTxnRequest.Builder.forBroker``), each with
``VerifyOnly``: is each partition already in the transaction? The answer has a top-level error
(CLUSTER_AUTHORIZATION_FAILED when the sender may not CLUSTER_ACTION) and an error per
transaction and partition. Versions 0-3 are the clients'; brokers never send them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response, request_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

FIRST_BROKER_VERSION = 4


@attrs.frozen
class VerifyTransaction:
    """One transaction of the request: which of its partitions to check."""

    transactional_id: str
    producer_id: int
    producer_epoch: int
    partitions: tuple[TopicPartition, ...]


@attrs.frozen
class AddPartitionsToTxnAnswer:
    """The decoded response: the top-level error and each transaction's partition errors."""

    error: Errors
    results: Mapping[str, Mapping[TopicPartition, Errors]]


def encode_verify_request(transactions: Sequence[VerifyTransaction], version: int) -> bytes:
    """The request body (no header) asking, per transaction, only to verify."""
    assert version >= FIRST_BROKER_VERSION, "brokers send AddPartitionsToTxn v4+"
    request: Any = request_class(ApiKey.ADD_PARTITIONS_TO_TXN)
    body = request(
        version=version,
        transactions=[
            request.AddPartitionsToTxnTransaction(
                transactional_id=transaction.transactional_id,
                producer_id=transaction.producer_id,
                producer_epoch=transaction.producer_epoch,
                verify_only=True,
                topics=[
                    request.AddPartitionsToTxnTransaction.AddPartitionsToTxnTopic(
                        name=topic, partitions=list(partitions)
                    )
                    for topic, partitions in _by_topic(transaction.partitions).items()
                ],
            )
            for transaction in transactions
        ],
    )
    return bytes(body.encode(version=version))


def decode_add_partitions_to_txn_response(
    body: bytes | bytearray | memoryview, version: int
) -> AddPartitionsToTxnAnswer:
    """Raises ``ProtocolError`` (or ``ValueError`` for an unknown error code)."""
    response = decode_response(ApiKey.ADD_PARTITIONS_TO_TXN, version, body)
    results = {
        transaction.transactional_id: {
            TopicPartition(topic.name, partition.partition_index): Errors(
                partition.partition_error_code
            )
            for topic in transaction.topic_results
            for partition in topic.results_by_partition
        }
        for transaction in response.results_by_transaction
    }
    return AddPartitionsToTxnAnswer(Errors(response.error_code), results)


def _by_topic(partitions: Sequence[TopicPartition]) -> dict[str, list[int]]:
    topics: dict[str, list[int]] = {}
    for tp in partitions:
        topics.setdefault(tp.topic, []).append(tp.partition)
    return topics
