"""``pykraft.admin_codec``: each request ``pykraft transactions`` sends is read back with the
decoder the broker uses (``protocol.apis.decode_request``), and each answer is built with the
broker's response classes and read into Kafka's admin values — with the rules of Kafka's admin
handlers (absent coordinator epoch, start offset and start time; an ABORT marker for one
partition) — and the version each API is sent at is the highest both sides speak.
"""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.admin_codec import (
    AbortTransactionSpec,
    BrokerNode,
    FoundCoordinator,
    ListedTransactions,
    PartitionMetadata,
    PartitionProducers,
    ProducerState,
    TransactionDescription,
    TransactionListing,
    admin_versions,
    decode_abort,
    decode_describe_producers,
    decode_describe_transactions,
    decode_find_coordinator,
    decode_list_transactions,
    decode_metadata,
    encode_abort,
    encode_describe_producers,
    encode_describe_transactions,
    encode_find_transaction_coordinator,
    encode_list_transactions,
    encode_metadata,
)
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    decode_request,
    encode_response,
    response_class,
)
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.txn_markers import write_txn_markers_request, write_txn_markers_response
from pykraft.storage.topic_partition import TopicPartition
from pykraft.storage.txn_markers import TxnMarker

FOO0, FOO1, BAR3 = TopicPartition("foo", 0), TopicPartition("foo", 1), TopicPartition("bar", 3)


def answer(api_key: ApiKey, version: int, **fields: Any) -> bytes:
    return encode_response(api_key, version, response_class(api_key)(version=version, **fields))


# ---------------------------------------------------------------------------- versions


def ranges(**overrides: tuple[int, int]) -> dict[int, tuple[int, int]]:
    table: dict[int, tuple[int, int]] = {
        key: (r.min_version, r.max_version) for key, r in SUPPORTED_API_VERSIONS.items()
    }
    table.update({ApiKey[name]: value for name, value in overrides.items()})
    return table


def test_each_api_at_the_highest_version_both_sides_speak() -> None:
    chosen = admin_versions(ranges(METADATA=(0, 9), FIND_COORDINATOR=(0, 3)))
    assert chosen.of(ApiKey.METADATA) == 9
    assert chosen.of(ApiKey.FIND_COORDINATOR) == 3
    assert chosen.of(ApiKey.DESCRIBE_PRODUCERS) == 0
    assert chosen.of(ApiKey.WRITE_TXN_MARKERS) == 1
    # a newer broker: our own maxima
    newer = admin_versions(ranges(METADATA=(0, 13), LIST_TRANSACTIONS=(0, 2)))
    assert newer.of(ApiKey.METADATA) == SUPPORTED_API_VERSIONS[ApiKey.METADATA].max_version
    assert newer.of(ApiKey.LIST_TRANSACTIONS) == 1  # ours: v1, Kafka 3.9's (KIP-994)


def test_an_api_the_broker_does_not_serve_is_absent() -> None:
    table = ranges()
    del table[ApiKey.DESCRIBE_PRODUCERS]
    table[ApiKey.FIND_COORDINATOR] = (0, 0)  # no key types before v1
    chosen = admin_versions(table)
    assert chosen.of(ApiKey.DESCRIBE_PRODUCERS) is None
    assert chosen.of(ApiKey.FIND_COORDINATOR) is None


@pytest.mark.parametrize("metadata", [None, (0, 0)])
def test_a_broker_without_metadata_from_v1_cannot_be_used(metadata: tuple[int, int] | None) -> None:
    table = ranges()
    if metadata is None:
        del table[ApiKey.METADATA]
    else:
        table[ApiKey.METADATA] = metadata
    with pytest.raises(ProtocolError):
        admin_versions(table)


# ---------------------------------------------------------------------------- Metadata


@pytest.mark.parametrize("version", [1, 4, 12])
def test_metadata_asks_for_every_topic_or_some_and_never_creates_one(version: int) -> None:
    every = decode_request(ApiKey.METADATA, version, encode_metadata(version, None))
    assert every.topics is None
    some = decode_request(ApiKey.METADATA, version, encode_metadata(version, ["foo", "bar"]))
    assert [t.name for t in some.topics] == ["foo", "bar"]
    if version >= 4:
        assert some.allow_auto_topic_creation is False


