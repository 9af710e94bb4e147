"""Pending changes to topics and partitions (Kafka's ``TopicsDelta`` and ``TopicDelta``).

A ``TopicsDelta`` remembers, against a base ``TopicsImage``: the topics it touched (each a
``TopicDelta`` holding the new registrations of the partitions it touched), the topics it created
and the base topics it deleted. ``apply()`` writes only those into the base's HAMT maps, so the
untouched topics and partitions are shared with the base image.

Replay refuses records that would corrupt the image — a partition of an unknown topic, a change to
an unknown partition, a second topic with a live id or name — with ``MetadataReplayError``, and
checks before it changes anything, so a refused record leaves the delta as it was.
"""

from __future__ import annotations

from collections.abc import Mapping

from immutables import Map

from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import PartitionRegistration, TopicImage, TopicsImage
from pykraft.metadata.records import (
    PartitionChangeRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
)


class TopicDelta:
    """The changed partitions of one topic; ``image`` is the topic as the base image had it."""

    def __init__(self, image: TopicImage) -> None:
        self.image = image
        self.partition_changes: dict[int, PartitionRegistration] = {}

    @property
    def name(self) -> str:
        return self.image.name

    @property
    def topic_id(self) -> str:
        return self.image.topic_id

    def partition(self, partition_id: int) -> PartitionRegistration | None:
        """The partition as it stands after the replayed records."""
        changed = self.partition_changes.get(partition_id)
        return changed if changed is not None else self.image.partitions.get(partition_id)

    def new_partitions(self) -> dict[int, PartitionRegistration]:
        """Partitions this delta created (absent from the base topic)."""
        return {
            partition_id: partition
            for partition_id, partition in self.partition_changes.items()
            if partition_id not in self.image.partitions
        }

    def apply(self) -> TopicImage:
        if not self.partition_changes:
            return self.image
        if not self.image.partitions:  # a new topic: build the map in one go
            return TopicImage(
                name=self.name, topic_id=self.topic_id, partitions=Map(self.partition_changes)
            )
        partitions = self.image.partitions.mutate()
        for partition_id, partition in self.partition_changes.items():
            partitions[partition_id] = partition
        return TopicImage(name=self.name, topic_id=self.topic_id, partitions=partitions.finish())


