"""What one input to a partition's core calls for: the ``Ready`` value and its one order.

Modelled on etcd-io/raft's ``Ready``: the core (``replica.partition_core``) decides, the shell
(``broker.partition.Partition``) carries the decision out, always in this order:

1. **persist** — ``epoch_start``: the leader-epoch file records that ``leader_epoch`` starts at
   ``offset`` (Kafka's ``maybeAssignEpochStartOffset``). A new leader must not serve, nor move
   its high watermark, before its epoch is on disk: a restart would otherwise forget where the
   epoch began and truncate followers wrongly (KIP-101).
2. **apply** — ``state`` becomes the core's state (``PartitionCore.advance``) and the log's
   high watermark moves up to ``high_watermark``.
3. **answer** — the waiters on the partition hear of the move (``high_watermark_moved``) or of
   the new epoch (``partition_changed``), and ``alter_partition`` goes to the controller.

If persisting fails the shell stops there: the core never saw the change, so the same input
can be offered again. A ``Ready`` holds no I/O handle and no time; it is an immutable value.
"""

from __future__ import annotations

from typing import NamedTuple

from pykraft.replica.isr import PendingIsrChange
from pykraft.replica.partition_state import PartitionState
from pykraft.storage.leader_epoch_cache import OffsetAndEpoch


class Ready(NamedTuple):
    """An immutable value (a NamedTuple: one is built for every append and follower fetch)."""

    # The state the core decided from; ``advance`` refuses a Ready built on another.
    base: PartitionState
    # 2. apply: the core's next state (the same object when nothing changes).
    state: PartitionState
    # 1. persist: the leader-epoch file records this epoch's start.
    epoch_start: OffsetAndEpoch | None = None
    # 2. apply: the log's new high watermark. Invariant: above the log's current one.
    high_watermark: int | None = None
    # 3. answer: the partition's waiters answer now (its leader epoch or role moved).
    partition_changed: bool = False
    # 3. answer: the ISR change to send to the controller.
    alter_partition: PendingIsrChange | None = None

    @property
    def changes_state(self) -> bool:
        return self.state is not self.base

    @property
    def is_empty(self) -> bool:
        return (
            not self.changes_state
            and self.epoch_start is None
            and self.high_watermark is None
            and not self.partition_changed
            and self.alter_partition is None
        )
