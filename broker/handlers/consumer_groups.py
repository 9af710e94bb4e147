"""The consumer group protocol's APIs (KIP-848): ConsumerGroupHeartbeat (68) and
ConsumerGroupDescribe (69), v0 as Kafka 3.9 serves them, in front of the group coordinator
(``coordinator.group.unified``).

Both answer UNSUPPORTED_VERSION when ``group.coordinator.rebalance.protocols`` leaves ``consumer``
out (``KafkaApis.isConsumerGroupProtocolEnabled``).

Kafka 3.9's ``KafkaApis.handleConsumerGroupHeartbeat``: READ on the group, else
GROUP_AUTHORIZATION_FAILED; the request goes to the coordinator with the client's id and host.
Topic ids cross the wire as uuids and are the image's Kafka base64 strings inside.

``handleConsumerGroupDescribe``: DESCRIBE on each group, else that group is
GROUP_AUTHORIZATION_FAILED; each member's current and target assignment with topic names from
the image (a topic deleted since is left out); the authorized operations when asked (KIP-430).
Kafka 3.9 checks no topic permission in either API (4.x adds TOPIC_AUTHORIZATION_FAILED for
subscriptions the principal may not describe); neither does pykraft.
"""

from __future__ import annotations

import uuid
from collections.abc import Mapping
from typing import Any

from pykraft.broker.handlers.services import BrokerServices, topic_id_string
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.coordinator.group.consumer_group import ConsumerGroup
from pykraft.coordinator.group.consumer_heartbeat import (
    CONSUMER_PROTOCOL,
    ConsumerGroupHeartbeatRequest,
)
from pykraft.coordinator.group.consumer_member import ConsumerGroupMember
from pykraft.coordinator.group.effects import ConsumerGroupHeartbeatResult
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.auth.authorizer import operations_bitfield
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import kafka_string_to_uuid
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_HEARTBEAT = response_class(ApiKey.CONSUMER_GROUP_HEARTBEAT)
_DESCRIBE = response_class(ApiKey.CONSUMER_GROUP_DESCRIBE)


def consumer_group_handlers(
    services: BrokerServices, coordinator: GroupCoordinatorShell
) -> dict[ApiKey, ApiHandler]:
    authorizer = services.authorizer
    enabled = CONSUMER_PROTOCOL in coordinator.core.consumer.consumer_config.rebalance_protocols

    async def heartbeat(context: RequestContext, request: Any) -> Any:
        if not enabled:
            refused = ConsumerGroupHeartbeatResult(error=Errors.UNSUPPORTED_VERSION)
            return heartbeat_response(refused)
        if not authorizer.authorize(
            context, AclOperation.READ, ResourceType.GROUP, request.group_id
        ):
            return heartbeat_response(
                ConsumerGroupHeartbeatResult(error=Errors.GROUP_AUTHORIZATION_FAILED)
            )
        result = await coordinator.consumer_group_heartbeat(heartbeat_request(context, request))
        return heartbeat_response(result)

    async def describe(context: RequestContext, request: Any) -> Any:
        image = services.metadata()
        groups = []
        for group_id in request.group_ids:
            if not enabled:
                groups.append(_failed_group(group_id, Errors.UNSUPPORTED_VERSION))
                continue
            if not authorizer.authorize(
                context, AclOperation.DESCRIBE, ResourceType.GROUP, group_id
            ):
                groups.append(_failed_group(group_id, Errors.GROUP_AUTHORIZATION_FAILED))
                continue
            error, group = coordinator.describe_consumer_group(group_id)
            if group is None:
                groups.append(_failed_group(group_id, error))
                continue
            described = described_group(group, image)
            if request.include_authorized_operations:
                operations = authorizer.authorized_operations(context, ResourceType.GROUP, group_id)
                # The schema's int32: bit n set when operation code n is allowed (KIP-430).
                described.authorized_operations = operations_bitfield(operations)
            groups.append(described)
        return _DESCRIBE(version=0, throttle_time_ms=0, groups=groups)

    return {
        ApiKey.CONSUMER_GROUP_HEARTBEAT: kafka_python_handler(heartbeat),
        ApiKey.CONSUMER_GROUP_DESCRIBE: kafka_python_handler(describe),
    }


