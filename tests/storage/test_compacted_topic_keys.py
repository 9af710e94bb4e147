"""A compacted topic refuses keyless records (Kafka's ``LogValidator.validateKey``, mirrored from
``LogValidatorTest.testCompactedTopicWithoutKeys`` / ``UnifiedLogTest``'s keyless-append case):
INVALID_RECORD for the whole append, each keyless record named by its index in the batch
(KIP-467 ``record_errors``), the message in Kafka's ``processRecordErrors`` words."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.storage.log_config import CleanupPolicy, LogConfig
from pykraft.storage.log_validator import (
    AppendOrigin,
    RecordError,
    RecordValidationError,
    validate_leader_batches,
)
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.records import (
    ControlRecordType,
    SimpleRecord,
    build_batch,
    build_control_batch,
)

BIG = 1 << 20
KEYLESS = "Compacted topic cannot accept message without key in topic partition pets-0."


def batch(keys: list[bytes | None], compression: CompressionType = CompressionType.NONE) -> bytes:
    return build_batch([SimpleRecord(b"v", key) for key in keys], compression=compression)


def check(data: bytes, compacted: str | None) -> None:
    validate_leader_batches(
        data,
        max_message_bytes=BIG,
        segment_bytes=BIG,
        origin=AppendOrigin.CLIENT,
        compacted_topic_partition=compacted,
    )


@pytest.mark.parametrize("compression", [CompressionType.NONE, CompressionType.GZIP])
def test_each_keyless_record_is_named_by_its_index_in_the_batch(
    compression: CompressionType,
) -> None:
    with pytest.raises(RecordValidationError) as refused:
        check(batch([b"a", None, b"c", None, None, None], compression), "pets-0")
    assert refused.value.record_errors == (
        RecordError(1, KEYLESS),
        RecordError(3, KEYLESS),
        RecordError(4, KEYLESS),
        RecordError(5, KEYLESS),
    )
    assert str(refused.value) == (
        "One or more records have been rejected due to 4 record errors in total, and only "
        f"showing the first three errors at most: [RecordError(batchIndex=1, message='{KEYLESS}'), "
        f"RecordError(batchIndex=3, message='{KEYLESS}'), "
        f"RecordError(batchIndex=4, message='{KEYLESS}')]"
    )


def test_keyed_records_and_uncompacted_topics_are_accepted() -> None:
    check(batch([b"a", b"", b"c"]), "pets-0")  # an empty key is a key
    check(batch([None, None]), None)  # cleanup.policy=delete: keys are optional


def test_transaction_markers_are_not_records_of_the_topic() -> None:
    marker = build_control_batch(
        ControlRecordType.COMMIT, producer_id=7, producer_epoch=0, timestamp=0
    )
    validate_leader_batches(
        marker,
        max_message_bytes=BIG,
        segment_bytes=BIG,
        origin=AppendOrigin.COORDINATOR,
        compacted_topic_partition="pets-0",
    )


@pytest.mark.parametrize(
    ("policy", "refused"),
    [
        (frozenset({CleanupPolicy.COMPACT}), True),
        (frozenset({CleanupPolicy.COMPACT, CleanupPolicy.DELETE}), True),
        (frozenset({CleanupPolicy.DELETE}), False),
    ],
)
def test_the_log_passes_its_cleanup_policy(
    tmp_path: Path, policy: frozenset[CleanupPolicy], refused: bool
) -> None:
    log = PartitionLog.open(tmp_path / "pets-0", LogConfig(cleanup_policy=policy), now_ms=0)
    try:
        if refused:
            with pytest.raises(RecordValidationError, match="pets-0"):
                log.append_as_leader(bytearray(batch([None])), 0, now_ms=0)
            assert log.log_end_offset == 0  # nothing written
        else:
            log.append_as_leader(bytearray(batch([None])), 0, now_ms=0)
            assert log.log_end_offset == 1
    finally:
        log.close()
