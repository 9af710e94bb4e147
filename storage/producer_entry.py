"""One producer's remembered state: its epoch and its last batches.

Kafka's ``ProducerStateEntry`` and ``BatchMetadata`` (storage/internals/log), as immutable values.
The append checks (``storage.producer_state``) and the snapshot codec
(``storage.producer_snapshot``) both work on them; they live apart so those two modules do not
import each other.
"""

from __future__ import annotations

import attrs

from pykraft.storage.record_batch import NO_PRODUCER_EPOCH, NO_SEQUENCE, BatchHeader

NUM_BATCHES_TO_RETAIN = 5  # Kafka ProducerStateEntry.NUM_BATCHES_TO_RETAIN
NO_TIMESTAMP = -1
SEQUENCE_MODULUS = 2**31  # sequences wrap from Int32.MAX to 0


@attrs.frozen
class BatchMetadata:
    first_sequence: int
    last_sequence: int
    first_offset: int
    last_offset: int
    timestamp: int

    @property
    def offset_delta(self) -> int:
        return self.last_offset - self.first_offset


@attrs.frozen
class ProducerStateEntry:
    producer_id: int
    producer_epoch: int = NO_PRODUCER_EPOCH
    # Invariant: oldest first, at most NUM_BATCHES_TO_RETAIN, all written in producer_epoch.
    batches: tuple[BatchMetadata, ...] = ()
    coordinator_epoch: int = -1
    last_timestamp: int = NO_TIMESTAMP
    current_txn_first_offset: int | None = None

    @property
    def first_sequence(self) -> int:
        return self.batches[0].first_sequence if self.batches else NO_SEQUENCE

    @property
    def last_sequence(self) -> int:
        return self.batches[-1].last_sequence if self.batches else NO_SEQUENCE

    @property
    def first_data_offset(self) -> int:
        return self.batches[0].first_offset if self.batches else -1

    @property
    def last_data_offset(self) -> int:
        return self.batches[-1].last_offset if self.batches else -1

    def find_duplicate(self, header: BatchHeader) -> BatchMetadata | None:
        """Kafka ``findDuplicateBatch``: a retained batch with this epoch and sequence range."""
        if header.producer_epoch != self.producer_epoch:
            return None
        first_sequence, last_sequence = header.base_sequence, header.last_sequence
        for batch in self.batches:
            if batch.first_sequence == first_sequence and batch.last_sequence == last_sequence:
                return batch
        return None
