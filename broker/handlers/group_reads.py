"""The group APIs that only read: OffsetFetch, DescribeGroups, ListGroups (Kafka's
``KafkaApis.handleOffsetFetchRequest``, ``handleDescribeGroupsRequest``,
``handleListGroupsRequest``), each filtered by what the principal may DESCRIBE: a group it may
not describe answers GROUP_AUTHORIZATION_FAILED and nothing about it, a topic it may not
describe is refused or left out, and ListGroups lists every group only with DESCRIBE on the
cluster. ``broker.handlers.groups`` registers them.

OffsetFetch v7+ with ``require_stable`` (KIP-447): a partition whose commit is still pending
(a transaction not yet ended, a write in flight) answers UNSTABLE_OFFSET_COMMIT, which clients
retry, with no offset, instead of the last committed one (``GroupMetadataManager.getOffsets``).

OffsetFetch v0 read ZooKeeper: a group that may be described answers UNSUPPORTED_VERSION on
every partition asked for, as Kafka 3.9 in KRaft mode (``handleOffsetFetchRequestFromZookeeper``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.handlers.group_requests import (
    DescribeGroupsRequestData,
    ListGroupsRequestData,
    OffsetFetchRequestData,
)
from pykraft.broker.handlers.group_responses import (
    FetchedGroup,
    describe_groups_response,
    list_groups_response,
    offset_fetch_response,
)
from pykraft.broker.network import RequestContext
from pykraft.coordinator.group.manager import GroupSummary
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition


async def offset_fetch(
    coordinator: GroupCoordinatorShell,
    context: RequestContext,
    request: OffsetFetchRequestData,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
) -> Any:
    """``handleOffsetFetchRequest``: DESCRIBE on each group (else GROUP_AUTHORIZATION_FAILED);
    partitions asked for of topics not described answer TOPIC_AUTHORIZATION_FAILED, and the
    all-partitions form leaves such topics out."""
    fetched = []
    # Per group, the partitions answered with an error (UNSTABLE_OFFSET_COMMIT).
    partition_errors: list[dict[TopicPartition, Errors]] = []
    for group in request.groups:
        if not authorizer.authorize(
            context, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id
        ):
            error = Errors.GROUP_AUTHORIZATION_FAILED
            fetched.append(FetchedGroup(group=group, error=error, offsets=[]))
            partition_errors.append({})
            continue
        if request.version == 0:
            # Offsets in ZooKeeper: "Version 0 offset fetch requests" are unsupported in KRaft
            # mode (``handleOffsetFetchRequestFromZookeeper``), on every partition asked for.
            fetched.append(FetchedGroup(group=group, error=Errors.UNSUPPORTED_VERSION, offsets=[]))
            partition_errors.append({})
            continue
        wanted = None if group.partitions is None else list(group.partitions)
        error, found = coordinator.fetch_offsets(
            group.group_id,
            wanted,
            require_stable=request.require_stable,
            member_id=group.member_id,
            member_epoch=group.member_epoch,
        )
        described = authorizer.authorized(
            context,
            AclOperation.DESCRIBE,
            ResourceType.TOPIC,
            (f.topic_partition.topic for f in found),
        )
        found = [f for f in found if f.topic_partition.topic in described or wanted is not None]
        offsets = [(f.topic_partition, f.offset) for f in found]
        fetched.append(FetchedGroup(group=group, error=error, offsets=offsets))
        partition_errors.append(
            {f.topic_partition: f.error for f in found if f.error is not Errors.NONE}
        )
    response = offset_fetch_response(request.version, fetched)
    _set_partition_errors(response, request.version, partition_errors)
    _refuse_undescribed_topics(response, request.version, authorizer, context)
    return response


def _holders(response: Any, version: int) -> list[Any]:
    """Each group's part of the response (v0-v7 answer one group at the top level)."""
    return list(response.groups) if version >= 8 else [response]


def _set_partition_errors(
    response: Any, version: int, errors: Sequence[Mapping[TopicPartition, Errors]]
) -> None:
    """The per-partition errors the coordinator gave, group by group in request order."""
    for holder, group_errors in zip(_holders(response, version), errors, strict=True):
        if not group_errors:
            continue
        for topic in holder.topics or ():
            for partition in topic.partitions:
                tp = TopicPartition(topic.name, partition.partition_index)
                partition.error_code = group_errors.get(tp, partition.error_code)


# Errors answered on every partition of a group before its topics are looked at.
_WHOLE_GROUP_ERRORS = frozenset({Errors.GROUP_AUTHORIZATION_FAILED, Errors.UNSUPPORTED_VERSION})


def _refuse_undescribed_topics(
    response: Any, version: int, authorizer: RequestAuthorizer, context: RequestContext
) -> None:
    """TOPIC_AUTHORIZATION_FAILED on the named partitions of topics not described, with
    nothing of what was committed (``fetchOffsetsForGroup``: offset -1, leader epoch -1, no
    metadata). A group refused keeps its GROUP_AUTHORIZATION_FAILED (v0-v1: on every
    partition, ``OffsetFetchResponse.groupError``)."""
    if not authorizer.enabled:
        return
    for holder in _holders(response, version):
        if holder.error_code in _WHOLE_GROUP_ERRORS:
            continue
        for topic in holder.topics or ():
            if not authorizer.authorize(
                context, AclOperation.DESCRIBE, ResourceType.TOPIC, topic.name
            ):
                for partition in topic.partitions:
                    partition.committed_offset = -1
                    partition.committed_leader_epoch = -1
                    partition.metadata = ""
                    partition.error_code = Errors.TOPIC_AUTHORIZATION_FAILED


# ------------------------------------------------------------------ describe and list


_UNAUTHORIZED_GROUP = GroupSummary(state="", protocol_type="", protocol="")


async def describe_groups(
    coordinator: GroupCoordinatorShell,
    context: RequestContext,
    request: DescribeGroupsRequestData,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
) -> Any:
    """``handleDescribeGroupsRequest``: DESCRIBE on each group, else GROUP_AUTHORIZATION_FAILED
    with nothing about it; KIP-430 (v3+) the group's authorized operations when asked."""
    described: list[tuple[str, Errors, GroupSummary]] = []
    for group_id in request.groups:
        if authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id):
            described.append((group_id, *coordinator.describe_group(group_id)))
        else:
            described.append((group_id, Errors.GROUP_AUTHORIZATION_FAILED, _UNAUTHORIZED_GROUP))
    response = describe_groups_response(request.version, described)
    if request.include_authorized_operations:
        for group in response.groups:
            if group.error_code == Errors.NONE:
                group.authorized_operations = authorizer.authorized_operations(
                    context, ResourceType.GROUP, group.group_id
                )
    return response


async def list_groups(
    coordinator: GroupCoordinatorShell,
    context: RequestContext,
    request: ListGroupsRequestData,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
) -> Any:
    """``handleListGroupsRequest``: every group with DESCRIBE on the cluster, else only the
    groups the principal may DESCRIBE. A types filter keeps the groups of those types,
    "classic" or "consumer" (KIP-848), compared case-insensitively as Kafka 3.9's
    ``GroupMetadataManager.listGroups`` does."""
    error, overviews = coordinator.list_groups(request.states_filter)
    if request.types_filter:
        types = {t.lower() for t in request.types_filter}
        overviews = [g for g in overviews if g.group_type.lower() in types]
    if not authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
        overviews = [
            g
            for g in overviews
            if authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return list_groups_response(request.version, error, overviews)
