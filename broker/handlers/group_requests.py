"""The group APIs' requests as small typed values, read once from kafka-python's objects.

kafka-python decodes a request body into an object whose fields depend on the version; reading
it all over the handlers meant ``Any`` everywhere and version rules scattered through the
logic. Each ``*_request`` function here reads one API's object into a frozen value (named after
Kafka's generated ``*RequestData``), applying the version rules once: a field the version does
not carry gets the value Kafka's handler assumes for it (``KafkaApis`` / ``GroupCoordinator``):

  JoinGroup v0         no rebalance timeout: the session timeout serves as one
  JoinGroup v5+, SyncGroup / Heartbeat v3+, LeaveGroup v3+, OffsetCommit v7+:
                       ``group.instance.id``; earlier versions have none (None)
  SyncGroup v5+        protocol type and name; earlier None (not checked)
  LeaveGroup v0-v2     one member, ``member_id``, with no instance id
  FindCoordinator v0   the key type is GROUP; v4+ batches keys (KIP-699)
  OffsetCommit         ``retention_time_ms`` only v2-v4 (else -1: the broker default);
                       ``committed_leader_epoch`` from v6 (else -1); ``commit_timestamp`` only
                       v1 (else -1: the broker's time); v0 has no generation or member
                       (-1, "") — its offsets were ZooKeeper's (``groups.offset_commit``)
  OffsetFetch v7+      ``require_stable`` (KIP-447); earlier False
  OffsetFetch v8+      several groups; earlier one group
  ListGroups v4+       a states filter, case-insensitive as Kafka 3.9's ``handleListGroups``
                       (read into the coordinator's state names); earlier none (every state)
  ListGroups v5+       a group type filter (KIP-848), lower-cased as ``GroupType.parse``
                       reads it; earlier none
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pykraft.coordinator.group.state import GroupState, Protocol
from pykraft.storage.topic_partition import TopicPartition

GROUP_KEY_TYPE = 0
NO_EPOCH = -1
NO_RETENTION = -1
# Lower-cased state name -> the coordinator's (Kafka's) spelling; an unknown name matches none.
_STATE_NAMES: Mapping[str, str] = {state.value.lower(): state.value for state in GroupState}
# OffsetCommitRequest.DEFAULT_TIMESTAMP: the coordinator stamps the commit with its own time.
DEFAULT_COMMIT_TIMESTAMP = -1


@attrs.frozen(kw_only=True)
class FindCoordinatorRequestData:
    version: int
    keys: tuple[str, ...]
    key_type: int


@attrs.frozen(kw_only=True)
class JoinGroupRequestData:
    version: int
    group_id: str
    member_id: str
    group_instance_id: str | None
    session_timeout_ms: int
    rebalance_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]


@attrs.frozen(kw_only=True)
class SyncGroupRequestData:
    version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str | None
    protocol_name: str | None
    # Member id -> its assignment, as the leader sent them.
    assignments: Mapping[str, bytes]


@attrs.frozen(kw_only=True)
class HeartbeatRequestData:
    version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None


@attrs.frozen(kw_only=True)
class LeaveGroupRequestData:
    version: int
    group_id: str
    # (member id, group instance id) of each member leaving.
    members: tuple[tuple[str, str | None], ...]


@attrs.frozen(kw_only=True)
class OffsetCommitPartition:
    partition_index: int
    committed_offset: int
    committed_leader_epoch: int
    committed_metadata: str | None
    # OffsetCommit v1 only (its ``CommitTimestamp``); DEFAULT_COMMIT_TIMESTAMP otherwise.
    commit_timestamp_ms: int = DEFAULT_COMMIT_TIMESTAMP


@attrs.frozen(kw_only=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@attrs.frozen(kw_only=True)
class OffsetCommitRequestData:
    version: int
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    retention_time_ms: int
    # In request order: the response lists the same topics and partitions.
    topics: tuple[OffsetCommitTopic, ...]


@attrs.frozen(kw_only=True)
class OffsetFetchGroup:
    group_id: str
    # None: every partition the group has committed.
    partitions: tuple[TopicPartition, ...] | None
    # v9+ (KIP-848): the asking member of a consumer group; None / -1 for anyone else.
    member_id: str | None = None
    member_epoch: int = -1


@attrs.frozen(kw_only=True)
class OffsetFetchRequestData:
    version: int
    groups: tuple[OffsetFetchGroup, ...]
    # KIP-447: answer UNSTABLE_OFFSET_COMMIT where a transactional commit is pending.
    require_stable: bool = False


@attrs.frozen(kw_only=True)
class DescribeGroupsRequestData:
    version: int
    groups: tuple[str, ...]
    # KIP-430 (v3+): answer each group's authorized operations.
    include_authorized_operations: bool = False


@attrs.frozen(kw_only=True)
class ListGroupsRequestData:
    version: int
    states_filter: frozenset[str]
    # Lower-cased group types (KIP-848); empty: every type.
    types_filter: frozenset[str] = frozenset()


def find_coordinator_request(message: Any) -> FindCoordinatorRequestData:
    version = message.version
    return FindCoordinatorRequestData(
        version=version,
        keys=tuple(message.coordinator_keys) if version >= 4 else (message.key,),
        key_type=message.key_type if version >= 1 else GROUP_KEY_TYPE,
    )


def join_group_request(message: Any) -> JoinGroupRequestData:
    version = message.version
    return JoinGroupRequestData(
        version=version,
        group_id=message.group_id,
        member_id=message.member_id,
        group_instance_id=message.group_instance_id if version >= 5 else None,
        session_timeout_ms=message.session_timeout_ms,
        rebalance_timeout_ms=(
            message.rebalance_timeout_ms if version >= 1 else message.session_timeout_ms
        ),
        protocol_type=message.protocol_type,
        protocols=tuple(Protocol(p.name, bytes(p.metadata)) for p in message.protocols),
    )


def sync_group_request(message: Any) -> SyncGroupRequestData:
    version = message.version
    return SyncGroupRequestData(
        version=version,
        group_id=message.group_id,
        generation_id=message.generation_id,
        member_id=message.member_id,
        group_instance_id=message.group_instance_id if version >= 3 else None,
        protocol_type=message.protocol_type if version >= 5 else None,
        protocol_name=message.protocol_name if version >= 5 else None,
        assignments={a.member_id: bytes(a.assignment) for a in message.assignments},
    )


def heartbeat_request(message: Any) -> HeartbeatRequestData:
    version = message.version
    return HeartbeatRequestData(
        version=version,
        group_id=message.group_id,
        generation_id=message.generation_id,
        member_id=message.member_id,
        group_instance_id=message.group_instance_id if version >= 3 else None,
    )


def leave_group_request(message: Any) -> LeaveGroupRequestData:
    version = message.version
    if version >= 3:
        members = tuple((m.member_id, m.group_instance_id) for m in message.members)
    else:
        members = ((message.member_id, None),)
    return LeaveGroupRequestData(version=version, group_id=message.group_id, members=members)


def offset_commit_request(message: Any) -> OffsetCommitRequestData:
    version = message.version
    return OffsetCommitRequestData(
        version=version,
        group_id=message.group_id,
        generation_id=message.generation_id_or_member_epoch,
        member_id=message.member_id,
        group_instance_id=message.group_instance_id if version >= 7 else None,
        retention_time_ms=message.retention_time_ms if 2 <= version <= 4 else NO_RETENTION,
        topics=tuple(
            OffsetCommitTopic(
                name=topic.name,
                partitions=tuple(
                    OffsetCommitPartition(
                        partition_index=p.partition_index,
                        committed_offset=p.committed_offset,
                        committed_leader_epoch=(
                            p.committed_leader_epoch if version >= 6 else NO_EPOCH
                        ),
                        committed_metadata=p.committed_metadata,
                        commit_timestamp_ms=(
                            p.commit_timestamp if version == 1 else DEFAULT_COMMIT_TIMESTAMP
                        ),
                    )
                    for p in topic.partitions
                ),
            )
            for topic in message.topics
        ),
    )


def offset_fetch_request(message: Any) -> OffsetFetchRequestData:
    version = message.version
    if version >= 8:
        groups = tuple(
            OffsetFetchGroup(
                group_id=g.group_id,
                partitions=_partitions(g.topics),
                member_id=g.member_id if version >= 9 else None,
                member_epoch=g.member_epoch if version >= 9 else -1,
            )
            for g in message.groups
        )
    else:
        groups = (
            OffsetFetchGroup(group_id=message.group_id, partitions=_partitions(message.topics)),
        )
    return OffsetFetchRequestData(
        version=version,
        groups=groups,
        require_stable=bool(version >= 7 and message.require_stable),
    )


def _partitions(topics: Iterable[Any] | None) -> tuple[TopicPartition, ...] | None:
    if topics is None:
        return None
    return tuple(TopicPartition(t.name, index) for t in topics for index in t.partition_indexes)


def describe_groups_request(message: Any) -> DescribeGroupsRequestData:
    return DescribeGroupsRequestData(
        version=message.version,
        groups=tuple(message.groups),
        include_authorized_operations=bool(
            message.version >= 3 and message.include_authorized_operations
        ),
    )


def list_groups_request(message: Any) -> ListGroupsRequestData:
    version = message.version
    states = (
        frozenset(_STATE_NAMES.get(s.lower(), s) for s in message.states_filter or ())
        if version >= 4
        else frozenset()
    )
    types = (
        frozenset(t.lower() for t in message.types_filter or ()) if version >= 5 else frozenset()
    )
    return ListGroupsRequestData(version=version, states_filter=states, types_filter=types)