def test_metadata_answer_as_brokers_and_partitions_in_order() -> None:
    response: Any = response_class(ApiKey.METADATA)
    topic = response.MetadataResponseTopic
    partition = topic.MetadataResponsePartition
    body = answer(
        ApiKey.METADATA, 12,
        brokers=[response.MetadataResponseBroker(node_id=1, host="h1", port=9092, rack=None)],
        cluster_id="c", controller_id=1,
        topics=[topic(
            error_code=0, name="foo", is_internal=False, topic_id=None,
            partitions=[
                partition(error_code=0, partition_index=1, leader_id=-1, leader_epoch=3,
                          replica_nodes=[1, 2], isr_nodes=[1], offline_replicas=[]),
                partition(error_code=0, partition_index=0, leader_id=2, leader_epoch=3,
                          replica_nodes=[2, 1], isr_nodes=[2, 1], offline_replicas=[]),
            ],
        )],
    )  # fmt: skip
    metadata = decode_metadata(body, 12)
    assert metadata.brokers == {1: BrokerNode(1, "h1", 9092)}
    assert metadata.topics["foo"].partitions == (
        PartitionMetadata(0, Errors.NONE, 2, (2, 1)),
        PartitionMetadata(1, Errors.NONE, -1, (1, 2)),
    )
    assert (metadata.leader_of(FOO0), metadata.leader_of(FOO1)) == (2, -1)
    assert metadata.leader_of(BAR3) == -1


# ---------------------------------------------------------------------------- FindCoordinator


def test_find_coordinator_v4_asks_for_every_transactional_id_at_once() -> None:
    request = decode_request(
        ApiKey.FIND_COORDINATOR, 4, encode_find_transaction_coordinator(4, ["a", "b"])
    )
    assert (request.key_type, request.coordinator_keys) == (1, ["a", "b"])
    coordinator = response_class(ApiKey.FIND_COORDINATOR).Coordinator
    body = answer(
        ApiKey.FIND_COORDINATOR, 4, throttle_time_ms=0,
        coordinators=[
            coordinator(key="b", node_id=2, host="h2", port=2, error_code=0, error_message=None),
            coordinator(key="zzz", node_id=9, host="h9", port=9, error_code=0, error_message=None),
        ],
    )  # fmt: skip
    assert decode_find_coordinator(body, 4, ["a", "b"]) == {
        "a": FoundCoordinator(Errors.UNKNOWN_SERVER_ERROR, None),  # left out of the answer
        "b": FoundCoordinator(Errors.NONE, BrokerNode(2, "h2", 2)),
    }


def test_find_coordinator_before_v4_asks_for_one_key() -> None:
    request = decode_request(
        ApiKey.FIND_COORDINATOR, 3, encode_find_transaction_coordinator(3, ["a"])
    )
    assert (request.key_type, request.key) == (1, "a")
    body = answer(
        ApiKey.FIND_COORDINATOR, 3, throttle_time_ms=0, error_code=15, error_message="loading",
        node_id=-1, host="", port=-1,
    )  # fmt: skip
    assert decode_find_coordinator(body, 3, ["a"]) == {
        "a": FoundCoordinator(Errors.COORDINATOR_NOT_AVAILABLE, None)
    }
    with pytest.raises(AssertionError):
        encode_find_transaction_coordinator(3, ["a", "b"])


# ---------------------------------------------------------------------------- DescribeProducers


def test_describe_producers_asks_topic_by_topic() -> None:
    request = decode_request(
        ApiKey.DESCRIBE_PRODUCERS, 0, encode_describe_producers(0, [FOO1, BAR3, FOO0])
    )
    assert [(t.name, t.partition_indexes) for t in request.topics] == [
        ("foo", [1, 0]),
        ("bar", [3]),
    ]


def test_describe_producers_answer_negative_epochs_and_offsets_are_absent() -> None:
    # DescribeProducersHandler: coordinatorEpoch < 0 and currentTxnStartOffset < 0 -> empty
    topic: Any = response_class(ApiKey.DESCRIBE_PRODUCERS).TopicResponse
    partition, state = topic.PartitionResponse, topic.PartitionResponse.ProducerState
    body = answer(
        ApiKey.DESCRIBE_PRODUCERS, 0, throttle_time_ms=0,
        topics=[topic(name="foo", partitions=[
            partition(partition_index=0, error_code=0, error_message=None, active_producers=[
                state(producer_id=12345, producer_epoch=15, last_sequence=1300,
                      last_timestamp=1599509565, coordinator_epoch=20,
                      current_txn_start_offset=990),
                state(producer_id=98765, producer_epoch=30, last_sequence=2300,
                      last_timestamp=1599509599, coordinator_epoch=-1,
                      current_txn_start_offset=-1),
            ]),
            partition(partition_index=1, error_code=6, error_message="not here",
                      active_producers=[]),
        ])],
    )  # fmt: skip
    assert decode_describe_producers(body, 0) == {
        FOO0: PartitionProducers(
            Errors.NONE,
            None,
            (
                ProducerState(12345, 15, 1300, 1599509565, 20, 990),
                ProducerState(98765, 30, 2300, 1599509599, None, None),
            ),
        ),
        FOO1: PartitionProducers(Errors.NOT_LEADER_OR_FOLLOWER, "not here", ()),
    }


