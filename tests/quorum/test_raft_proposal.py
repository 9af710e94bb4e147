"""proposal_blob: what the active controller hands to Raft for one write (DESIGN.md §3.1)."""

import pytest

from pykraft.metadata.records import (
    MetadataRecord,
    PartitionRecord,
    ProducerIdsRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.quorum.node import ServiceError, proposal_blob
from pykraft.quorum.raft_batch import CompactBatch, decode_batch
from pykraft.quorum.raft_state import ApplyStatus, MetadataState, apply_entry

TOPIC_ID = uuid_to_kafka_string(bytes(range(1, 17)))


def test_a_proposal_is_a_compact_batch_that_applies() -> None:
    records: list[MetadataRecord] = [
        TopicRecord(name="pets", topic_id=TOPIC_ID),
        PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1),
    ]
    blob = proposal_blob(-1, 4, 1_700_000_000_000, records)
    batch = decode_batch(blob)
    assert isinstance(batch, CompactBatch)
    assert (batch.expected_last_offset, batch.epoch, batch.append_time_ms, batch.record_count) == (
        -1,
        4,
        1_700_000_000_000,
        2,
    )
    applied = apply_entry(MetadataState(), 2, blob)
    assert applied.result.status is ApplyStatus.APPLIED
    assert (applied.state.image.offset, applied.state.image.epoch) == (1, 4)


def test_a_record_outside_its_kafka_type_is_refused_before_the_log() -> None:
    # Formerly proposed, then rejected at apply as INVALID (a 500); now a 400 naming the field.
    record = ProducerIdsRecord(broker_id=2**40, broker_epoch=1, next_producer_id=1000)
    with pytest.raises(ServiceError) as error:
        proposal_blob(5, 1, 0, [record])
    assert (error.value.status, error.value.code) == (400, "INVALID_REQUEST")
    assert "ProducerIdsRecord field 'brokerId' must fit in int32" in error.value.message
