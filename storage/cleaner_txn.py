"""What the cleaner knows of transactions while it walks the segments of one cleaning (Kafka's
``CleanedTransactionMetadata``).

The walk learns which transactions were aborted from the transaction index (``.txnindex``,
``storage.aborted_txn``): an entry becomes "ongoing" once the walk reaches its first offset.
A transactional data batch of an ongoing aborted transaction is discarded (its records were
never visible to a read_committed consumer); any other transactional batch marks its producer's
transaction as an ongoing committed one. A marker closes its producer's transaction:

* ABORT: kept while some batch of that transaction was still seen in this walk (the consumer
  must learn to skip it); the aborted transaction then goes into the new segment's index.
  Otherwise the marker is no longer needed: it may go once its delete horizon has passed.
* COMMIT: kept while batches of the transaction were seen in this walk, else it may go too.
* An empty control batch (already cleaned to its header) may go.

Whether a discardable marker really goes is the filter's decision (``storage.cleaner_filter``:
``delete.retention.ms`` after the cleaning that found it so, KIP-534's delete horizon).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable

import attrs

from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.record_batch import BatchHeader
from pykraft.storage.txn_markers import EndTransactionMarker


@attrs.define
class _AbortedTxnInWalk:
    aborted_txn: AbortedTxn
    last_observed_batch_offset: int | None = None


class CleanedTransactionMetadata:
    """One cleaning's transaction state, shared by every group of segments it rewrites (Kafka's
    ``Cleaner.doClean`` makes one and hands it to each ``cleanSegments``): a transaction whose
    data sits in one group and whose marker sits in the next is still seen as one.
    ``retained_aborted_txns`` feed the ``.txnindex`` of the group being written."""

    def __init__(self, aborted_txns: Iterable[AbortedTxn] = ()) -> None:
        self._pending: deque[AbortedTxn] = deque()
        self._ongoing_aborted: dict[int, _AbortedTxnInWalk] = {}
        self._ongoing_committed: set[int] = set()
        self.retained_aborted_txns: list[AbortedTxn] = []
        self.add_aborted_txns(aborted_txns)

    def add_aborted_txns(self, aborted_txns: Iterable[AbortedTxn]) -> None:
        """Kafka ``addAbortedTransactions``: the next group's aborted transactions."""
        merged = [*self._pending, *aborted_txns]
        self._pending = deque(sorted(merged, key=lambda txn: txn.first_offset))

    def take_retained_aborted_txns(self) -> list[AbortedTxn]:
        """The aborted transactions retained since the last call: one group's ``.txnindex``."""
        retained, self.retained_aborted_txns = self.retained_aborted_txns, []
        return retained

    def _consume_aborted_txns_up_to(self, offset: int) -> None:
        while self._pending and self._pending[0].first_offset <= offset:
            txn = self._pending.popleft()
            # Kafka getOrElseUpdate: a transaction already ongoing keeps what was observed of it
            self._ongoing_aborted.setdefault(txn.producer_id, _AbortedTxnInWalk(txn))

    def on_batch_read(self, header: BatchHeader) -> bool:
        """Kafka ``onBatchRead``: True when the data batch belongs to an aborted transaction
        (its records may all go)."""
        self._consume_aborted_txns_up_to(header.last_offset)
        if not header.is_transactional:
            return False
        aborted = self._ongoing_aborted.get(header.producer_id)
        if aborted is not None:
            aborted.last_observed_batch_offset = header.last_offset
            return True
        self._ongoing_committed.add(header.producer_id)
        return False

    def on_control_batch_read(
        self, header: BatchHeader, marker: EndTransactionMarker | None, *, has_records: bool
    ) -> bool:
        """Kafka ``onControlBatchRead``: True when the marker is no longer needed by any
        record (it may be discarded once its delete horizon passes)."""
        self._consume_aborted_txns_up_to(header.last_offset)
        if not has_records:
            return True  # an empty control batch was cleaned before
        if marker is None:
            return False  # another control type: kept
        producer_id = header.producer_id
        if marker.is_abort:
            aborted = self._ongoing_aborted.pop(producer_id, None)
            if aborted is not None and aborted.last_observed_batch_offset is not None:
                self.retained_aborted_txns.append(aborted.aborted_txn)
                return False
            return True
        if producer_id in self._ongoing_committed:
            self._ongoing_committed.discard(producer_id)
            return False
        return True
