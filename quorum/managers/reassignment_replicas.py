"""The replica-set arithmetic of a partition reassignment (KIP-455), as pure values.

Kafka keeps it in two small classes, mirrored here:

* ``PartitionReassignmentReplicas``: from the current replicas and the target, the replicas to
  write while the reassignment runs — the target followed by the replicas being removed — and
  which are being added (``target - current``) or removed (``current - target``), each in
  ascending broker id order (Kafka's ``TreeSet``). A reassignment
  completes (``maybe_complete_reassignment``) once every target replica is in the ISR with the
  removing replicas taken out: the replicas become the target, the ISR loses the removing
  replicas, and adding / removing are cleared. It never completes into an empty ISR.
* ``PartitionReassignmentRevert``: cancelling puts back the original replicas (the current ones
  without those being added) and takes the adding replicas out of the ISR. When only adding
  replicas were in sync, the first original replica becomes the ISR and the revert is
  ``unclean`` — the caller may do it only when unclean leader election is enabled.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.image import PartitionRegistration


def _without(replicas: tuple[int, ...], drop: tuple[int, ...]) -> tuple[int, ...]:
    return tuple(replica for replica in replicas if replica not in drop)


@attrs.frozen
class ReassignmentReplicas:
    """Kafka's ``PartitionReassignmentReplicas``: what a partition looks like mid-move."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...] = ()
    removing: tuple[int, ...] = ()

    @classmethod
    def of(cls, current: tuple[int, ...], target: tuple[int, ...]) -> ReassignmentReplicas:
        # Kafka's calculateDifference keeps each difference in a TreeSet: ascending broker ids,
        # whatever the lists' order.
        removing = tuple(sorted(_without(current, target)))
        adding = tuple(sorted(_without(target, current)))
        return cls(replicas=(*target, *removing), adding=adding, removing=removing)

    @classmethod
    def ongoing(cls, partition: PartitionRegistration) -> ReassignmentReplicas:
        return cls(partition.replicas, partition.adding_replicas, partition.removing_replicas)

    def is_in_progress(self) -> bool:
        return bool(self.adding or self.removing)

    def target_replicas(self) -> tuple[int, ...]:
        return _without(self.replicas, self.removing)

    def original_replicas(self) -> tuple[int, ...]:
        return _without(self.replicas, self.adding)

    def maybe_complete_reassignment(
        self, target_isr: tuple[int, ...]
    ) -> CompletedReassignment | None:
        """The replicas and ISR once complete, or None while some target replica lags."""
        if not self.is_in_progress():
            return None
        isr = _without(target_isr, self.removing)
        replicas = self.target_replicas()
        if not isr or not replicas or not set(replicas) <= set(isr):
            return None
        return CompletedReassignment(replicas=replicas, isr=isr)


@attrs.frozen
class CompletedReassignment:
    replicas: tuple[int, ...]
    isr: tuple[int, ...]


@attrs.frozen
class ReassignmentRevert:
    """Kafka's ``PartitionReassignmentRevert``: the replicas and ISR a cancellation restores."""

    replicas: tuple[int, ...]
    isr: tuple[int, ...]
    unclean: bool

    @classmethod
    def of(cls, partition: PartitionRegistration) -> ReassignmentRevert:
        ongoing = ReassignmentReplicas.ongoing(partition)
        replicas = ongoing.original_replicas()
        isr = _without(partition.isr, ongoing.adding)
        if isr:
            return cls(replicas=replicas, isr=isr, unclean=False)
        # Every in-sync replica was being added: an original replica must lead without them.
        assert replicas, "a reassignment that adds every replica has nothing to revert to"
        return cls(replicas=replicas, isr=(replicas[0],), unclean=True)
