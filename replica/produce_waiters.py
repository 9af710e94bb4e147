"""Waiting produces as pure bookkeeping: an acks=all produce waits for the ISR (Kafka's
``DelayedProduce``).

Theory of operation
-------------------
After the local append, an acks=-1 produce with at least one partition appended waits here
(``ReplicaManager.appendRecords``' ``delayedProduceRequestRequired``). Each such partition waits
for its *required offset* (the batch's last offset + 1); partitions whose append failed do not
wait and keep their error. ``ProducePurgatory`` is the pure bookkeeping; a check asks a
``checker(partition, required_offset) -> (done, error)`` — ``Partition.
check_enough_replicas_reach_offset``, or the error of a partition no longer hosted — and, like
Kafka's ``DelayedProduce.tryComplete``, marks a partition done when it answers done or any error:

* (True, NONE): the high watermark reached the required offset with enough ISR members;
* (True, NOT_ENOUGH_REPLICAS_AFTER_APPEND): it did, but the ISR had shrunk below
  min.insync.replicas;
* (False, NOT_LEADER_OR_FOLLOWER / UNKNOWN_TOPIC_OR_PARTITION ...): leadership moved away.

A waiter completes when none of its partitions waits any more; partitions still waiting at its
deadline (``timeout_ms`` of the request) answer REQUEST_TIMED_OUT (``onExpiration``). Checks run
once when the produce starts waiting, and again for the waiters on a partition whenever its
high watermark moves or it changes leadership (``check_and_complete``; those waiting for a
higher offset than one still waiting are not asked). At most ``max_waiters``
wait at once; a produce that finds the purgatory full answers at once, its unfinished partitions
with REQUEST_TIMED_OUT (bounded, never an unbounded queue).

The waiting itself is ``replica.waiters.PartitionsPurgatory``'s, shared with DeleteRecords; this
module gives the rule. The asyncio shell is ``broker.delayed_produce.DelayedProduces``; deadlines
are monotonic milliseconds, passed in.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.protocol.errors import Errors
from pykraft.replica.waiters import PartitionsPurgatory
from pykraft.storage.topic_partition import TopicPartition

# Upper bound on concurrently waiting produces (STYLE.md §7).
MAX_DELAYED_PRODUCES = 10_000

# (partition, required offset) -> (done, error): Kafka's checkEnoughReplicasReachOffset.
ReplicaChecker = Callable[[TopicPartition, int], tuple[bool, Errors]]


class ProducePurgatory(PartitionsPurgatory[int, ReplicaChecker, Errors]):
    """Pure bookkeeping of waiting produces, keyed by partition: each partition accepted with
    its required offset, answering its error; no clock, no I/O."""

    def __init__(self, max_waiters: int = MAX_DELAYED_PRODUCES) -> None:
        super().__init__(max_waiters)

    def _accept(self, value: int) -> tuple[int, Errors]:
        # Kafka starts every waiting partition at REQUEST_TIMED_OUT: what it answers if nothing
        # completes it before the deadline.
        return value, Errors.REQUEST_TIMED_OUT

    def _try_answer(
        self, topic_partition: TopicPartition, required_offset: int, checker: ReplicaChecker
    ) -> Errors | None:
        """Kafka ``DelayedProduce.tryComplete`` for one partition: done on success or any error."""
        done, error = checker(topic_partition, required_offset)
        return error if error is not Errors.NONE or done else None
