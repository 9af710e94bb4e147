"""The transactional ids this broker coordinates, where they live, and how their state is written.

Theory of operation (Kafka's ``TransactionStateManager``)
---------------------------------------------------------
A transactional id belongs to one partition of ``__transaction_state`` (``partition_for``). This
broker coordinates the ids of the partitions it leads, each in one ``PartitionStatus``:

* absent: not led here; requests get NOT_COORDINATOR. -> LOADING when elected leader.
* ``LOADING``: the partition's log is being replayed; requests get COORDINATOR_LOAD_IN_PROGRESS.
  -> ACTIVE when the replay is installed; -> absent when leadership moves on.
* ``ACTIVE``: requests are served. -> absent when leadership moves away (``unload``).

The coordinator epoch of a partition is its leader epoch when this broker was elected
(``OwnedPartition.coordinator_epoch``); every write remembers the epoch it was made in. When
the partition moves (unloaded, or reloaded in a later epoch) its writes in flight are abandoned:
their callers are answered NOT_COORDINATOR at once and their outcome changes nothing (Kafka
answers when the append's callback finds the epoch changed, ``appendTransactionToLog``).

Writes: ``append_transaction_to_log`` turns a prepared ``TxnTransitMetadata`` into an ``Append``
of one record with a write id, remembering why it was written (``writes.Purpose``). When the
shell reports the outcome, ``finish_transition`` maps the log's error to the coordinator's
(``writes.coordinator_error``), applies the transition (``complete_transition_to``) on success,
and on failure clears the pending state unless the write is one to retry. Expired ids are
written as tombstones (``expire_transactional_ids``).

Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping

import attrs

from pykraft.coordinator.transaction.config import TransactionConfig, partition_for
from pykraft.coordinator.transaction.effects import (
    Append,
    Effects,
    ListTransactionsResult,
    TransactionDescription,
    TransactionListing,
    TxnLogRecord,
)
from pykraft.coordinator.transaction.metadata import TransactionMetadata, TxnTransitMetadata
from pykraft.coordinator.transaction.records import transaction_log_key, transaction_log_value
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.coordinator.transaction.writes import (
    PendingTombstones,
    PendingWrite,
    Purpose,
    coordinator_error,
)
from pykraft.protocol.errors import Errors

# Tombstones of one partition go out in batches below Kafka's default max.message.bytes
# (1048588), as removeExpiredTransactionalIds fills a batch up to the log's maximum.
MAX_TOMBSTONE_BATCH_BYTES = 1_000_000
# Bytes a tombstone costs in a batch besides its key (record framing, generously).
_TOMBSTONE_OVERHEAD_BYTES = 32


class PartitionStatus(enum.Enum):
    LOADING = "loading"
    ACTIVE = "active"


@attrs.frozen
class OwnedPartition:
    status: PartitionStatus
    coordinator_epoch: int


@attrs.frozen
class EpochAndMetadata:
    """Kafka's ``CoordinatorEpochAndTxnMetadata``."""

    coordinator_epoch: int
    metadata: TransactionMetadata


