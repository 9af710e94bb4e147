"""Appends what the group coordinator writes to ``__consumer_offsets`` (the role of Kafka's
``GroupMetadataManager.appendForGroup``; ``CoordinatorPartitionWriter`` in Kafka's newer
coordinators).

Each ``effects.Append`` becomes one RecordBatch v2 appended through ``Replicas.append_records``
(the broker's ``ReplicaManager``) with acks=-1 (``offsets.commit.required.acks``) and
``offsets.commit.timeout.ms``. Records carry the core's timestamp (CreateTime, as Kafka's
coordinator writes them).

A TxnOffsetCommit's append is a transactional batch of its producer (KIP-98). Kafka writes it
with base sequence 0 and appends it as ``AppendOrigin.COORDINATOR``, which skips the producer's
sequence checks; pykraft's replica layer checks every producer batch as a client's, so the batch
continues the producer's sequence in this partition instead (``coordinator_base_sequence``):
the coordinator is the only writer of that producer's data there. The sequence is read from the
partition's producer state just before the append, and the local append happens before the
first ``await``, so no other append comes between.
"""

from __future__ import annotations

import logging
from collections.abc import Callable

from pykraft.coordinator.group.effects import Append, TransactionalProducer
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.replicas import Replicas
from pykraft.coordinator.group.transactions import coordinator_base_sequence
from pykraft.protocol.errors import Errors
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# offsets.commit.timeout.ms: how long an append waits for the ISR.
OFFSET_COMMIT_TIMEOUT_MS = 5000


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
            batch = self._batch(topic_partition, records, append.producer)
            results = await self.replicas.append_records(
                {topic_partition: batch},
                required_acks=-1,
                timeout_ms=self.timeout_ms,
                now_ms=self.wall_clock_ms(),
                internal_topics_allowed=True,
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

    def _batch(
        self,
        topic_partition: TopicPartition,
        records: list[SimpleRecord],
        producer: TransactionalProducer | None,
    ) -> bytearray:
        """A plain batch, or ``producer``'s transactional one continuing its sequence here."""
        if producer is None:
            return bytearray(build_batch(records))
        hosted = self.replicas.get_partition(topic_partition)
        entry = None
        if hosted is not None:
            entry = hosted.log.producer_state.last_entry(producer.producer_id)
        batch = build_batch(
            records,
            producer_id=producer.producer_id,
            producer_epoch=producer.producer_epoch,
            base_sequence=coordinator_base_sequence(entry, producer.producer_epoch),
            is_transactional=True,
        )
        return bytearray(batch)
