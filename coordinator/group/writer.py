"""Appends what the group coordinator writes to ``__consumer_offsets`` (the role of Kafka's
``GroupMetadataManager.appendForGroup``; ``CoordinatorPartitionWriter`` in Kafka's newer
coordinators).

Each ``effects.Append`` becomes one RecordBatch v2 appended through ``Replicas.append_records``
(the broker's ``ReplicaManager``) with acks=-1 (``offsets.commit.required.acks``) and
``offsets.commit.timeout.ms``. Records carry the core's timestamp (CreateTime, as Kafka's
coordinator writes them).

Every append is the coordinator's own (``AppendOrigin.COORDINATOR``, as ``appendForGroup``
passes it): the log checks a producer batch's epochs, never its sequence or whether it repeats
an earlier one. A TxnOffsetCommit's append is a transactional batch of its producer (KIP-98)
with base sequence 0, as ``GroupMetadataManager.storeOffsets`` builds it: the producer's
sequence in ``__consumer_offsets`` means nothing (clients cannot produce there), so every
TxnOffsetCommit of one producer epoch carries the same sequence and none is taken for a
duplicate of the one before.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pykraft.coordinator.group.effects import Append, TransactionalProducer
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.replicas import Replicas
from pykraft.protocol.errors import Errors
from pykraft.storage.log_validator import AppendOrigin
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# offsets.commit.timeout.ms: how long an append waits for the ISR.
OFFSET_COMMIT_TIMEOUT_MS = 5000
# A coordinator's transactional batch starts at sequence 0 (``storeOffsets``).
COORDINATOR_BASE_SEQUENCE = 0


class OffsetsWriter:
    def __init__(
        self,
        replicas: Replicas,
        *,
        wall_clock_ms: Callable[[], int],
        timeout_ms: int = OFFSET_COMMIT_TIMEOUT_MS,
    ) -> None:
        self.replicas = replicas
        self.wall_clock_ms = wall_clock_ms
        self.timeout_ms = timeout_ms

    async def append(self, append: Append) -> tuple[Errors, int]:
        """Append ``append`` as one batch: the outcome and the batch's base offset."""
        topic_partition = TopicPartition(OFFSETS_TOPIC, append.partition)
        records = [
            SimpleRecord(key=r.key, value=r.value, timestamp=append.timestamp_ms)
            for r in append.records
        ]
        try:
            results = await self.replicas.append_records(
                {topic_partition: offsets_batch(records, append.producer)},
                required_acks=-1,
                timeout_ms=self.timeout_ms,
                now_ms=self.wall_clock_ms(),
                internal_topics_allowed=True,
                origin=AppendOrigin.COORDINATOR,
            )
            error, base_offset = (
                results[topic_partition].error,
                results[topic_partition].base_offset,
            )
        except Exception:
            # A bug below: log it, and still answer whoever waits for this write.
            logger.exception("appending to %s failed", topic_partition)
            error, base_offset = Errors.UNKNOWN_SERVER_ERROR, -1
        if error is not Errors.NONE:
            logger.info("appending to %s failed: %s", topic_partition, error.name)
        return error, base_offset


def offsets_batch(records: list[SimpleRecord], producer: TransactionalProducer | None) -> bytearray:
    """A plain batch, or ``producer``'s transactional one at sequence 0 (module docstring)."""
    if producer is None:
        return bytearray(build_batch(records))
    batch = build_batch(
        records,
        producer_id=producer.producer_id,
        producer_epoch=producer.producer_epoch,
        base_sequence=COORDINATOR_BASE_SEQUENCE,
        is_transactional=True,
    )
    return bytearray(batch)
