"""Drive the pure transaction coordinator like its shell does: request ids, producer ids from a
counter, a simulated clock, and appends and markers that complete when the test says so."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from pykraft.coordinator.transaction.config import TransactionConfig
from pykraft.coordinator.transaction.coordinator import TransactionCoordinator
from pykraft.coordinator.transaction.effects import (
    Append,
    Effects,
    InitProducerIdResult,
    ProducerIdAndEpoch,
    Result,
    SendMarkers,
    TxnResult,
)
from pykraft.coordinator.transaction.metadata import TransactionMetadata
from pykraft.coordinator.transaction.records import decode_key, decode_value
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

TXN = "known"
START_MS = 1_000_000
TIMEOUT_MS = 60_000
EPOCH = 7  # the coordinator epoch (leader epoch of the __transaction_state partition)
FIRST_PRODUCER_ID = 1000
TP0 = TopicPartition("topic1", 0)
TP1 = TopicPartition("topic1", 1)
TP2 = TopicPartition("topic2", 0)


class Harness:
    """One coordinator leading every ``__transaction_state`` partition (1 unless told)."""

    def __init__(self, *, num_partitions: int = 1, load: bool = True, **config: Any) -> None:
        self.config = TransactionConfig(
            transaction_state_log_num_partitions=num_partitions, **config
        )
        self.coordinator = TransactionCoordinator(self.config)
        self.now_ms = START_MS
        self.request_ids = 0
        self.answers: dict[int, Result] = {}
        self.pending_appends: list[Append] = []
        self.appended: list[Append] = []
        self.pending_markers: list[SendMarkers] = []
        self.sent_markers: list[SendMarkers] = []
        self.next_producer_id = FIRST_PRODUCER_ID
        # False: the producer id source has nothing at hand.
        self.producer_ids_available = True
        if load:
            for partition in range(num_partitions):
                self.load(partition, EPOCH)

    # ------------------------------------------------------------------ plumbing

    def take(self, effects: Effects) -> Effects:
        for answer in effects.answers:
            assert answer.request_id not in self.answers, f"answered twice: {answer}"
            self.answers[answer.request_id] = answer.result
        self.pending_appends.extend(effects.appends)
        self.appended.extend(effects.appends)
        self.pending_markers.extend(effects.markers)
        self.sent_markers.extend(effects.markers)
        return effects

    def new_request(self) -> int:
        self.request_ids += 1
        return self.request_ids

    def advance(self, ms: int) -> Effects:
        self.now_ms += ms
        return self.take(self.coordinator.poll(self.now_ms))

    def complete_appends(self, error: Errors = Errors.NONE) -> None:
        pending, self.pending_appends = self.pending_appends, []
        for append in pending:
            self.take(self.coordinator.on_append_done(append.write_id, error, self.now_ms))

    def write_markers(
        self,
        errors: Mapping[TopicPartition, Errors] | None = None,
        *,
        deleted: Iterable[TopicPartition] = (),
    ) -> list[SendMarkers]:
        """Answer every marker sent so far: NONE unless ``errors`` says otherwise."""
        errors = errors or {}
        gone = frozenset(deleted)
        pending, self.pending_markers = self.pending_markers, []
        for send in pending:
            reached = {
                tp: errors.get(tp, Errors.NONE) for tp in send.marker.partitions if tp not in gone
            }
            effects = self.coordinator.on_markers_written(
                send.transactional_id,
                send.marker.coordinator_epoch,
                reached,
                [tp for tp in send.marker.partitions if tp in gone],
                self.now_ms,
            )
            self.take(effects)
        return pending

    def load(
        self, partition: int, epoch: int, loaded: Mapping[str, TransactionMetadata] | None = None
    ) -> None:
        needed, effects = self.coordinator.begin_loading(partition, epoch, self.now_ms)
        assert needed
        self.take(effects)
        done = self.coordinator.complete_loading(partition, epoch, loaded or {}, self.now_ms)
        self.take(done)

    def put(self, metadata: TransactionMetadata) -> TransactionMetadata:
        """Install an id's state directly (Kafka's tests mock getTransactionState)."""
        manager = self.coordinator.manager
        partition = manager.partition_for(metadata.transactional_id)
        manager.transactions[partition][metadata.transactional_id] = metadata
        return metadata

    def metadata(self, transactional_id: str = TXN) -> TransactionMetadata:
        manager = self.coordinator.manager
        return manager.transactions[manager.partition_for(transactional_id)][transactional_id]

    def written(self, append: Append | None = None) -> list[tuple[str, Any]]:
        """(transactional id, decoded value or None) of every record of ``append`` (the last
        one by default)."""
        chosen = append or self.appended[-1]
        records = []
        for record in chosen.records:
            key = decode_key(record.key)
            assert isinstance(key, str)
            records.append((key, None if record.value is None else decode_value(record.value)))
        return records

    # ------------------------------------------------------------------ requests

    def send_init(
        self,
        transactional_id: str | None = TXN,
        *,
        timeout_ms: int = TIMEOUT_MS,
        expected: tuple[int, int] | None = None,
    ) -> int:
        request_id = self.new_request()
        new_producer_id = None
        if self.coordinator.needs_new_producer_id(transactional_id, timeout_ms) and (
            self.producer_ids_available
        ):
            new_producer_id = self.next_producer_id
            self.next_producer_id += 1
        current = None if expected is None else ProducerIdAndEpoch(*expected)
        effects = self.coordinator.handle_init_producer_id(
            transactional_id, timeout_ms, current, request_id, self.now_ms, new_producer_id
        )
        self.take(effects)
        return request_id

    def init(self, transactional_id: str | None = TXN, **kwargs: Any) -> InitProducerIdResult:
        """InitProducerId with its append completed."""
        request_id = self.send_init(transactional_id, **kwargs)
        self.complete_appends()
        return self.init_result(request_id)

    def init_result(self, request_id: int) -> InitProducerIdResult:
        result = self.answers[request_id]
        assert isinstance(result, InitProducerIdResult), result
        return result

    def send_add(
        self,
        producer_id: int,
        producer_epoch: int,
        partitions: Iterable[TopicPartition] = (TP0,),
        transactional_id: str = TXN,
    ) -> int:
        request_id = self.new_request()
        effects = self.coordinator.handle_add_partitions(
            transactional_id, producer_id, producer_epoch, partitions, request_id, self.now_ms
        )
        self.take(effects)
        return request_id

    def send_end(
        self, producer_id: int, producer_epoch: int, commit: bool, transactional_id: str = TXN
    ) -> int:
        request_id = self.new_request()
        effects = self.coordinator.handle_end_txn(
            transactional_id, producer_id, producer_epoch, commit, request_id, self.now_ms
        )
        self.take(effects)
        return request_id

    def error(self, request_id: int) -> Errors:
        result = self.answers[request_id]
        assert isinstance(result, TxnResult), result
        return result.error

    def answered(self, request_id: int) -> bool:
        return request_id in self.answers

    # ------------------------------------------------------------------ whole flows

    def ongoing(
        self, partitions: Iterable[TopicPartition] = (TP0,), transactional_id: str = TXN
    ) -> tuple[int, int]:
        """A producer initialized with partitions added: (producer id, epoch)."""
        result = self.init(transactional_id)
        assert result.error is Errors.NONE, result
        added = self.send_add(
            result.producer_id, result.producer_epoch, partitions, transactional_id
        )
        self.complete_appends()
        assert self.error(added) is Errors.NONE
        assert self.metadata(transactional_id).state is TransactionState.ONGOING
        return result.producer_id, result.producer_epoch

    def commit(self, producer_id: int, producer_epoch: int, transactional_id: str = TXN) -> None:
        """EndTxn(commit) all the way to CompleteCommit."""
        ended = self.send_end(producer_id, producer_epoch, True, transactional_id)
        self.complete_appends()
        assert self.error(ended) is Errors.NONE
        self.write_markers()
        self.complete_appends()
        assert self.metadata(transactional_id).state is TransactionState.COMPLETE_COMMIT


def metadata(
    state: TransactionState,
    *,
    producer_id: int = 10,
    epoch: int = 1,
    last_producer_id: int = 10,
    last_epoch: int = -1,
    partitions: Iterable[TopicPartition] = (),
    start_ms: int = START_MS,
    last_update_ms: int = START_MS,
    timeout_ms: int = TIMEOUT_MS,
    transactional_id: str = TXN,
) -> TransactionMetadata:
    """An id's state as Kafka's tests build it (``new TransactionMetadata(...)``)."""
    return TransactionMetadata(
        transactional_id=transactional_id,
        producer_id=producer_id,
        last_producer_id=last_producer_id,
        producer_epoch=epoch,
        last_producer_epoch=last_epoch,
        txn_timeout_ms=timeout_ms,
        state=state,
        topic_partitions=set(partitions),
        txn_start_timestamp_ms=start_ms,
        txn_last_update_timestamp_ms=last_update_ms,
    )
