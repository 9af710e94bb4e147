"""The ``__transaction_state`` codec against bytes checked by hand from Kafka's schemas
(``TransactionLogKey.json``, ``TransactionLogValue.json``), after Kafka's
``TransactionLogTest`` (``shouldReadWriteMessages``,
``testSerializeTransactionLogValueToHighestNonFlexibleVersion``,
``testDeserializeHighestSupportedTransactionLogValue``,
``testReadTxnRecordKeyCanReadUnknownMessage``)."""

from __future__ import annotations

import pytest

from pykraft.coordinator.transaction.config import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    partition_for,
    transaction_topic_configs,
)
from pykraft.coordinator.transaction.metadata import TxnTransitMetadata
from pykraft.coordinator.transaction.records import (
    TransactionLogError,
    TransactionLogValue,
    UnknownKey,
    decode_key,
    decode_value,
    encode_value,
    transaction_log_key,
    transaction_log_value,
)
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.storage.topic_partition import TopicPartition

LAST_UPDATE = "0000018bcfe5687b"  # 1_700_000_000_123
START = "0000018bcfe56800"  # 1_700_000_000_000
ONGOING_V0 = bytes.fromhex(
    "0000"  # value version 0
    "00000000000003e8"  # producer id 1000
    "0002"  # producer epoch 2
    "0000ea60"  # transaction timeout 60000 ms
    "01"  # status: Ongoing
    "00000001"  # one topic
    "0004"
    + b"pets".hex()
    + "00000002"
    + "00000000"
    + "00000001"  # pets: [0, 1]
    + LAST_UPDATE
    + START
)
ONGOING_V1 = bytes.fromhex(
    "0001"  # value version 1 (flexible)
    "00000000000003e8"
    "0002"
    "0000ea60"
    "01"
    "02"  # compact array: one topic (1 + 1)
    "05"
    + b"pets".hex()
    + "03"
    + "00000000"
    + "00000001"
    + "00"  # pets: [0, 1], no tags
    + LAST_UPDATE
    + START
    + "02"  # two tagged fields
    "0008"
    "00000000000026a5"  # tag 0 PreviousProducerId: 9893
    "0202"
    "0001"  # tag 2 ClientTransactionVersion: 1
)


def ongoing(**changes: object) -> TransactionLogValue:
    fields: dict[str, object] = {
        "producer_id": 1000,
        "producer_epoch": 2,
        "transaction_timeout_ms": 60_000,
        "transaction_status": TransactionState.ONGOING,
        "transaction_partitions": (("pets", (0, 1)),),
        "transaction_last_update_timestamp_ms": 1_700_000_000_123,
        "transaction_start_timestamp_ms": 1_700_000_000_000,
    }
    fields.update(changes)
    return TransactionLogValue(**fields)  # type: ignore[arg-type]


def transit(state: TransactionState, partitions: frozenset[TopicPartition]) -> TxnTransitMetadata:
    return TxnTransitMetadata(
        producer_id=1000,
        last_producer_id=-1,
        producer_epoch=2,
        last_producer_epoch=-1,
        txn_timeout_ms=60_000,
        txn_state=state,
        topic_partitions=partitions,
        txn_start_timestamp_ms=1_700_000_000_000,
        txn_last_update_timestamp_ms=1_700_000_000_123,
    )


# ------------------------------------------------------------------ keys


def test_key_is_record_type_zero_then_the_transactional_id() -> None:
    assert transaction_log_key("txn") == bytes.fromhex("00000003" + b"txn".hex())
    assert decode_key(transaction_log_key("txn")) == "txn"
    assert decode_key(transaction_log_key("zé")) == "zé"  # UTF-8, length in bytes


def test_a_key_of_another_record_type_is_unknown_not_an_error() -> None:
    # testReadTxnRecordKeyCanReadUnknownMessage: skipped by the loader, as Kafka does.
    assert decode_key(bytes.fromhex("00020001" + b"g".hex())) == UnknownKey(2)


@pytest.mark.parametrize(
    "data",
    [
        b"",
        b"\x00",
        bytes.fromhex("00000005" + b"ab".hex()),
        bytes.fromhex("0000ffff"),
        bytes.fromhex("00000001" + b"a".hex() + "00"),
        bytes.fromhex("00000001ff"),
    ],
    ids=["empty", "half a version", "short string", "null id", "trailing byte", "not utf-8"],
)
def test_malformed_keys_raise(data: bytes) -> None:
    with pytest.raises(TransactionLogError):
        decode_key(data)


# ------------------------------------------------------------------ values


def test_v0_value_bytes() -> None:
    assert encode_value(ongoing()) == ONGOING_V0
    assert decode_value(ONGOING_V0) == ongoing()


