"""The group APIs' responses, built from the coordinator's typed results at a request's version.

The counterpart of ``group_requests.py``: the handlers decide with typed values, and only the
functions here touch kafka-python's response classes (which the listener encodes). Version
rules of the answers live here:

  FindCoordinator v4+  one entry per key asked for (KIP-699); earlier one answer
  JoinGroup < v7       the protocol name is a non-null string (``GroupCoordinator.NoProtocol``)
  LeaveGroup < v3      one error: the group's, else the first member's
                       (``LeaveGroupResponse.getError``); v3+ per member
  OffsetFetch          v1 carries a group error on every partition asked for; v2+ once for the
                       group; v8+ answers several groups
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import attrs

from pykraft.broker.handlers.group_requests import OffsetCommitRequestData, OffsetFetchGroup
from pykraft.coordinator.group.effects import JoinGroupResult, LeaveGroupResult, SyncGroupResult
from pykraft.coordinator.group.manager import GroupOverview, GroupSummary
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

NO_OFFSET = -1
NO_EPOCH = -1
# Group.GroupType.CLASSIC: every group this coordinator runs (no KIP-848 groups yet).
CLASSIC_GROUP_TYPE = "classic"

_FindCoordinator: Any = response_class(ApiKey.FIND_COORDINATOR)
_JoinGroup: Any = response_class(ApiKey.JOIN_GROUP)
_SyncGroup: Any = response_class(ApiKey.SYNC_GROUP)
_Heartbeat: Any = response_class(ApiKey.HEARTBEAT)
_LeaveGroup: Any = response_class(ApiKey.LEAVE_GROUP)
_OffsetCommit: Any = response_class(ApiKey.OFFSET_COMMIT)
_OffsetFetch: Any = response_class(ApiKey.OFFSET_FETCH)
_DescribeGroups: Any = response_class(ApiKey.DESCRIBE_GROUPS)
_ListGroups: Any = response_class(ApiKey.LIST_GROUPS)


@attrs.frozen(kw_only=True)
class FoundCoordinator:
    """One key's coordinator (Kafka's ``getCoordinator``); node -1 and no host on an error."""

    key: str
    error: Errors
    message: str | None
    node_id: int = -1
    host: str = ""
    port: int = -1


@attrs.frozen(kw_only=True)
class FetchedGroup:
    """One group's OffsetFetch answer: its error and the committed offsets asked for."""

    group: OffsetFetchGroup
    error: Errors
    offsets: Sequence[tuple[TopicPartition, OffsetAndMetadata | None]]


def find_coordinator_response(version: int, found: Sequence[FoundCoordinator]) -> Any:
    if version >= 4:
        coordinators = [
            _FindCoordinator.Coordinator(
                key=f.key,
                node_id=f.node_id,
                host=f.host,
                port=f.port,
                error_code=f.error,
                error_message=f.message,
            )
            for f in found
        ]
        return _FindCoordinator(version=version, throttle_time_ms=0, coordinators=coordinators)
    (only,) = found
    return _FindCoordinator(
        version=version,
        throttle_time_ms=0,
        error_code=only.error,
        error_message=only.message,
        node_id=only.node_id,
        host=only.host,
        port=only.port,
    )


def join_group_response(version: int, result: JoinGroupResult) -> Any:
    protocol_name = result.protocol_name if version >= 7 else (result.protocol_name or "")
    return _JoinGroup(
        version=version,
        throttle_time_ms=0,
        error_code=result.error,
        generation_id=result.generation_id,
        protocol_type=result.protocol_type,
        protocol_name=protocol_name,
        leader=result.leader_id,
        skip_assignment=result.skip_assignment,
        member_id=result.member_id,
        members=[
            _JoinGroup.JoinGroupResponseMember(
                member_id=m.member_id, group_instance_id=m.group_instance_id, metadata=m.metadata
            )
            for m in result.members
        ],
    )


