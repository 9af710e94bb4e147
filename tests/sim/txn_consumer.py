"""The transaction sim's read_committed consumer: what a Kafka consumer with
``isolation.level=read_committed`` does with a Fetch answer.

The broker sends every batch below the last stable offset, aborted ones included, with the
aborted transactions (producer id, first offset) that overlap them; the consumer drops the
aborted records and every control batch itself (Kafka's ``CompletedFetch.nextFetchedRecord``):
for each batch in offset order, every aborted transaction whose first offset is at or below the
batch's last offset adds its producer to the aborted set; an ABORT marker removes its producer;
a transactional data batch of a producer in the set is skipped; a control batch is never
returned. The position moves past every batch read. The records it returns go to the checker
(``TxnChecker.on_read_committed``).

One consumer polls every partition of the topic, each at the leader the controller names,
one Fetch at a time per partition; the leader's handler may hold it in its delayed-fetch
purgatory until the last stable offset moves (``broker.handlers.fetch``).
"""

from __future__ import annotations

from typing import Any

from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.txn_client import ClientEnv
from tests.sim.txn_log import TxnBatch, txn_batches

CONSUMER_NODE = -30
POLL_INTERVAL_MS = (50, 300)


def read_committed(
    batches: list[TxnBatch], data: PartitionData, position: int
) -> tuple[list[tuple[int, str]], int]:
    """The records a read_committed consumer at ``position`` returns from one answer, and its
    next position (Kafka ``CompletedFetch``)."""
    pending = sorted(
        data.aborted_transactions or (), key=lambda txn: (txn.first_offset, txn.producer_id)
    )
    aborted_producers: set[int] = set()
    returned: list[tuple[int, str]] = []
    start = position
    for batch in batches:
        if batch.last_offset < position:
            continue
        while pending and pending[0].first_offset <= batch.last_offset:
            aborted_producers.add(pending.pop(0).producer_id)
        position = batch.next_offset
        if batch.marker is not None:
            if batch.marker.is_abort:
                aborted_producers.discard(batch.producer_id)
            continue
        if batch.transactional and batch.producer_id in aborted_producers:
            continue
        returned.extend(
            (batch.base_offset + index, value)
            for index, value in enumerate(batch.values)
            if batch.base_offset + index >= start
        )
    return returned, position


class ReadCommittedConsumer:
    def __init__(self, env: ClientEnv) -> None:
        self.env = env
        self.positions = dict.fromkeys(range(env.topic_partitions), 0)
        self._in_flight: set[int] = set()

    def start(self) -> None:
        for partition in sorted(self.positions):
            self._poll_later(partition)

    def _poll_later(self, partition: int) -> None:
        delay = self.env.rng.randint(*POLL_INTERVAL_MS)
        self.env.queue.after(delay, f"consumer poll {partition}", lambda: self._poll(partition))

    def _poll(self, partition: int) -> None:
        env = self.env
        leader = env.leader_for(partition)
        if leader is None or partition in self._in_flight:
            self._poll_later(partition)
            return
        self._in_flight.add(partition)
        position = self.positions[partition]
        topic_partition = TopicPartition(env.topic, partition)
        settled = False

        def settle(data: PartitionData | None) -> None:
            nonlocal settled
            if settled:
                return
            settled = True
            self._in_flight.discard(partition)
            if data is not None:
                self._on_answer(partition, position, data)
            self._poll_later(partition)

        env.client_call(
            CONSUMER_NODE,
            leader,
            f"read_committed Fetch {partition} at {position}",
            lambda broker: broker.serve_read_committed(topic_partition, position),
            settle,
        )
        env.queue.after(
            env.settings.request_timeout_ms,
            f"consumer Fetch {partition} timeout",
            lambda: settle(None),
        )

    def _on_answer(self, partition: int, position: int, data: PartitionData) -> None:
        env = self.env
        if data.error_code != Errors.NONE:
            env.checker.stats[f"read_committed fetch errors ({Errors(data.error_code).name})"] += 1
            assert data.error_code != Errors.OFFSET_OUT_OF_RANGE, (
                f"partition {partition}: read_committed position {position} out of range"
            )
            return
        if position != self.positions[partition]:
            return  # an answer to an older position (the consumer moved on meanwhile)
        wire: Any = b"".join(bytes(piece) for piece in data.records or ())  # type: ignore[arg-type]
        batches = list(txn_batches(wire))
        returned, next_position = read_committed(batches, data, position)
        if data.aborted_transactions:
            env.checker.stats["read_committed answers naming aborted transactions"] += 1
        for offset, value in returned:
            env.checker.on_read_committed(partition, offset, value)
        self.positions[partition] = next_position
