"""DeleteGroups (42, v0-v2, KIP-229) and OffsetDelete (47, v0, KIP-496) in front of the group
coordinator (``coordinator.group.deletion``) — Kafka's ``KafkaApis.handleDeleteGroupsRequest``
and ``handleOffsetDeleteRequest``. ``broker.handlers.groups`` registers them.

DeleteGroups: each group needs DELETE (else GROUP_AUTHORIZATION_FAILED for that group only);
the others are deleted, one result per distinct group id.

OffsetDelete: the group needs DELETE (else the whole answer is GROUP_AUTHORIZATION_FAILED with
no topics). Then per topic, in Kafka's order: READ on the topic (else TOPIC_AUTHORIZATION_FAILED
on its partitions), the topic known to the metadata (else UNKNOWN_TOPIC_OR_PARTITION on its
partitions), each partition known (else UNKNOWN_TOPIC_OR_PARTITION for it). What remains goes to
the coordinator; a group error there (GROUP_ID_NOT_FOUND, NON_EMPTY_GROUP, NOT_COORDINATOR, ...)
is the whole answer, with no topics, as Kafka's ``getErrorResponse``.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from pykraft.broker.authorization import ALLOW_EVERYTHING, RequestAuthorizer
from pykraft.broker.network import RequestContext
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

_DeleteGroups: Any = response_class(ApiKey.DELETE_GROUPS)
_OffsetDelete: Any = response_class(ApiKey.OFFSET_DELETE)


@attrs.frozen(kw_only=True)
class DeleteGroupsRequestData:
    version: int
    group_ids: tuple[str, ...]


@attrs.frozen(kw_only=True)
class OffsetDeleteRequestData:
    group_id: str
    # (topic, its partitions) in request order.
    topics: tuple[tuple[str, tuple[int, ...]], ...]


def delete_groups_request(message: Any) -> DeleteGroupsRequestData:
    return DeleteGroupsRequestData(
        version=message.version, group_ids=tuple(message.groups_names or ())
    )


def offset_delete_request(message: Any) -> OffsetDeleteRequestData:
    return OffsetDeleteRequestData(
        group_id=message.group_id,
        topics=tuple(
            (topic.name, tuple(p.partition_index for p in topic.partitions or ()))
            for topic in message.topics or ()
        ),
    )


async def delete_groups(
    coordinator: GroupCoordinatorShell,
    context: RequestContext,
    request: DeleteGroupsRequestData,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
) -> Any:
    """``handleDeleteGroupsRequest``: DELETE per group, the rest to the coordinator."""
    allowed = authorizer.authorized(
        context, AclOperation.DELETE, ResourceType.GROUP, request.group_ids
    )
    results = coordinator.delete_groups(g for g in request.group_ids if g in allowed)
    for group_id in request.group_ids:
        results.setdefault(group_id, Errors.GROUP_AUTHORIZATION_FAILED)
    return delete_groups_response(request.version, results)


def delete_groups_response(version: int, results: Mapping[str, Errors]) -> Any:
    return _DeleteGroups(
        version=version,
        throttle_time_ms=0,
        results=[
            _DeleteGroups.DeletableGroupResult(group_id=group_id, error_code=error)
            for group_id, error in results.items()
        ],
    )


async def offset_delete(
    coordinator: GroupCoordinatorShell,
    context: RequestContext,
    request: OffsetDeleteRequestData,
    image: MetadataImage,
    authorizer: RequestAuthorizer = ALLOW_EVERYTHING,
) -> Any:
    """``handleOffsetDeleteRequest``: DELETE on the group, READ per topic, known partitions."""
    if not authorizer.authorize(context, AclOperation.DELETE, ResourceType.GROUP, request.group_id):
        return offset_delete_response(Errors.GROUP_AUTHORIZATION_FAILED, {})
    readable = authorizer.authorized(
        context, AclOperation.READ, ResourceType.TOPIC, (name for name, _ in request.topics)
    )
    errors: dict[TopicPartition, Errors] = {}
    valid: list[TopicPartition] = []
    for name, partitions in request.topics:
        for index in partitions:
            tp = TopicPartition(name, index)
            if name not in readable:
                errors[tp] = Errors.TOPIC_AUTHORIZATION_FAILED
            elif not image.topics.contains(name, index):
                errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            else:
                valid.append(tp)
    group_error, deleted = coordinator.delete_offsets(request.group_id, valid)
    if group_error is not Errors.NONE:
        return offset_delete_response(group_error, {})
    errors.update(deleted)
    return offset_delete_response(Errors.NONE, errors)


def offset_delete_response(error: Errors, partitions: Mapping[TopicPartition, Errors]) -> Any:
    topic_class = _OffsetDelete.OffsetDeleteResponseTopic
    partition_class = topic_class.OffsetDeleteResponsePartition
    topics: dict[str, list[Any]] = {}
    for tp, partition_error in partitions.items():
        topics.setdefault(tp.topic, []).append(
            partition_class(partition_index=tp.partition, error_code=partition_error)
        )
    return _OffsetDelete(
        version=0,
        error_code=error,
        throttle_time_ms=0,
        topics=[topic_class(name=name, partitions=parts) for name, parts in topics.items()],
    )
