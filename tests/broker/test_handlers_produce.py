"""The Produce handler: kafka-python-encoded requests in, kafka-python-decoded responses out,
appends on a real log (Kafka's KafkaApis.handleProduceRequest / ProduceRequest.validateRecords)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import ProduceRequest, ProduceResponse
from kafka.record.legacy_records import LegacyRecordBatchBuilder

from pykraft.broker.handlers.produce import (
    ProduceFailedWithoutAcks,
    produce_handler,
    validate_records,
)
from pykraft.metadata.records import PartitionChangeRecord, TopicRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import SimpleRecord, build_batch
from tests.broker.handler_support import by_topic
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    OTHER,
    PETS0,
    PETS_ID,
    Cluster,
    at,
    batch,
    call,
    call_async,
    encode,
    partition_record,
    pets_led_here,
    services,
)

_Topic = ProduceRequest.TopicProduceData
_Partition = _Topic.PartitionProduceData


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path, LogConfig(max_message_bytes=1000))
    try:
        harness.start(
            *pets_led_here(replicas=(LOCAL, OTHER)),
            partition_record(PETS_ID, 1, (LOCAL,)),
            TopicRecord(name="birds", topic_id=BIRDS_ID),
            partition_record(BIRDS_ID, 0, (OTHER, LOCAL), leader_epoch=6),
        )
        yield harness
    finally:
        harness.close()


def produce(
    cluster: Cluster,
    data: dict[tuple[str, int], bytes | None],
    *,
    version: int = 9,
    acks: int = 1,
) -> Any:
    topics = by_topic(
        (topic, _Partition(index=index, records=records))
        for (topic, index), records in data.items()
    )
    request = ProduceRequest(
        version=version,
        transactional_id=None,
        acks=acks,
        timeout_ms=1000,
        topic_data=[_Topic(name=name, partition_data=parts) for name, parts in topics.items()],
    )
    body = call(
        produce_handler(services(cluster)), ApiKey.PRODUCE, version, encode(request, version)
    )
    return None if body is None else ProduceResponse.decode(body, version=version)


def outcome(response: Any) -> dict[tuple[str, int], tuple[int, int]]:
    """(topic, partition) -> (error code, base offset)."""
    return {
        (topic.name, p.index): (p.error_code, p.base_offset)
        for topic in response.responses
        for p in topic.partition_responses
    }


@pytest.mark.parametrize("version", range(3, 11))
def test_every_served_version_appends_and_answers(cluster: Cluster, version: int) -> None:
    first = produce(cluster, {("pets", 0): bytes(batch(b"a", b"b"))}, version=version)
    second = produce(cluster, {("pets", 0): bytes(batch(b"c"))}, version=version)
    assert outcome(first) == {("pets", 0): (Errors.NONE, 0)}
    assert outcome(second) == {("pets", 0): (Errors.NONE, 2)}
    partition = second.responses[0].partition_responses[0]
    if version >= 5:
        assert partition.log_start_offset == 0
    if version >= 2:
        assert partition.log_append_time_ms == -1  # CreateTime topics
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 3  # type: ignore[union-attr]


def test_partitions_are_answered_per_topic_in_request_order(cluster: Cluster) -> None:
    response = produce(
        cluster,
        {
            ("pets", 1): bytes(batch(b"a")),
            ("pets", 0): bytes(batch(b"b")),
            ("birds", 0): bytes(batch(b"c")),
            ("nope", 0): bytes(batch(b"d")),
        },
    )
    assert [(t.name, [p.index for p in t.partition_responses]) for t in response.responses] == [
        ("pets", [1, 0]),
        ("birds", [0]),
        ("nope", [0]),
    ]
    assert outcome(response) == {
        ("pets", 1): (Errors.NONE, 0),
        ("pets", 0): (Errors.NONE, 0),
        ("birds", 0): (Errors.NOT_LEADER_OR_FOLLOWER, -1),
        ("nope", 0): (Errors.UNKNOWN_TOPIC_OR_PARTITION, -1),
    }


def test_not_leader_carries_the_current_leader_and_its_endpoint(cluster: Cluster) -> None:
    # KIP-951 (Produce v10): CurrentLeader per partition, NodeEndpoints per response.
    response = produce(cluster, {("birds", 0): bytes(batch(b"a"))}, version=10)
    partition = response.responses[0].partition_responses[0]
    assert partition.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (partition.current_leader.leader_id, partition.current_leader.leader_epoch) == (
        OTHER,
        6,
    )
    assert [(n.node_id, n.host, n.port, n.rack) for n in response.node_endpoints] == [
        (OTHER, "broker2.local", 9092, "rack-b"),
    ]


def legacy_message_set() -> bytes:
    builder = LegacyRecordBatchBuilder(magic=1, compression_type=0, batch_size=1000)
    builder.append(0, timestamp=1, key=None, value=b"v1 message")
    return bytes(builder.build())


def corrupt(data: bytes) -> bytes:
    return data[:-1] + bytes([data[-1] ^ 0xFF])


@pytest.mark.parametrize(
    ("records", "expected"),
    [
        (None, Errors.INVALID_RECORD),  # "must have at least one record batch"
        (b"", Errors.INVALID_RECORD),
        (legacy_message_set(), Errors.INVALID_RECORD),  # magic 1
        (bytes(batch(b"a")) + bytes(batch(b"b")), Errors.INVALID_RECORD),  # two batches
        (b"\x00" * 10, Errors.CORRUPT_MESSAGE),  # no room for a header
        (bytes(batch(b"a"))[:-3], Errors.CORRUPT_MESSAGE),  # torn
        (corrupt(bytes(batch(b"a"))), Errors.CORRUPT_MESSAGE),  # CRC
        (bytes(batch(b"x" * 2000)), Errors.MESSAGE_TOO_LARGE),  # max.message.bytes 1000
    ],
)
def test_record_validation(cluster: Cluster, records: bytes | None, expected: Errors) -> None:
    response = produce(cluster, {("pets", 0): records}, version=9)
    partition = response.responses[0].partition_responses[0]
    assert (partition.error_code, partition.base_offset) == (expected, -1)
    assert partition.error_message  # v8+: a sentence saying why
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 0  # type: ignore[union-attr]


def test_zstd_needs_produce_v7(cluster: Cluster) -> None:
    # KIP-110: zstd batches in Produce v3-v6 are UNSUPPORTED_COMPRESSION_TYPE.
    data = build_batch([SimpleRecord(value=b"z" * 50)], compression=CompressionType.ZSTD)
    assert outcome(produce(cluster, {("pets", 0): data}, version=6)) == {
        ("pets", 0): (Errors.UNSUPPORTED_COMPRESSION_TYPE, -1)
    }
    assert outcome(produce(cluster, {("pets", 0): data}, version=7)) == {
        ("pets", 0): (Errors.NONE, 0)
    }


def test_invalid_acks(cluster: Cluster) -> None:
    response = produce(cluster, {("pets", 0): bytes(batch(b"a"))}, acks=2)
    assert outcome(response) == {("pets", 0): (Errors.INVALID_REQUIRED_ACKS, -1)}


def test_acks_all_with_one_replica_is_answered_after_the_local_append(cluster: Cluster) -> None:
    response = produce(cluster, {("pets", 1): bytes(batch(b"a"))}, acks=-1)
    assert outcome(response) == {("pets", 1): (Errors.NONE, 0)}


def test_acks_all_is_answered_once_the_follower_has_the_batch(cluster: Cluster) -> None:
    # Kafka DelayedProduce: pets-0's ISR is (LOCAL, OTHER); the answer waits for OTHER.
    async def scenario() -> Any:
        request = ProduceRequest(
            version=9,
            transactional_id=None,
            acks=-1,
            timeout_ms=30_000,
            topic_data=[
                _Topic(
                    name="pets", partition_data=[_Partition(index=0, records=bytes(batch(b"a")))]
                )
            ],
        )
        handler = produce_handler(services(cluster))
        answer = asyncio.ensure_future(call_async(handler, ApiKey.PRODUCE, 9, encode(request, 9)))
        for _ in range(3):
            await asyncio.sleep(0)  # yields: the append runs, then the produce waits
        assert not answer.done()
        assert cluster.fetch(at(PETS0, 0), replica_id=OTHER)[0].size_in_bytes > 0
        await asyncio.sleep(0)
        assert not answer.done()  # OTHER fetched the batch but has not said it has it
        cluster.fetch(at(PETS0, 1), replica_id=OTHER)
        body = await answer
        return ProduceResponse.decode(body, version=9)

    assert outcome(asyncio.run(scenario())) == {("pets", 0): (Errors.NONE, 0)}


def test_acks_zero_sends_no_response(cluster: Cluster) -> None:
    assert produce(cluster, {("pets", 0): bytes(batch(b"a"))}, acks=0) is None
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 1  # type: ignore[union-attr]


def test_a_failed_acks_zero_produce_closes_the_connection(cluster: Cluster) -> None:
    # Kafka KafkaApis.sendResponseCallback: acks=0 + an error -> close the connection.
    with pytest.raises(ProduceFailedWithoutAcks, match="birds-0: NOT_LEADER_OR_FOLLOWER"):
        produce(cluster, {("birds", 0): bytes(batch(b"a"))}, acks=0)
    assert issubclass(ProduceFailedWithoutAcks, ProtocolError)


def test_idempotent_retry_gets_the_original_offset(cluster: Cluster) -> None:
    produce(cluster, {("pets", 0): bytes(batch(b"first"))})
    data = bytes(batch(b"a", producer_id=42, producer_epoch=0, base_sequence=0))
    assert outcome(produce(cluster, {("pets", 0): data})) == {("pets", 0): (Errors.NONE, 1)}
    assert outcome(produce(cluster, {("pets", 0): data})) == {("pets", 0): (Errors.NONE, 1)}
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 2  # type: ignore[union-attr]


def test_leadership_moves_between_requests(cluster: Cluster) -> None:
    assert outcome(produce(cluster, {("pets", 0): bytes(batch(b"a"))}))[("pets", 0)][0] == 0
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=OTHER))
    assert outcome(produce(cluster, {("pets", 0): bytes(batch(b"b"))})) == {
        ("pets", 0): (Errors.NOT_LEADER_OR_FOLLOWER, -1)
    }


@pytest.mark.parametrize(
    ("records", "version", "expected"),
    [
        (bytes(batch(b"a")), 3, None),
        (None, 3, Errors.INVALID_RECORD),
        (legacy_message_set(), 3, Errors.INVALID_RECORD),
        (bytes(batch(b"a")) + b"\x00", 3, Errors.INVALID_RECORD),  # trailing bytes
        (bytes(batch(b"a"))[:12], 3, Errors.CORRUPT_MESSAGE),
    ],
)
def test_validate_records_table(
    records: bytes | None, version: int, expected: Errors | None
) -> None:
    problem = validate_records(None if records is None else memoryview(records), version)
    assert (None if problem is None else problem[0]) == expected


def test_legacy_versions_get_unsupported_version_per_partition(cluster: Cluster) -> None:
    # KafkaApis answers v0-v2 before handlers run; the handler agrees if it ever sees one.
    response = produce(cluster, {("pets", 0): bytes(batch(b"a"))}, version=2)
    assert outcome(response) == {("pets", 0): (Errors.UNSUPPORTED_VERSION, -1)}
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 0  # type: ignore[union-attr]


def test_keyless_records_to_a_compacted_topic_get_record_errors(tmp_path: Path) -> None:
    # Kafka's LogValidator.validateKey + KIP-467: INVALID_RECORD, each keyless record named by
    # its index in the batch (ProduceResponse v8+ record_errors).
    compacted = Cluster(tmp_path, LogConfig(cleanup_policy=frozenset({CleanupPolicy.COMPACT})))
    try:
        compacted.start(*pets_led_here(replicas=(LOCAL, OTHER)))
        records = [SimpleRecord(b"v", key) for key in (b"k", None, b"k2", None)]
        response = produce(compacted, {("pets", 0): build_batch(records)}, version=9)
        partition = response.responses[0].partition_responses[0]
        assert (partition.error_code, partition.base_offset) == (Errors.INVALID_RECORD, -1)
        message = "Compacted topic cannot accept message without key in topic partition pets-0."
        assert [(e.batch_index, e.batch_index_error_message) for e in partition.record_errors] == [
            (1, message),
            (3, message),
        ]
        assert partition.error_message.startswith(
            "One or more records have been rejected due to 2 record errors in total"
        )
        keyed = [SimpleRecord(b"v", b"k")]
        accepted = produce(compacted, {("pets", 0): build_batch(keyed)}, version=9)
        assert outcome(accepted) == {("pets", 0): (Errors.NONE, 0)}
    finally:
        compacted.close()
