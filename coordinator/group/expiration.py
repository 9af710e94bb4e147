"""Which committed offsets have expired (KIP-211): Kafka's ``GroupMetadata.removeExpiredOffsets``
and the new coordinator's ``ClassicGroup.offsetExpirationCondition`` /
``OffsetExpirationConditionImpl.isOffsetExpired``.

An offset expires ``offsets.retention.minutes`` after a *base timestamp*, which depends on the
group:

* a group with a protocol type and no members (EMPTY): the time the group became EMPTY (its
  ``current_state_timestamp``), so a consumer group keeps its offsets for the whole retention
  after its last member left, however old the commits are;
* a STABLE group of protocol type ``consumer`` that knows its subscribed topics: the commit
  timestamp, and only for partitions of topics no member subscribes to;
* a group without a protocol type (a "simple" consumer that only stores offsets): the commit
  timestamp;
* any other group (rebalancing, or members of another protocol type): nothing expires.

An offset committed with an explicit retention (OffsetCommit v2-v4's ``retention_time_ms``,
stored as an ``expire_timestamp``) expires at that timestamp instead (the pre-KIP-211 rule).
A partition with a commit still being written or in an open transaction does not expire
(Kafka 3.9 spares ``pendingOffsetCommits``; the new coordinator pending transactional offsets).

What expires is removed by ``deletion.GroupDeletion.expire_offsets`` the way OffsetDelete
removes offsets: tombstones to ``__consumer_offsets``, and an EMPTY group left without offsets
goes DEAD with a tombstone for its group record (``cleanupGroupMetadata``). Pure: time is a
parameter.
"""

from __future__ import annotations

from pykraft.coordinator.group.consumer_protocol import CONSUMER_PROTOCOL_TYPE
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.storage.topic_partition import TopicPartition


def expired_offsets(
    group: GroupMetadata, now_ms: int, offsets_retention_ms: int
) -> list[TopicPartition]:
    """The partitions of ``group`` whose committed offset has expired at ``now_ms``, sorted."""
    if group.protocol_type is not None and group.is_(GroupState.EMPTY):
        became_empty_ms: int | None = group.state_timestamp_ms
        subscribed: frozenset[str] = frozenset()
    elif (
        group.protocol_type == CONSUMER_PROTOCOL_TYPE
        and group.subscribed_topics is not None
        and group.is_(GroupState.STABLE)
    ):
        became_empty_ms, subscribed = None, group.subscribed_topics
    elif group.protocol_type is None:
        became_empty_ms, subscribed = None, frozenset()
    else:
        return []
    return [
        tp
        for tp, committed in sorted(group.offsets.items())
        if tp.topic not in subscribed
        and not group.has_pending_offset_commits_for(tp)
        and is_offset_expired(committed.value, became_empty_ms, now_ms, offsets_retention_ms)
    ]


def is_offset_expired(
    offset: OffsetAndMetadata, base_timestamp_ms: int | None, now_ms: int, retention_ms: int
) -> bool:
    """``isOffsetExpired``: ``base_timestamp_ms`` None means the commit timestamp."""
    if offset.expire_timestamp_ms is not None:
        return now_ms >= offset.expire_timestamp_ms
    base = offset.commit_timestamp_ms if base_timestamp_ms is None else base_timestamp_ms
    return now_ms - base >= retention_ms