def sync_group_response(version: int, result: SyncGroupResult) -> Any:
    return _SyncGroup(
        version=version,
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


def heartbeat_response(version: int, error: Errors) -> Any:
    return _Heartbeat(version=version, throttle_time_ms=0, error_code=error)


def leave_group_response(version: int, result: LeaveGroupResult) -> Any:
    if version < 3:
        return _LeaveGroup(version=version, throttle_time_ms=0, error_code=_leave_error(result))
    return _LeaveGroup(
        version=version,
        throttle_time_ms=0,
        error_code=result.error,
        members=[
            _LeaveGroup.MemberResponse(
                member_id=m.member_id, group_instance_id=m.group_instance_id, error_code=m.error
            )
            for m in result.members
        ],
    )


def _leave_error(result: LeaveGroupResult) -> Errors:
    if result.error is not Errors.NONE:
        return result.error
    return next((m.error for m in result.members if m.error is not Errors.NONE), Errors.NONE)


def offset_commit_response(
    request: OffsetCommitRequestData, errors: dict[TopicPartition, Errors]
) -> Any:
    """The same topics and partitions as ``request``, in its order, each with its error."""
    partition_class = _OffsetCommit.OffsetCommitResponseTopic.OffsetCommitResponsePartition
    return _OffsetCommit(
        version=request.version,
        throttle_time_ms=0,
        topics=[
            _OffsetCommit.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    partition_class(
                        partition_index=p.partition_index,
                        error_code=errors[TopicPartition(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


def offset_fetch_response(version: int, fetched: Sequence[FetchedGroup]) -> Any:
    if version >= 8:
        groups = [_fetched_group(group) for group in fetched]
        return _OffsetFetch(version=version, throttle_time_ms=0, groups=groups)
    (only,) = fetched
    offsets = only.offsets
    if only.error is not Errors.NONE and version < 2:
        # v1 has no group error: every partition asked for carries it.
        offsets = [(tp, None) for tp in only.group.partitions or ()]
    partition_error = only.error if version < 2 else Errors.NONE
    partition_class = _OffsetFetch.OffsetFetchResponseTopic.OffsetFetchResponsePartition
    topics = _by_topic(
        (
            tp.topic,
            partition_class(
                partition_index=tp.partition, error_code=partition_error, **_committed(value)
            ),
        )
        for tp, value in offsets
    )
    return _OffsetFetch(
        version=version,
        throttle_time_ms=0,
        error_code=only.error,
        topics=[
            _OffsetFetch.OffsetFetchResponseTopic(name=name, partitions=parts)
            for name, parts in topics.items()
        ],
    )


def _fetched_group(fetched: FetchedGroup) -> Any:
    group_class = _OffsetFetch.OffsetFetchResponseGroup
    topic_class = group_class.OffsetFetchResponseTopics
    topics = _by_topic(
        (
            tp.topic,
            topic_class.OffsetFetchResponsePartitions(
                partition_index=tp.partition, error_code=Errors.NONE, **_committed(value)
            ),
        )
        for tp, value in fetched.offsets
    )
    return group_class(
        group_id=fetched.group.group_id,
        error_code=fetched.error,
        topics=[topic_class(name=name, partitions=parts) for name, parts in topics.items()],
    )


def _by_topic(partitions: Iterable[tuple[str, Any]]) -> dict[str, list[Any]]:
    """Response partitions grouped under their topic, topics in order of first appearance."""
    topics: dict[str, list[Any]] = {}
    for name, partition in partitions:
        topics.setdefault(name, []).append(partition)
    return topics


def _committed(value: OffsetAndMetadata | None) -> dict[str, Any]:
    if value is None:
        return {"committed_offset": NO_OFFSET, "committed_leader_epoch": NO_EPOCH, "metadata": ""}
    return {
        "committed_offset": value.offset,
        "committed_leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
    }


def describe_groups_response(
    version: int, described: Sequence[tuple[str, Errors, GroupSummary]]
) -> Any:
    member_class = _DescribeGroups.DescribedGroup.DescribedGroupMember
    return _DescribeGroups(
        version=version,
        throttle_time_ms=0,
        groups=[
            _DescribeGroups.DescribedGroup(
                error_code=error,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=[
                    member_class(
                        member_id=m.member_id,
                        group_instance_id=m.group_instance_id,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
            )
            for group_id, error, summary in described
        ],
    )


def list_groups_response(version: int, error: Errors, overviews: Iterable[GroupOverview]) -> Any:
    return _ListGroups(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        groups=[
            _ListGroups.ListedGroup(
                group_id=g.group_id,
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,  # v5+ (KIP-848)
            )
            for g in overviews
        ],
    )
