"""What a metadata delta asks of one broker (Kafka's ``TopicsDelta.localChanges``).

For every partition the delta changed, from the point of view of broker ``broker_id``:

- the broker is no longer a replica, but was one in the base image -> **delete** it;
- the broker is the leader and the partition epoch moved (or the partition is new) -> **leader**;
  when the leader epoch moved too it was (re-)**elected** (``elected_leaders`` is a subset of
  ``leaders``: a leader whose partition epoch alone moved only updates its ISR/replicas);
- the broker is another replica and the partition epoch moved (or it is new) -> **follower**.

Every partition of a topic the delta deleted that had the broker as a replica is a delete. A
topic deleted and re-created under the same name within one delta shows up in ``deletes`` and in
``leaders``/``followers``; the broker must handle deletes first (the ``topic_id`` in each
``PartitionInfo`` tells the incarnations apart).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

from pykraft.metadata.delta import MetadataDelta, TopicDelta
from pykraft.metadata.image import PartitionRegistration
from pykraft.storage.topic_partition import TopicPartition


@attrs.frozen
class PartitionInfo:
    """Kafka's ``LocalReplicaChanges.PartitionInfo``: the topic id and the new registration."""

    topic_id: str
    partition: PartitionRegistration

    @property
    def leader(self) -> int:
        return self.partition.leader

    @property
    def leader_epoch(self) -> int:
        return self.partition.leader_epoch

    @property
    def partition_epoch(self) -> int:
        return self.partition.partition_epoch

    @property
    def replicas(self) -> tuple[int, ...]:
        return self.partition.replicas

    @property
    def isr(self) -> tuple[int, ...]:
        return self.partition.isr


@attrs.frozen
class LocalReplicaChanges:
    deletes: frozenset[TopicPartition]
    # Invariant: elected_leaders is a subset of leaders.
    elected_leaders: Mapping[TopicPartition, PartitionInfo]
    leaders: Mapping[TopicPartition, PartitionInfo]
    followers: Mapping[TopicPartition, PartitionInfo]
    # topic name -> topic id, for every topic in leaders or followers.
    topic_ids: Mapping[str, str]

    def is_empty(self) -> bool:
        return not (self.deletes or self.leaders or self.followers)


def local_changes(delta: MetadataDelta, broker_id: int) -> LocalReplicaChanges:
    deletes: set[TopicPartition] = set()
    elected: dict[TopicPartition, PartitionInfo] = {}
    leaders: dict[TopicPartition, PartitionInfo] = {}
    followers: dict[TopicPartition, PartitionInfo] = {}
    topic_ids: dict[str, str] = {}
    for topic_delta in delta.topics.changed_topics.values():
        if _topic_changes(topic_delta, broker_id, deletes, elected, leaders, followers):
            topic_ids[topic_delta.name] = topic_delta.topic_id
    for topic_id in delta.topics.deleted_topic_ids:
        topic = delta.image.topics.by_id[topic_id]
        for partition_id, partition in topic.partitions.items():
            if broker_id in partition.replicas:
                deletes.add(TopicPartition(topic.name, partition_id))
    return LocalReplicaChanges(frozenset(deletes), elected, leaders, followers, topic_ids)


def _topic_changes(
    topic_delta: TopicDelta,
    broker_id: int,
    deletes: set[TopicPartition],
    elected: dict[TopicPartition, PartitionInfo],
    leaders: dict[TopicPartition, PartitionInfo],
    followers: dict[TopicPartition, PartitionInfo],
) -> bool:
    """Sort one topic's changed partitions; True if any became a leader or follower here."""
    hosted = False
    for partition_id, partition in topic_delta.partition_changes.items():
        key = TopicPartition(topic_delta.name, partition_id)
        previous = topic_delta.image.partitions.get(partition_id)
        if broker_id not in partition.replicas:
            if previous is not None and broker_id in previous.replicas:
                deletes.add(key)
            continue
        if previous is not None and previous.partition_epoch == partition.partition_epoch:
            continue  # Re-stated without a change: nothing for the replica to do.
        info = PartitionInfo(topic_delta.topic_id, partition)
        hosted = True
        if partition.leader == broker_id:
            leaders[key] = info
            if previous is None or previous.leader_epoch != partition.leader_epoch:
                elected[key] = info
        else:
            followers[key] = info
    return hosted