# ---------------------------------------------------------------------------- transactions


def test_describe_transactions_answer() -> None:
    request = decode_request(
        ApiKey.DESCRIBE_TRANSACTIONS, 0, encode_describe_transactions(0, ["t1", "t2", "t3"])
    )
    assert request.transactional_ids == ["t1", "t2", "t3"]
    state: Any = response_class(ApiKey.DESCRIBE_TRANSACTIONS).TransactionState
    body = answer(
        ApiKey.DESCRIBE_TRANSACTIONS, 0, throttle_time_ms=0,
        transaction_states=[
            state(error_code=0, transactional_id="t1", transaction_state="Ongoing",
                  transaction_timeout_ms=60000, transaction_start_time_ms=1000, producer_id=7,
                  producer_epoch=2, topics=[state.TopicData(topic="foo", partitions=[1, 0]),
                                            state.TopicData(topic="bar", partitions=[3])]),
            state(error_code=0, transactional_id="t2", transaction_state="Empty",
                  transaction_timeout_ms=60000, transaction_start_time_ms=-1, producer_id=8,
                  producer_epoch=0, topics=[]),
            state(error_code=105, transactional_id="t3", transaction_state="",
                  transaction_timeout_ms=0, transaction_start_time_ms=0, producer_id=0,
                  producer_epoch=0, topics=[]),
        ],
    )  # fmt: skip
    described = decode_describe_transactions(body, 0, coordinator_id=4)
    assert described["t1"].description == TransactionDescription(
        4, "Ongoing", 7, 2, 60000, 1000, (BAR3, FOO0, FOO1)
    )
    assert described["t2"].description == TransactionDescription(4, "Empty", 8, 0, 60000, None, ())
    assert (described["t3"].error, described["t3"].description) == (
        Errors.TRANSACTIONAL_ID_NOT_FOUND,
        None,
    )


def test_list_transactions_filters_and_answer() -> None:
    request = decode_request(
        ApiKey.LIST_TRANSACTIONS, 0, encode_list_transactions(0, ["Ongoing"], [7, 8])
    )
    assert (request.state_filters, request.producer_id_filters) == (["Ongoing"], [7, 8])
    state: Any = response_class(ApiKey.LIST_TRANSACTIONS).TransactionState
    body = answer(
        ApiKey.LIST_TRANSACTIONS, 0, throttle_time_ms=0, error_code=0, unknown_state_filters=[],
        transaction_states=[
            state(transactional_id="t1", producer_id=7, transaction_state="Ongoing"),
        ],
    )  # fmt: skip
    assert decode_list_transactions(body, 0) == ListedTransactions(
        Errors.NONE, (TransactionListing("t1", 7, "Ongoing"),)
    )


# ---------------------------------------------------------------------------- abort


def test_abort_is_one_abort_marker_for_one_partition() -> None:
    spec = AbortTransactionSpec(FOO1, producer_id=12345, producer_epoch=15, coordinator_epoch=76)
    request = decode_request(ApiKey.WRITE_TXN_MARKERS, 1, encode_abort(1, spec))
    assert write_txn_markers_request(request) == (
        TxnMarker(
            producer_id=12345,
            producer_epoch=15,
            coordinator_epoch=76,
            commit=False,
            partitions=(FOO1,),
        ),
    )
    fenced = write_txn_markers_response(1, {(12345, FOO1): Errors.TRANSACTION_COORDINATOR_FENCED})
    assert decode_abort(encode_response(ApiKey.WRITE_TXN_MARKERS, 1, fenced), 1, spec) == (
        Errors.TRANSACTION_COORDINATOR_FENCED
    )
    other = write_txn_markers_response(1, {(999, FOO1): Errors.NONE})  # not our producer
    assert decode_abort(encode_response(ApiKey.WRITE_TXN_MARKERS, 1, other), 1, spec) == (
        Errors.UNKNOWN_SERVER_ERROR
    )


def test_abort_spec_prints_as_kafka_does() -> None:
    assert str(AbortTransactionSpec(FOO1, 1, 2, 3)) == (
        "AbortTransactionSpec(topicPartition=foo-1, producerId=1, producerEpoch=2, "
        "coordinatorEpoch=3)"
    )
