"""apply_entry: the pure replicated state machine behind MetadataRaft (DESIGN.md §3.1 rules)."""

import pytest

from pykraft.metadata.codec import encode_record
from pykraft.metadata.compact_codec import encode_records
from pykraft.metadata.records import (
    NoOpRecord,
    PartitionRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.quorum.raft_batch import CompactBatch, ProposedBatch, encode_batch
from pykraft.quorum.raft_state import ApplyStatus, MetadataState, apply_entry

TOPIC_ID = uuid_to_kafka_string(bytes(range(1, 17)))


def blob(*records, expected: int, epoch: int = 2) -> bytes:
    """An entry as controllers write it (format 2, compact rows)."""
    return encode_batch(
        CompactBatch(
            expected_last_offset=expected,
            epoch=epoch,
            append_time_ms=123,
            record_count=len(records),
            payload=encode_records(records),
        )
    )


def json_lines_blob(*records, expected: int, epoch: int = 2) -> bytes:
    """An entry as controllers wrote it before format 2 (one JSON line per record)."""
    return encode_batch(
        ProposedBatch(
            expected_last_offset=expected,
            epoch=epoch,
            append_time_ms=123,
            records=tuple(encode_record(r).encode() for r in records),
        )
    )


def compact_blob(payload: bytes, count: int = 1) -> bytes:
    return encode_batch(
        CompactBatch(
            expected_last_offset=-1, epoch=1, append_time_ms=0, record_count=count, payload=payload
        )
    )


def topic_records(name: str = "pets", partitions: int = 2):
    return [TopicRecord(name=name, topic_id=TOPIC_ID)] + [
        PartitionRecord(partition_id=p, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1)
        for p in range(partitions)
    ]


def test_offsets_are_counted_per_record_not_taken_from_the_raft_index() -> None:
    first = apply_entry(MetadataState(), 2, blob(*topic_records(), expected=-1))
    assert first.result.status is ApplyStatus.APPLIED
    assert (first.result.base_offset, first.result.last_offset) == (0, 2)
    # Raft index 9: pysyncobj no-ops and rejected entries leave gaps in Raft indexes.
    second = apply_entry(first.state, 9, blob(NoOpRecord(), expected=2, epoch=3))
    assert (second.result.base_offset, second.result.last_offset) == (3, 3)
    assert second.state.next_offset == 4
    assert second.state.last_raft_index == 9
    assert (second.state.image.offset, second.state.image.epoch) == (3, 3)
    assert second.batch is not None and second.batch.epoch == 3


def test_the_image_holds_the_records() -> None:
    applied = apply_entry(MetadataState(), 2, blob(*topic_records(partitions=3), expected=-1))
    topic = applied.state.image.topics.by_name["pets"]
    assert sorted(topic.partitions) == [0, 1, 2]
    assert applied.batch is not None and applied.batch.record_count == 4
    # The window gets the entry's own payload: nothing re-encoded, nothing decoded kept.
    assert applied.batch.records == tuple(
        encode_record(r).encode() for r in topic_records(partitions=3)
    )


def test_reapplying_an_entry_after_a_restart_is_a_no_op() -> None:
    entry = blob(*topic_records(), expected=-1)
    first = apply_entry(MetadataState(), 5, entry)
    again = apply_entry(first.state, 5, entry)
    older = apply_entry(first.state, 4, blob(NoOpRecord(), expected=2))
    assert again.result.status is ApplyStatus.DUPLICATE
    assert older.result.status is ApplyStatus.DUPLICATE
    assert again.state == first.state == older.state
    assert again.batch is None


def test_a_stale_proposal_is_rejected_with_the_current_end() -> None:
    state = apply_entry(MetadataState(), 2, blob(NoOpRecord(), expected=-1)).state
    stale = apply_entry(state, 3, blob(NoOpRecord(), expected=-1))
    assert stale.result.status is ApplyStatus.STALE
    assert stale.result.log_last_offset == 0
    assert "expected the log to end at offset -1, it ends at 0" in stale.result.message
    assert stale.state.next_offset == 1
    assert stale.state.last_raft_index == 3  # the entry has had its one outcome


def test_garbage_is_rejected_never_raised() -> None:
    for garbage in (b"", b"\x80\x04K\x01.", "text", None, 42, blob(NoOpRecord(), expected=-1)[:-2]):
        applied = apply_entry(MetadataState(), 2, garbage)
        assert applied.result.status is ApplyStatus.INVALID, garbage
        assert applied.state == MetadataState(last_raft_index=2)


def test_an_undecodable_json_line_rejects_the_whole_batch() -> None:
    entry = encode_batch(
        ProposedBatch(
            expected_last_offset=-1,
            epoch=1,
            append_time_ms=0,
            records=(encode_record(NoOpRecord()).encode(), b'{"type":"Nope","version":0}'),
        )
    )
    applied = apply_entry(MetadataState(), 2, entry)
    assert applied.result.status is ApplyStatus.INVALID
    assert "Nope" in applied.result.message
    assert applied.state.next_offset == 0


def test_a_record_that_does_not_replay_rejects_the_whole_batch() -> None:
    # A partition of a topic that does not exist: nothing of the batch may be kept.
    orphan = PartitionRecord(partition_id=0, topic_id=TOPIC_ID, replicas=(1,), isr=(1,), leader=1)
    applied = apply_entry(MetadataState(), 2, blob(NoOpRecord(), orphan, expected=-1))
    assert applied.result.status is ApplyStatus.INVALID
    assert applied.state.next_offset == 0
    assert applied.state.image.offset == -1


def test_apply_is_deterministic() -> None:
    entries = [blob(*topic_records(), expected=-1), blob(NoOpRecord(), expected=2)]
    runs = []
    for _ in range(2):
        state = MetadataState()
        for index, entry in enumerate(entries, start=2):
            state = apply_entry(state, index, entry).state
        runs.append(state)
    assert runs[0] == runs[1]


def test_the_proposers_decoded_records_give_the_same_state() -> None:
    records = tuple(topic_records())
    entry = blob(*records, expected=-1)
    decoded = apply_entry(MetadataState(), 2, entry)
    hinted = apply_entry(MetadataState(), 2, entry, decoded=records)
    assert hinted.state == decoded.state
    assert hinted.batch is not None and decoded.batch is not None
    assert hinted.batch == decoded.batch


def test_a_record_that_is_not_exactly_one_json_value_is_rejected() -> None:
    noop = encode_record(NoOpRecord()).encode()
    for raw in (noop + b"," + noop, b"", b"[", noop + b" garbage"):
        entry = encode_batch(
            ProposedBatch(expected_last_offset=-1, epoch=1, append_time_ms=0, records=(noop, raw))
        )
        applied = apply_entry(MetadataState(), 2, entry)
        assert applied.result.status is ApplyStatus.INVALID, raw


def test_entries_written_before_the_compact_format_replay_to_the_same_state() -> None:
    # A journal from before format 2 is replayed after an upgrade: same offsets, same image.
    entries = [(topic_records(), -1), ([NoOpRecord()], 2)]
    states = []
    for make in (blob, json_lines_blob):
        state = MetadataState()
        for index, (records, expected) in enumerate(entries, start=2):
            applied = apply_entry(state, index, make(*records, expected=expected))
            assert applied.result.status is ApplyStatus.APPLIED
            state = applied.state
        states.append((state, applied.batch))
    assert states[0] == states[1]


PARTITION_ROW = f'[3,0,0,"{TOPIC_ID}",[1],[1],[],[],1,0,0,0]'
PARTITION = f"[{PARTITION_ROW}]"

# (payload, record count, a fragment of the INVALID message): malformed compact entries that a
# buggy or hostile proposer could put in the log; each is refused by apply, never raised.
MALFORMED_COMPACT = [
    (b"not json", 1, "not valid JSON"),
    (b"\xff\xfe", 1, "not valid JSON"),
    (b"[" * 100_000 + b"]" * 100_000, 1, "not valid JSON"),
    (b'{"type":"NoOpRecord"}', 1, "must be a JSON array"),
    (b"[[20,0]]", 2, "expected 2 records, found 1"),
    (b"[[20,0],[20,0]]", 1, "expected 1 records, found 2"),
    (b"[20]", 1, "record 0: a record is a [type, version, ...] array"),
    (b"[[20]]", 1, "record 0: a record is a [type, version, ...] array"),
    (b"[[20,0],[99,0]]", 2, "record 1: unknown metadata record type id 99"),
    (b"[[true,0]]", 1, "unknown metadata record type id True"),
    (b"[[3.0,0]]", 1, "unknown metadata record type id 3.0"),
    (b"[[20,1]]", 1, "NoOpRecord version 1 is not supported"),
    (b"[[20,0,1]]", 1, "NoOpRecord has 0 fields, got 1 values"),
    (b"[[3,0,0]]", 1, "PartitionRecord has 12 fields, got 1 values"),
    (
        PARTITION.replace(",0,0,0]", ",0,0,0,[],[],0]").encode(),
        1,
        "PartitionRecord has 12 fields, got 13 values",
    ),
    (
        PARTITION.replace("[1],[1]", '[1],["1"]').encode(),
        1,
        "PartitionRecord field 'isr' must be an integer (int32)",
    ),
    (
        PARTITION.replace("[1],[1]", "[1],null").encode(),
        1,
        "PartitionRecord field 'isr' must be a list, got None",
    ),
    (
        PARTITION.replace("[3,0,0,", "[3,0,2147483648,").encode(),
        1,
        "PartitionRecord field 'partitionId' must fit in int32",
    ),
    (
        PARTITION.replace(TOPIC_ID, "not-a-uuid").encode(),
        1,
        "PartitionRecord field 'topicId' must be a Kafka uuid string",
    ),
    (
        PARTITION.replace("1,0,0,0]", "1,7,0,0]").encode(),
        1,
        "field 'leaderRecoveryState' must be one of [0, 1]",
    ),
    (
        b'[[0,0,1,"i",1,[["PLAINTEXT","h"]],[],null,true,false]]',
        1,
        "field 'endPoints' must hold rows of 4 values",
    ),
    (
        b'[[0,0,1,"i",1,[["PLAINTEXT","h",70000,0]],[],null,true,false]]',
        1,
        "field 'endPoints' must fit in uint16",
    ),
    (b'[[0,0,1,"i",1,[],[],null,1,false]]', 1, "field 'fenced' must be true or false"),
]


@pytest.mark.parametrize(("payload", "count", "fragment"), MALFORMED_COMPACT)
def test_a_malformed_compact_entry_is_invalid_never_raised(
    payload: bytes, count: int, fragment: str
) -> None:
    applied = apply_entry(MetadataState(), 2, compact_blob(payload, count))
    assert applied.result.status is ApplyStatus.INVALID
    assert fragment in applied.result.message
    assert applied.state == MetadataState(last_raft_index=2)
    assert applied.batch is None


def test_a_well_formed_compact_row_applies() -> None:
    # The control for MALFORMED_COMPACT: the unmodified rows are accepted.
    topic = f'[2,0,"pets","{TOPIC_ID}"]'
    payload = f"[{topic},{PARTITION_ROW}]".encode()
    applied = apply_entry(MetadataState(), 2, compact_blob(payload, 2))
    assert applied.result.status is ApplyStatus.APPLIED
    assert applied.state.image.topics.by_name["pets"].partitions[0].leader == 1
