"""Which replica of a partition a scan reads when several log dirs hold one.

Theory of operation. Operators point ``pykraft-log`` and ``export-topic`` at every broker's
``log.dirs``, so a partition with replication factor N is found N times, once per broker. Each
replica is read whole or not at all (mixing replicas' segments would mix their histories), so
the scan picks one:

* Default: only committed data is read, below the high watermark (Kafka consumers never see
  more), and replicas agree below their own high watermarks: a replica's high watermark never
  passes what the ISR holds, and truncation by leader epoch (KIP-101, KIP-279) only removes
  records above it. So the replica with the **highest checkpointed high watermark** holds the
  most committed data and is read up to that high watermark. A replica whose
  ``replication-offset-checkpoint`` lacks the partition counts as high watermark 0 (Kafka
  starts a log's high watermark at 0), so it only wins when no replica has committed anything.
  (After an unclean leader election committed records can be lost and replicas can disagree
  below their high watermarks; the rule then reads the replica that committed the most.)
* ``ignore_high_watermark``: the scan reads uncommitted records anyway, so the rule becomes
  the replica with the **largest log end offset** (it holds the most records). Above the high
  watermark those records may be a deposed leader's that the current leader has replaced.

Ties fall to the larger log end offset (resp. the higher high watermark), then to the log dir
given first: the choice is deterministic, so the export job's plan and the Spark scan it starts
(both on the driver) pick the same replica.

Two replicas on the **same broker** are not replication: Kafka refuses to start with a
partition live in two of its log dirs (``LogManager.loadLog``: "Duplicate log directories for
… are found in both …", left behind by a failed move between log dirs; the ``-future`` copy of
a move in progress is skipped before this). ``same_broker_duplicate`` finds that case so the
caller can refuse it too. Brokers are told apart by the ``node.id`` in each log dir's
``meta.properties``; a log dir without one counts as a broker of its own, so its replicas go
through the replica rule. Pure: the caller reads the files.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import attrs

from pykraft.storage.topic_partition import TopicPartition


@attrs.frozen
class ReplicaCandidate:
    """One log dir's replica of a partition, with what the choice needs to know about it."""

    topic_partition: TopicPartition
    directory: Path
    log_dir_index: int  # position of its log dir in the list given: the last tie-break
    node_id: int | None  # meta.properties' node.id; None when the log dir has none
    log_start_offset: int
    high_watermark: int
    log_end_offset: int


def same_broker_duplicate(
    candidates: Sequence[ReplicaCandidate],
) -> tuple[ReplicaCandidate, ReplicaCandidate] | None:
    """The first two replicas that belong to one known broker, or None when there are none."""
    seen: dict[int, ReplicaCandidate] = {}
    for candidate in candidates:
        if candidate.node_id is None:
            continue
        if candidate.node_id in seen:
            return seen[candidate.node_id], candidate
        seen[candidate.node_id] = candidate
    return None


def choose_replica(
    candidates: Sequence[ReplicaCandidate], *, ignore_high_watermark: bool = False
) -> ReplicaCandidate:
    """The replica to read (see the module docstring for the rule and its tie-breaks)."""
    # Invariant: one partition's replicas, at least one (the caller groups them).
    assert candidates, "no replicas to choose from"
    assert len({c.topic_partition for c in candidates}) == 1, candidates
    if ignore_high_watermark:
        return min(
            candidates, key=lambda c: (-c.log_end_offset, -c.high_watermark, c.log_dir_index)
        )
    return min(candidates, key=lambda c: (-c.high_watermark, -c.log_end_offset, c.log_dir_index))