# ------------------------------------------------------------------ heartbeat


def heartbeat_request(context: RequestContext, request: Any) -> ConsumerGroupHeartbeatRequest:
    """The wire request as the coordinator's value (null fields stay None: unchanged)."""
    owned = None
    if request.topic_partitions is not None:
        owned = {
            topic_id_string(entry.topic_id): frozenset(entry.partitions)
            for entry in request.topic_partitions
        }
    names = request.subscribed_topic_names
    return ConsumerGroupHeartbeatRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        member_epoch=request.member_epoch,
        instance_id=request.instance_id,
        rack_id=request.rack_id,
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        subscribed_topic_names=None if names is None else tuple(names),
        subscribed_topic_regex=request.subscribed_topic_regex,
        server_assignor=request.server_assignor,
        topic_partitions=owned,
        client_id=context.header.client_id or "",
        client_host=f"/{context.client_host}",
    )


def _wire_topic_id(topic_id: str) -> uuid.UUID:
    return uuid.UUID(bytes=kafka_string_to_uuid(topic_id))


def heartbeat_response(result: ConsumerGroupHeartbeatResult) -> Any:
    assignment = None
    if result.assignment is not None:
        topic_partitions = _HEARTBEAT.Assignment.TopicPartitions
        assignment = _HEARTBEAT.Assignment(
            topic_partitions=[
                topic_partitions(topic_id=_wire_topic_id(topic_id), partitions=sorted(partitions))
                for topic_id, partitions in sorted(result.assignment.items())
            ]
        )
    return _HEARTBEAT(
        version=0,
        throttle_time_ms=0,
        error_code=result.error,
        error_message=result.error_message,
        member_id=result.member_id,
        member_epoch=result.member_epoch,
        heartbeat_interval_ms=result.heartbeat_interval_ms,
        assignment=assignment,
    )


# ------------------------------------------------------------------ describe


def _failed_group(group_id: str, error: Errors) -> Any:
    return _DESCRIBE.DescribedGroup(
        error_code=error,
        error_message=None,
        group_id=group_id,
        group_state="",
        group_epoch=0,
        assignment_epoch=0,
        assignor_name="",
        members=[],
    )


def _assignment(assignment: Mapping[str, frozenset[int]], image: MetadataImage) -> Any:
    member = _DESCRIBE.DescribedGroup.Member
    topics = []
    for topic_id, partitions in sorted(assignment.items()):
        topic = image.topics.by_id.get(topic_id)
        if topic is None or not partitions:
            continue
        topics.append(
            member.Assignment.TopicPartitions(
                topic_id=_wire_topic_id(topic_id),
                topic_name=topic.name,
                partitions=sorted(partitions),
            )
        )
    return member.Assignment(topic_partitions=topics)


def _member(group: ConsumerGroup, member: ConsumerGroupMember, image: MetadataImage) -> Any:
    return _DESCRIBE.DescribedGroup.Member(
        member_id=member.member_id,
        instance_id=member.instance_id,
        rack_id=member.rack_id,
        member_epoch=member.member_epoch,
        client_id=member.client_id,
        client_host=member.client_host,
        subscribed_topic_names=list(member.subscribed_topic_names),
        subscribed_topic_regex=member.subscribed_topic_regex,
        assignment=_assignment(member.assigned_partitions, image),
        target_assignment=_assignment(group.target_of(member.member_id), image),
    )


def described_group(group: ConsumerGroup, image: MetadataImage) -> Any:
    """``ConsumerGroup.asDescribedGroup``."""
    return _DESCRIBE.DescribedGroup(
        error_code=Errors.NONE,
        error_message=None,
        group_id=group.group_id,
        group_state=group.state.value,
        group_epoch=group.group_epoch,
        assignment_epoch=group.assignment_epoch,
        assignor_name=group.assignor_name,
        members=[_member(group, m, image) for _, m in sorted(group.members.items())],
    )
