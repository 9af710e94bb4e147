"""A transactional producer's verification on a partition leader (KIP-890 part 1), pure values.

Why: before KIP-890 a transactional write that arrived late — after its transaction was aborted
or committed, or from a producer whose AddPartitionsToTxn never happened — opened a new
transaction on the partition that no coordinator knew about, and the partition's last stable
offset stayed behind it for good (a *hanging transaction*). With
``transaction.partition.verification.enable`` (Kafka 3.6+, default true) the leader first asks
the transaction coordinator whether the partition is in the producer's transaction.

The guard closes the race between that question and the append (Kafka's ``VerificationGuard``,
``UnifiedLog.analyzeAndValidateProducerState``): the leader creates a ``VerificationStateEntry``
holding a fresh ``VerificationGuard`` before it asks, and the append must present the same guard.
Any transactional batch of the producer written in between — its first data batch, or a marker
ending the transaction — clears the entry (``ProducerStateManager.update``), so a verification
answered before an abort marker cannot let a stale write through afterwards (the ABA case Kafka's
comment describes: verified, aborted, a new transaction that does not include the partition,
then the stale append). Each guard is unique by identity; ``SENTINEL`` stands for "no guard" and
verifies nothing.

The entry also remembers the lowest sequence (per epoch) of the batches that asked, so a later
batch cannot be written before an earlier one still being verified (``lowest_sequence``; Kafka's
``VerificationStateEntry.maybeUpdateLowestSequenceAndEpoch`` and the check in
``ProducerAppendInfo.checkSequence``). Entries expire like idle producers
(``producer.id.expiration.ms``, ``ProducerStateManager.removeExpiredProducers``).
"""

from __future__ import annotations

import attrs


@attrs.frozen(eq=False)
class VerificationGuard:
    """A unique token (compared by identity, as Kafka compares its guards' unique values)."""

    def verify(self, request_guard: VerificationGuard) -> bool:
        """Kafka ``VerificationGuard.verify``: the request carries this very guard."""
        return request_guard is not SENTINEL and request_guard is self


# Kafka's VerificationGuard.SENTINEL: "no verification in progress / none needed".
SENTINEL = VerificationGuard()


@attrs.frozen
class VerificationStateEntry:
    """Kafka's ``VerificationStateEntry``: one producer's verification in progress."""

    timestamp_ms: int  # when verification started; the entry expires from it
    lowest_sequence: int
    epoch: int
    guard: VerificationGuard = attrs.field(factory=VerificationGuard)

    def with_sequence_and_epoch(self, sequence: int, epoch: int) -> VerificationStateEntry:
        """Kafka ``maybeUpdateLowestSequenceAndEpoch``: a lower sequence of the same epoch, or
        any sequence of a higher epoch, becomes the lowest; the guard stays."""
        if epoch > self.epoch:
            return attrs.evolve(self, lowest_sequence=sequence, epoch=epoch)
        if epoch == self.epoch and sequence < self.lowest_sequence:
            return attrs.evolve(self, lowest_sequence=sequence)
        return self

    def is_expired(self, now_ms: int, expiration_ms: int) -> bool:
        return now_ms - self.timestamp_ms >= expiration_ms