def test_a_transition_is_written_as_v0_grouped_by_topic_in_order() -> None:
    # shouldReadWriteMessages: partitions of several topics, grouped per topic.
    partitions = frozenset(
        {TopicPartition("pets", 1), TopicPartition("ants", 3), TopicPartition("pets", 0)}
    )
    value = decode_value(transaction_log_value(transit(TransactionState.ONGOING, partitions)))
    assert value.transaction_partitions == (("ants", (3,)), ("pets", (0, 1)))
    assert value.topic_partitions == partitions
    expected = ONGOING_V0.replace(
        bytes.fromhex("000000010004"),
        bytes.fromhex("000000020004" + b"ants".hex()) + bytes.fromhex("00000001000000030004"),
        1,
    )
    assert transaction_log_value(transit(TransactionState.ONGOING, partitions)) == expected


def test_an_empty_transition_writes_a_null_partition_array() -> None:
    data = transaction_log_value(transit(TransactionState.EMPTY, frozenset()))
    assert data[17:21] == bytes.fromhex("ffffffff")  # after version, id, epoch, timeout, status
    assert decode_value(data).transaction_partitions is None
    assert decode_value(data).transaction_status is TransactionState.EMPTY


def test_every_state_round_trips_with_its_status_byte() -> None:
    for status_id, state in enumerate(TransactionState):
        value = ongoing(transaction_status=state)
        data = encode_value(value)
        assert data[16] == status_id
        assert decode_value(data) == value


def test_v1_flexible_value_bytes_with_tagged_fields() -> None:
    # testDeserializeHighestSupportedTransactionLogValue: Kafka 4's flexible value.
    value = ongoing(previous_producer_id=9893, client_transaction_version=1)
    assert decode_value(ONGOING_V1) == value
    assert encode_value(value, version=1) == ONGOING_V1


def test_v1_unknown_tags_are_skipped_and_null_partitions_read() -> None:
    data = bytes.fromhex(
        "0001"
        "00000000000003e8"
        "0002"
        "0000ea60"
        "00"
        "00" + LAST_UPDATE + "ffffffffffffffff" + "01"  # Empty, null partitions
        "07"
        "03"
        "aabbcc"  # tag 7, 3 bytes
    )
    value = decode_value(data)
    assert value.transaction_partitions is None
    assert value.transaction_start_timestamp_ms == -1
    assert (value.previous_producer_id, value.next_producer_id) == (-1, -1)
    assert value.client_transaction_version == 0


@pytest.mark.parametrize(
    ("data", "reason"),
    [
        (ONGOING_V0[:-1], "needs 8 bytes"),
        (ONGOING_V0 + b"\x00", "bytes left"),
        (b"\x00\x02" + ONGOING_V0[2:], "version 2 is not readable"),
        (b"\xff\xff" + ONGOING_V0[2:], "version -1 is not readable"),
        (ONGOING_V0[:16] + b"\x08" + ONGOING_V0[17:], "unknown transaction state id 8"),
        (ONGOING_V0[:17] + bytes.fromhex("fffffffe") + ONGOING_V0[21:], "array of -2"),
        (ONGOING_V0[:17] + bytes.fromhex("7fffffff") + ONGOING_V0[21:], "array of"),
        (ONGOING_V1[:-15] + b"\x01", "needs"),
        (ONGOING_V1[:17] + b"\xff" * 6 + ONGOING_V1[18:], "varint longer"),
        (ONGOING_V1[:-15] + bytes.fromhex("020202000102020001"), "appears twice"),
        (ONGOING_V1[:-15] + bytes.fromhex("01020100"), "has 1 bytes, not 2"),
    ],
    ids=[
        "truncated",
        "trailing",
        "future version",
        "negative version",
        "unknown state",
        "negative count",
        "huge count",
        "truncated tags",
        "long varint",
        "duplicate tag",
        "short tag",
    ],
)
def test_malformed_values_raise(data: bytes, reason: str) -> None:
    with pytest.raises(TransactionLogError, match=reason):
        decode_value(data)


def test_a_topic_name_longer_than_an_int16_is_refused() -> None:
    with pytest.raises(TransactionLogError):
        encode_value(ongoing(transaction_partitions=(("t" * 40_000, (0,)),)))


# ------------------------------------------------------------------ the topic


def test_partition_for_is_kafkas_abs_hashcode_mod_partitions() -> None:
    # Java: "txn".hashCode() == 115_306 (116 * 31^2 + 120 * 31 + 110);
    # "polygenelubricants".hashCode() == Integer.MIN_VALUE, which Utils.abs maps to 0.
    assert partition_for("txn", 50) == 6
    assert partition_for("polygenelubricants", 50) == 0
    assert partition_for("", 50) == 0


def test_topic_configs_and_defaults_are_kafkas() -> None:
    config = TransactionConfig()
    assert TRANSACTION_STATE_TOPIC == "__transaction_state"
    assert config.transaction_state_log_num_partitions == 50
    assert config.transaction_state_log_replication_factor == 3
    assert config.transaction_state_log_min_isr == 2
    assert config.transaction_max_timeout_ms == 900_000
    assert config.transactional_id_expiration_ms == 604_800_000
    assert transaction_topic_configs(config) == {
        "unclean.leader.election.enable": "false",
        "compression.type": "uncompressed",
        "cleanup.policy": "compact",
        "min.insync.replicas": "2",
        "segment.bytes": "104857600",
    }
    with pytest.raises(ValueError):
        TransactionConfig(transaction_state_log_num_partitions=0)