class TopicsDelta:
    def __init__(self, image: TopicsImage) -> None:
        self.image = image
        # Topics touched by this delta, by id; a deleted topic is not here.
        self.changed_topics: dict[str, TopicDelta] = {}
        # Invariant: every id here is in image.by_id (a topic created and deleted within this
        # delta leaves no trace, as in Kafka).
        self.deleted_topic_ids: set[str] = set()
        self.created_topic_ids: set[str] = set()
        # Names of the topics created by this delta and still live (name -> id), so a
        # duplicate-name check costs O(1) even when a snapshot creates 100,000 topics.
        self._created_names: dict[str, str] = {}

    def topic(self, topic_id: str) -> TopicDelta | None:
        """The live topic with this id after the replayed records, as a TopicDelta."""
        topic_delta = self.changed_topics.get(topic_id)
        if topic_delta is not None:
            return topic_delta
        base = self.image.by_id.get(topic_id)
        if base is None or topic_id in self.deleted_topic_ids:
            return None
        # Not registered in changed_topics until a record actually changes it.
        return TopicDelta(base)

    def topic_was_deleted(self, name: str) -> bool:
        """True if the base topic of this name was deleted (even if a new one took the name)."""
        base = self.image.by_name.get(name)
        return base is not None and base.topic_id in self.deleted_topic_ids

    def replay_topic(self, record: TopicRecord) -> None:
        if record.topic_id in self.image.by_id or record.topic_id in self.changed_topics:
            raise MetadataReplayError(record, f"topic id {record.topic_id} is already in use")
        if self._name_is_live(record.name):
            raise MetadataReplayError(record, f"a topic named {record.name!r} already exists")
        self.changed_topics[record.topic_id] = TopicDelta(
            TopicImage(name=record.name, topic_id=record.topic_id)
        )
        self.created_topic_ids.add(record.topic_id)
        self._created_names[record.name] = record.topic_id

    def _name_is_live(self, name: str) -> bool:
        base = self.image.by_name.get(name)
        if base is not None and base.topic_id not in self.deleted_topic_ids:
            return True
        return name in self._created_names

    def replay_partition(self, record: PartitionRecord) -> None:
        topic_delta = self._live_topic(record, record.topic_id)
        try:
            partition = PartitionRegistration.from_record(record)
        except ValueError as exc:
            raise MetadataReplayError(record, str(exc)) from None
        topic_delta.partition_changes[record.partition_id] = partition
        self.changed_topics[record.topic_id] = topic_delta

    def replay_partition_change(self, record: PartitionChangeRecord) -> None:
        topic_delta = self._live_topic(record, record.topic_id)
        previous = topic_delta.partition(record.partition_id)
        if previous is None:
            raise MetadataReplayError(
                record, f"partition {record.partition_id} of topic {topic_delta.name!r} is unknown"
            )
        try:
            partition = previous.merge(record)
        except ValueError as exc:
            raise MetadataReplayError(record, str(exc)) from None
        topic_delta.partition_changes[record.partition_id] = partition
        self.changed_topics[record.topic_id] = topic_delta

    def replay_remove_topic(self, record: RemoveTopicRecord) -> str:
        """Delete the topic; returns its name so the caller can drop the topic's configs."""
        topic_delta = self._live_topic(record, record.topic_id)
        self.changed_topics.pop(record.topic_id, None)
        if record.topic_id in self.image.by_id:
            self.deleted_topic_ids.add(record.topic_id)
        if record.topic_id in self.created_topic_ids:
            self.created_topic_ids.discard(record.topic_id)
            del self._created_names[topic_delta.name]
        return topic_delta.name

    def _live_topic(
        self, record: PartitionRecord | PartitionChangeRecord | RemoveTopicRecord, topic_id: str
    ) -> TopicDelta:
        topic_delta = self.topic(topic_id)
        if topic_delta is None:
            raise MetadataReplayError(record, f"topic id {topic_id} is unknown")
        return topic_delta

    def apply(self) -> TopicsImage:
        if not self.changed_topics and not self.deleted_topic_ids:
            return self.image
        by_id = self.image.by_id.mutate()
        by_name = self.image.by_name.mutate()
        # Deletes first: a new topic may reuse a deleted topic's name in the same delta.
        for topic_id in self.deleted_topic_ids:
            deleted = self.image.by_id[topic_id]
            del by_id[topic_id]
            del by_name[deleted.name]
        for topic_id, topic_delta in self.changed_topics.items():
            topic = topic_delta.apply()
            by_id[topic_id] = topic
            by_name[topic.name] = topic
        return TopicsImage(by_id=by_id.finish(), by_name=by_name.finish())

    @classmethod
    def between(cls, base: TopicsImage, target: TopicsImage) -> TopicsDelta:
        """A delta that turns ``base`` into ``target`` (used when a snapshot replaces an image).

        Shared (identical) topic and partition objects are skipped by identity, so comparing an
        image with its descendant costs little.
        """
        delta = cls(base)
        for topic_id in base.by_id:
            if topic_id not in target.by_id:
                delta.deleted_topic_ids.add(topic_id)
        for topic_id, topic in target.by_id.items():
            old = base.by_id.get(topic_id)
            if old is topic:
                continue
            if old is None:
                delta.created_topic_ids.add(topic_id)
                delta._created_names[topic.name] = topic_id
                old = TopicImage(name=topic.name, topic_id=topic_id)
            topic_delta = TopicDelta(old)
            topic_delta.partition_changes.update(_changed_partitions(old.partitions, topic))
            delta.changed_topics[topic_id] = topic_delta
        return delta


def _changed_partitions(
    old: Mapping[int, PartitionRegistration], topic: TopicImage
) -> dict[int, PartitionRegistration]:
    return {
        partition_id: partition
        for partition_id, partition in topic.partitions.items()
        if old.get(partition_id) is not partition and old.get(partition_id) != partition
    }