class TransactionStateManager:
    def __init__(self, config: TransactionConfig) -> None:
        self.config = config
        # Kafka reads the partition count of an existing topic, not the config (the shell
        # sets it from the metadata image before the first partition is loaded).
        self.num_partitions = config.transaction_state_log_num_partitions
        self.partitions: dict[int, OwnedPartition] = {}
        # Invariant: a key of ``transactions`` is an ACTIVE partition.
        self.transactions: dict[int, dict[str, TransactionMetadata]] = {}
        self.active = True
        self._writes: dict[int, PendingWrite | PendingTombstones] = {}
        self._next_write_id = 0

    # ------------------------------------------------------------------ lookups

    def partition_for(self, transactional_id: str) -> int:
        return partition_for(transactional_id, self.num_partitions)

    def validate_transaction_timeout_ms(self, txn_timeout_ms: int) -> bool:
        return 0 < txn_timeout_ms <= self.config.transaction_max_timeout_ms

    def get_transaction_state(self, transactional_id: str) -> Errors | EpochAndMetadata | None:
        """The id's metadata with its coordinator epoch; None when this coordinator has no
        state for it; NOT_COORDINATOR / COORDINATOR_LOAD_IN_PROGRESS when its partition is not
        led here or still loading (``getTransactionState``)."""
        partition = self.partition_for(transactional_id)
        owned = self.partitions.get(partition)
        if owned is None:
            return Errors.NOT_COORDINATOR
        if owned.status is PartitionStatus.LOADING:
            return Errors.COORDINATOR_LOAD_IN_PROGRESS
        metadata = self.transactions[partition].get(transactional_id)
        return None if metadata is None else EpochAndMetadata(owned.coordinator_epoch, metadata)

    def put_transaction_state_if_not_exists(
        self, metadata: TransactionMetadata
    ) -> Errors | EpochAndMetadata:
        found = self.get_transaction_state(metadata.transactional_id)
        if found is not None:
            return found
        partition = self.partition_for(metadata.transactional_id)
        self.transactions[partition][metadata.transactional_id] = metadata
        return EpochAndMetadata(self.partitions[partition].coordinator_epoch, metadata)

    # ------------------------------------------------------------------ writes

    def append_transaction_to_log(
        self,
        transactional_id: str,
        coordinator_epoch: int,
        transit: TxnTransitMetadata,
        purpose: Purpose,
        now_ms: int,
        effects: Effects,
        *,
        retry_on: frozenset[Errors] = frozenset(),
    ) -> None:
        """Ask for the write of ``transit``, prepared a moment ago on an id this coordinator
        owns in ``coordinator_epoch``. (Kafka checks ownership again under its lock before the
        append; one owner and no await in between make that a given here.)"""
        found = self.get_transaction_state(transactional_id)
        # Invariant: the caller found the id owned here in this epoch during this same call.
        assert isinstance(found, EpochAndMetadata), (transactional_id, found)
        assert found.coordinator_epoch == coordinator_epoch, (found, coordinator_epoch)
        pending = PendingWrite(
            transactional_id=transactional_id,
            coordinator_epoch=coordinator_epoch,
            transit=transit,
            purpose=purpose,
            retry_on=retry_on,
        )
        record = TxnLogRecord(transaction_log_key(transactional_id), transaction_log_value(transit))
        effects.appends.append(
            Append(
                write_id=self._new_write(pending),
                partition=self.partition_for(transactional_id),
                records=(record,),
                timestamp_ms=now_ms,
                timeout_ms=transit.txn_timeout_ms,
            )
        )

    def _new_write(self, pending: PendingWrite | PendingTombstones) -> int:
        self._next_write_id += 1
        self._writes[self._next_write_id] = pending
        return self._next_write_id

    def pop_write(self, write_id: int) -> PendingWrite | PendingTombstones | None:
        """The write ``write_id`` was made for; None when it was abandoned (``unload``)."""
        return self._writes.pop(write_id, None)

    def _abandon_writes(self, partition: int) -> list[PendingWrite]:
        """Forget the writes in flight to ``partition``: their outcome no longer matters here.
        Returns the transitions among them, whose callers wait for an answer."""
        abandoned = []
        for write_id, pending in list(self._writes.items()):
            if isinstance(pending, PendingTombstones):
                if pending.partition == partition:
                    del self._writes[write_id]
            elif self.partition_for(pending.transactional_id) == partition:
                del self._writes[write_id]
                abandoned.append(pending)
        return abandoned

    def finish_transition(self, pending: PendingWrite, append_error: Errors) -> Errors:
        """The shell's report on ``pending``: apply it if it was written and this coordinator
        still owns the id in the same epoch; the error to answer (``updateCacheCallback``)."""
        error = coordinator_error(append_error)
        found = self.get_transaction_state(pending.transactional_id)
        if error is Errors.NONE:
            if isinstance(found, Errors):
                return found
            if found is None or found.coordinator_epoch != pending.coordinator_epoch:
                return Errors.NOT_COORDINATOR
            found.metadata.complete_transition_to(pending.transit)
            return Errors.NONE
        if isinstance(found, EpochAndMetadata):
            same_epoch = found.coordinator_epoch == pending.coordinator_epoch
            if same_epoch and error not in pending.retry_on:
                found.metadata.pending_state = None
        return error

    # ------------------------------------------------------------------ time

    def timed_out_transactions(self, now_ms: int) -> list[tuple[str, int, int]]:
        """(transactional id, producer id, producer epoch) of every ongoing transaction past its
        timeout with no transition pending (``timedOutTransactions``)."""
        return [
            (metadata.transactional_id, metadata.producer_id, metadata.producer_epoch)
            for partition in sorted(self.transactions)
            for metadata in self.transactions[partition].values()
            if metadata.pending_state is None
            and metadata.state is TransactionState.ONGOING
            and metadata.txn_start_timestamp_ms + metadata.txn_timeout_ms < now_ms
        ]

    def expire_transactional_ids(self, now_ms: int, effects: Effects) -> None:
        """Tombstone every id idle for ``transactional.id.expiration.ms`` with no transaction
        in progress; each goes DEAD (pending) until its tombstone is written."""
        cutoff_ms = now_ms - self.config.transactional_id_expiration_ms
        for partition in sorted(self.transactions):
            epoch = self.partitions[partition].coordinator_epoch
            batch: list[tuple[str, int]] = []
            size = 0
            for metadata in list(self.transactions[partition].values()):
                if (
                    metadata.pending_state is not None
                    or not metadata.state.is_expiration_allowed
                    or metadata.txn_last_update_timestamp_ms > cutoff_ms
                ):
                    continue
                cost = len(transaction_log_key(metadata.transactional_id))
                cost += _TOMBSTONE_OVERHEAD_BYTES
                if batch and size + cost > MAX_TOMBSTONE_BATCH_BYTES:
                    self._write_tombstones(partition, epoch, batch, now_ms, effects)
                    batch, size = [], 0
                metadata.prepare_dead()
                batch.append((metadata.transactional_id, metadata.producer_epoch))
                size += cost
            if batch:
                self._write_tombstones(partition, epoch, batch, now_ms, effects)

    def _write_tombstones(
        self,
        partition: int,
        coordinator_epoch: int,
        expired: list[tuple[str, int]],
        now_ms: int,
        effects: Effects,
    ) -> None:
        pending = PendingTombstones(
            partition=partition, coordinator_epoch=coordinator_epoch, expired=tuple(expired)
        )
        records = tuple(TxnLogRecord(transaction_log_key(tid), None) for tid, _ in expired)
        effects.appends.append(
            Append(
                write_id=self._new_write(pending),
                partition=partition,
                records=records,
                timestamp_ms=now_ms,
                timeout_ms=self.config.request_timeout_ms,
            )
        )

    def finish_tombstones(self, pending: PendingTombstones, append_error: Errors) -> list[str]:
        """Forget the ids whose tombstone was written; the others stay (``removeFromCache``).
        Returns the ids forgotten."""
        owned = self.partitions.get(pending.partition)
        cache = self.transactions.get(pending.partition, {})
        forgotten = []
        for transactional_id, producer_epoch in pending.expired:
            metadata = cache.get(transactional_id)
            if metadata is None:
                continue
            if (
                append_error is Errors.NONE
                and owned is not None
                and owned.coordinator_epoch == pending.coordinator_epoch
                and metadata.pending_state is TransactionState.DEAD
                and metadata.producer_epoch == producer_epoch
            ):
                del cache[transactional_id]
                forgotten.append(transactional_id)
            else:
                metadata.pending_state = None
        return forgotten

    # ------------------------------------------------------------------ describe, list

    def describe_transaction(self, transactional_id: str) -> TransactionDescription:
        """``handleDescribeTransactions`` for one id."""
        if not self.active:
            return TransactionDescription(
                transactional_id=transactional_id, error=Errors.COORDINATOR_NOT_AVAILABLE
            )
        if not transactional_id:
            return TransactionDescription(
                transactional_id=transactional_id, error=Errors.INVALID_REQUEST
            )
        found = self.get_transaction_state(transactional_id)
        if isinstance(found, Errors):
            return TransactionDescription(transactional_id=transactional_id, error=found)
        # A DEAD id is being expired: as good as gone.
        if found is None or found.metadata.state is TransactionState.DEAD:
            return TransactionDescription(
                transactional_id=transactional_id, error=Errors.TRANSACTIONAL_ID_NOT_FOUND
            )
        metadata = found.metadata
        by_topic: dict[str, list[int]] = {}
        for tp in sorted(metadata.topic_partitions):
            by_topic.setdefault(tp.topic, []).append(tp.partition)
        return TransactionDescription(
            transactional_id=transactional_id,
            error=Errors.NONE,
            state=metadata.state.value,
            transaction_timeout_ms=metadata.txn_timeout_ms,
            transaction_start_time_ms=metadata.txn_start_timestamp_ms,
            producer_id=metadata.producer_id,
            producer_epoch=metadata.producer_epoch,
            topics=tuple((topic, tuple(ids)) for topic, ids in by_topic.items()),
        )

    def list_transactions(
        self, state_filters: Iterable[str], producer_id_filters: Iterable[int]
    ) -> ListTransactionsResult:
        """``listTransactionStates``: every id here, filtered by state name and producer id."""
        if not self.active:
            return ListTransactionsResult(error=Errors.COORDINATOR_NOT_AVAILABLE)
        if any(p.status is PartitionStatus.LOADING for p in self.partitions.values()):
            return ListTransactionsResult(error=Errors.COORDINATOR_LOAD_IN_PROGRESS)
        names = sorted(set(state_filters))
        states = {state for name in names if (state := TransactionState.from_name(name))}
        unknown = tuple(name for name in names if TransactionState.from_name(name) is None)
        producer_ids = frozenset(producer_id_filters)
        listings = [
            TransactionListing(
                m.transactional_id, m.producer_id, m.state.value, m.txn_start_timestamp_ms
            )
            for partition in sorted(self.transactions)
            for m in self.transactions[partition].values()
            # DEAD is transient: the id is being removed.
            if m.state is not TransactionState.DEAD
            and (not producer_ids or m.producer_id in producer_ids)
            and (not names or m.state in states)
        ]
        listings.sort(key=lambda listing: listing.transactional_id)
        return ListTransactionsResult(
            error=Errors.NONE, unknown_state_filters=unknown, transactions=tuple(listings)
        )

    # ------------------------------------------------------------------ loading

    def begin_loading(
        self, partition: int, coordinator_epoch: int
    ) -> tuple[bool, list[PendingWrite]]:
        """This broker now leads ``partition`` in ``coordinator_epoch``: True when its log must
        be replayed (it is not loaded or loading in that epoch already), and the writes of an
        earlier epoch abandoned on the way, whose callers must be told NOT_COORDINATOR."""
        owned = self.partitions.get(partition)
        if owned is not None and owned.coordinator_epoch == coordinator_epoch:
            return False, []
        abandoned = self._abandon_writes(partition)
        self.transactions.pop(partition, None)
        self.partitions[partition] = OwnedPartition(PartitionStatus.LOADING, coordinator_epoch)
        return True, abandoned

    def complete_loading(
        self, partition: int, coordinator_epoch: int, loaded: Mapping[str, TransactionMetadata]
    ) -> bool:
        """Install the replayed ids; False (nothing installed) when the partition moved on."""
        loading = OwnedPartition(PartitionStatus.LOADING, coordinator_epoch)
        if self.partitions.get(partition) != loading:
            return False
        self.transactions[partition] = dict(loaded)
        self.partitions[partition] = OwnedPartition(PartitionStatus.ACTIVE, coordinator_epoch)
        return True

    def unload(self, partition: int, coordinator_epoch: int | None = None) -> list[PendingWrite]:
        """Leadership of ``partition`` moved away (in ``coordinator_epoch``, when known): its
        ids are forgotten, and so are its writes in flight, which are returned so their
        callers hear NOT_COORDINATOR now. Nothing changes when the resignation is of an epoch
        older than the one this broker owns."""
        owned = self.partitions.get(partition)
        if owned is None:
            return []
        if coordinator_epoch is not None and coordinator_epoch < owned.coordinator_epoch:
            return []
        del self.partitions[partition]
        self.transactions.pop(partition, None)
        return self._abandon_writes(partition)

    def shutdown(self) -> list[PendingWrite]:
        """Stop coordinating; the writes whose callers still wait."""
        abandoned = []
        for partition in sorted(self.partitions):
            abandoned += self.unload(partition)
        self.active = False
        return abandoned
