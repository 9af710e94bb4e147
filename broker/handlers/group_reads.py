"""The group APIs that only read: OffsetFetch, DescribeGroups, ListGroups (Kafka's
``KafkaApis.handleOffsetFetchRequest``, ``handleDescribeGroupsRequest``,
``handleListGroupsRequest``), each filtered by what the principal may DESCRIBE: a group it may
not describe answers GROUP_AUTHORIZATION_FAILED and nothing about it, a topic it may not
describe is refused or left out, and ListGroups lists every group only with DESCRIBE on the
cluster. ``broker.handlers.groups`` registers them.
"""

from __future__ import annotations

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
    for group in request.groups:
        if not authorizer.authorize(
            context, AclOperation.DESCRIBE, ResourceType.GROUP, group.group_id
        ):
            error = Errors.GROUP_AUTHORIZATION_FAILED
            fetched.append(FetchedGroup(group=group, error=error, offsets=[]))
            continue
        wanted = None if group.partitions is None else list(group.partitions)
        error, offsets = coordinator.fetch_offsets(group.group_id, wanted)
        described = authorizer.authorized(
            context, AclOperation.DESCRIBE, ResourceType.TOPIC, (tp.topic for tp, _ in offsets)
        )
        offsets = [(tp, o) for tp, o in offsets if tp.topic in described or wanted is not None]
        fetched.append(FetchedGroup(group=group, error=error, offsets=offsets))
    response = offset_fetch_response(request.version, fetched)
    _refuse_undescribed_topics(response, request.version, authorizer, context)
    return response


def _refuse_undescribed_topics(
    response: Any, version: int, authorizer: RequestAuthorizer, context: RequestContext
) -> None:
    """TOPIC_AUTHORIZATION_FAILED on the named partitions of topics not described, with
    nothing of what was committed (``fetchOffsetsForGroup``: offset -1, leader epoch -1, no
    metadata). A group refused keeps its GROUP_AUTHORIZATION_FAILED (v0-v1: on every
    partition, ``OffsetFetchResponse.groupError``)."""
    if not authorizer.enabled:
        return
    # v0-v7 answer one group at the top level (kafka-python's object has an empty ``groups``).
    holders = list(response.groups) if version >= 8 else [response]
    for holder in holders:
        if holder.error_code == Errors.GROUP_AUTHORIZATION_FAILED:
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
    groups the principal may DESCRIBE."""
    error, overviews = coordinator.list_groups(request.states_filter)
    if not authorizer.authorize_cluster(context, AclOperation.DESCRIBE):
        overviews = [
            g
            for g in overviews
            if authorizer.authorize(context, AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ]
    return list_groups_response(request.version, error, overviews)
