"""The topics a classic consumer group subscribes to, read from its members' JoinGroup metadata.

Kafka's ``GroupMetadata.computeSubscribedTopics``: only a group of protocol type ``consumer``
has subscriptions the broker understands. Each member's metadata for the group's chosen
protocol is a ``ConsumerProtocolSubscription``: int16 version, ``topics`` (an int32 count of
int16-length strings), ``user_data`` (nullable bytes), then what later versions append. Kafka
reads every version with the version-0 layout, and so does this module.

The answer is what OffsetDelete (KIP-496, ``GroupCoordinator.handleDeleteOffsets``) must keep:

* a consumer group without members subscribes to nothing (an empty set);
* a consumer group with members and a protocol: the union of their subscriptions;
* anything else (another protocol type, no protocol chosen yet, metadata that does not parse):
  unknown (None), which Kafka's ``isSubscribedToTopic`` takes as subscribed to every topic.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Protocol

CONSUMER_PROTOCOL_TYPE = "consumer"

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")


class _Member(Protocol):
    def metadata(self, protocol_name: str) -> bytes: ...


class _Group(Protocol):
    protocol_type: str | None
    protocol_name: str | None

    @property
    def members(self) -> Mapping[str, _Member]: ...


def subscribed_topics(group: _Group) -> frozenset[str] | None:
    """``computeSubscribedTopics`` of a group (``state.GroupMetadata``), at each generation
    and when the group is loaded."""
    protocol, members = group.protocol_name, list(group.members.values())
    if not members:
        return topics_of(group.protocol_type, [])
    if protocol is None:
        return topics_of(group.protocol_type, None)
    return topics_of(group.protocol_type, [m.metadata(protocol) for m in members])


def topics_of(
    protocol_type: str | None, member_metadata: Sequence[bytes] | None
) -> frozenset[str] | None:
    """``computeSubscribedTopics``: ``member_metadata`` is every member's metadata for the
    group's protocol, None when the group has members but no protocol chosen."""
    if protocol_type != CONSUMER_PROTOCOL_TYPE:
        return None
    if member_metadata is None:
        return None
    topics: set[str] = set()
    for metadata in member_metadata:
        subscription = _subscription_topics(metadata)
        if subscription is None:
            return None
        topics.update(subscription)
    return frozenset(topics)


def _subscription_topics(metadata: bytes) -> list[str] | None:
    """The ``topics`` of a ConsumerProtocolSubscription, None when it does not parse (Kafka's
    ``SchemaException``)."""
    parsed = _read_v0(metadata)
    return None if parsed is None else parsed[0]


def _read_v0(metadata: bytes) -> tuple[list[str], int] | None:
    """The version-0 fields' topics, and the position after them (after ``user_data``)."""
    try:
        (version,) = _INT16.unpack_from(metadata, 0)
        if version < 0:
            return None
        (count,) = _INT32.unpack_from(metadata, 2)
        if count < 0:
            return None
        position = 6
        topics = []
        for _ in range(count):
            (size,) = _INT16.unpack_from(metadata, position)
            position += 2
            if size < 0 or position + size > len(metadata):
                return None
            topics.append(metadata[position : position + size].decode("utf-8"))
            position += size
        # user_data (nullable bytes) closes the version-0 layout.
        (user_data_size,) = _INT32.unpack_from(metadata, position)
        if position + 4 + max(user_data_size, 0) > len(metadata) or user_data_size < -1:
            return None
    except (struct.error, UnicodeDecodeError):
        return None
    return topics, position + 4 + max(user_data_size, 0)


def owned_partitions(metadata: bytes) -> dict[str, frozenset[int]]:
    """A ConsumerProtocolSubscription's ``owned_partitions`` (v1+: [topic string, partitions
    [int32]] after ``user_data``), by topic name: what a cooperative classic member still owns
    when it rejoins. Version 0, or anything unreadable, owns nothing (Kafka's
    ``ConsumerProtocolSubscription.ownedPartitions()`` defaults to an empty list)."""
    return _read_v1(metadata)[0]


def subscription_rack(metadata: bytes) -> str | None:
    """A ConsumerProtocolSubscription's ``rack_id`` (v3+, after v2's ``generation_id``)."""
    return _read_v1(metadata)[1]


def _read_v1(metadata: bytes) -> tuple[dict[str, frozenset[int]], str | None]:
    parsed = _read_v0(metadata)
    if parsed is None:
        return {}, None
    version: int = _INT16.unpack_from(metadata, 0)[0]
    position = parsed[1]
    owned: dict[str, set[int]] = {}
    rack = None
    try:
        if version >= 1:
            (count,) = _INT32.unpack_from(metadata, position)
            position += 4
            for _ in range(max(count, 0)):
                name, position = _string(metadata, position)
                (partitions,) = _INT32.unpack_from(metadata, position)
                position += 4
                for _ in range(max(partitions, 0)):
                    owned.setdefault(name, set()).add(_INT32.unpack_from(metadata, position)[0])
                    position += 4
        if version >= 3:
            position += 4  # generation_id (v2+)
            (size,) = _INT16.unpack_from(metadata, position)
            rack = None if size < 0 else _string(metadata, position)[0]
    except (struct.error, UnicodeDecodeError):
        return {}, None
    return {name: frozenset(ps) for name, ps in sorted(owned.items())}, rack


def _string(data: bytes, position: int) -> tuple[str, int]:
    (size,) = _INT16.unpack_from(data, position)
    if size < 0 or position + 2 + size > len(data):
        raise struct.error("string past the end")
    return data[position + 2 : position + 2 + size].decode("utf-8"), position + 2 + size
