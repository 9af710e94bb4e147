"""Group APIs: FindCoordinator, JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit,
OffsetFetch, DescribeGroups, ListGroups — Kafka's ``KafkaApis`` handlers in front of the group
coordinator (``coordinator.group.shell.GroupCoordinatorShell``).

FindCoordinator (v0-v4; v4 batches keys, KIP-699): a group's coordinator is the leader of
partition ``Utils.abs(groupId.hashCode) % offsets.topic.num.partitions`` of
``__consumer_offsets``, an alive broker reachable on the request's listener. While the topic does
not exist the broker asks the controller to create it (``offsets.topic.num.partitions``
partitions, replication factor ``min(offsets.topic.replication.factor, alive brokers)``,
``cleanup.policy=compact``) and answers COORDINATOR_NOT_AVAILABLE, which clients retry (Kafka's
``AutoTopicCreationManager``). Transactional ids (key type 1): pykraft has no transaction
coordinator, so COORDINATOR_NOT_AVAILABLE; other key types are INVALID_REQUEST.

Static membership (``group.instance.id`` in JoinGroup v5+, SyncGroup/Heartbeat v3+,
OffsetCommit v7+) is answered UNSUPPORTED_VERSION, as Kafka does when the inter-broker protocol
does not allow it (below 2.3): clients then fail with a clear error instead of running static
members as dynamic ones. Clients without ``group.instance.id`` (the default everywhere) never
see it.

OffsetCommit: partitions of topics the metadata does not know are UNKNOWN_TOPIC_OR_PARTITION;
``retention_time_ms`` (v2-v4) sets the offset's expire timestamp (pykraft does not expire
offsets yet). OffsetFetch v8+ answers several groups per request; v1 reports a group error on
every partition asked for, v2+ once for the group, as Kafka does.

Requests reach the handlers as typed values (``group_requests.py`` reads kafka-python's objects
and applies the version rules); the responses are still built as kafka-python objects.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from broker.controller_api import ControllerError, NewTopic
from broker.handlers.group_requests import (
    GROUP_KEY_TYPE,
    NO_EPOCH,
    NO_RETENTION,
    DescribeGroupsRequestData,
    FindCoordinatorRequestData,
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    ListGroupsRequestData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    OffsetFetchGroup,
    OffsetFetchRequestData,
    SyncGroupRequestData,
    describe_groups_request,
    find_coordinator_request,
    heartbeat_request,
    join_group_request,
    leave_group_request,
    list_groups_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)
from broker.handlers.services import BrokerServices, node_endpoint
from broker.kafka_apis import ApiHandler, kafka_python_handler
from broker.network import RequestContext
from common.errors import Errors
from common.topic_partition import TopicPartition
from coordinator.group.coordinator import JoinGroupRequest
from coordinator.group.effects import JoinGroupResult, LeaveGroupResult
from coordinator.group.offsets import OFFSETS_TOPIC
from coordinator.group.records import OffsetAndMetadata
from coordinator.group.shell import GroupCoordinatorShell
from protocol.api_keys import ApiKey
from protocol.apis import response_class

logger = logging.getLogger(__name__)

TRANSACTION_KEY_TYPE = 1
# Kafka's GroupCoordinator.offsetsTopicConfigs, plus retention.ms=-1: pykraft has no log
# cleaner yet, so nothing may delete the segments compaction would have kept.
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": str(100 * 1024 * 1024),
    "retention.ms": "-1",
}
NO_OFFSET = -1

_FindCoordinator: Any = response_class(ApiKey.FIND_COORDINATOR)
_JoinGroup: Any = response_class(ApiKey.JOIN_GROUP)
_SyncGroup: Any = response_class(ApiKey.SYNC_GROUP)
_Heartbeat: Any = response_class(ApiKey.HEARTBEAT)
_LeaveGroup: Any = response_class(ApiKey.LEAVE_GROUP)
_OffsetCommit: Any = response_class(ApiKey.OFFSET_COMMIT)
_OffsetFetch: Any = response_class(ApiKey.OFFSET_FETCH)
_DescribeGroups: Any = response_class(ApiKey.DESCRIBE_GROUPS)
_ListGroups: Any = response_class(ApiKey.LIST_GROUPS)
Request = TypeVar("Request")


def group_handlers(
    services: BrokerServices, coordinator: GroupCoordinatorShell
) -> dict[ApiKey, ApiHandler]:
    config = coordinator.config
    creator = OffsetsTopicCreator(
        services, config.offsets_topic_num_partitions, config.offsets_topic_replication_factor
    )

    def bind(
        read: Callable[[Any], Request],
        handle: Callable[[GroupCoordinatorShell, RequestContext, Request], Awaitable[Any]],
    ) -> ApiHandler:
        """kafka-python's request object is read into its typed value before ``handle``."""

        async def call(context: RequestContext, message: Any) -> Any:
            return await handle(coordinator, context, read(message))

        return kafka_python_handler(call)

    async def find(context: RequestContext, message: Any) -> Any:
        request = find_coordinator_request(message)
        return find_coordinator(services, coordinator, creator, context, request)

    async def commit(
        shell: GroupCoordinatorShell, context: RequestContext, request: OffsetCommitRequestData
    ) -> Any:
        return await offset_commit(services, shell, request)

    return {
        ApiKey.FIND_COORDINATOR: kafka_python_handler(find),
        ApiKey.JOIN_GROUP: bind(join_group_request, join_group),
        ApiKey.SYNC_GROUP: bind(sync_group_request, sync_group),
        ApiKey.HEARTBEAT: bind(heartbeat_request, heartbeat),
        ApiKey.LEAVE_GROUP: bind(leave_group_request, leave_group),
        ApiKey.OFFSET_COMMIT: bind(offset_commit_request, commit),
        ApiKey.OFFSET_FETCH: bind(offset_fetch_request, offset_fetch),
        ApiKey.DESCRIBE_GROUPS: bind(describe_groups_request, describe_groups),
        ApiKey.LIST_GROUPS: bind(list_groups_request, list_groups),
    }


# ------------------------------------------------------------------ FindCoordinator


class OffsetsTopicCreator:
    """Asks the controller for ``__consumer_offsets`` once at a time, in the background."""

    def __init__(self, services: BrokerServices, partitions: int, replication_factor: int):
        self.services = services
        self.partitions = partitions
        self.replication_factor = replication_factor
        self._task: asyncio.Task[None] | None = None

    def maybe_create(self, alive_brokers: int) -> None:
        if self._task is not None and not self._task.done():
            return
        factor = max(1, min(self.replication_factor, alive_brokers))
        self._task = asyncio.ensure_future(self._create(factor))

    async def _create(self, replication_factor: int) -> None:
        topic = NewTopic(
            name=OFFSETS_TOPIC,
            num_partitions=self.partitions,
            replication_factor=replication_factor,
            configs=OFFSETS_TOPIC_CONFIGS,
        )
        try:
            await self.services.controller.create_topic(topic, validate_only=False)
            logger.info(
                "created %s (%d partitions, RF %d)",
                OFFSETS_TOPIC,
                self.partitions,
                replication_factor,
            )
        except ControllerError as error:
            if error.code is not Errors.TOPIC_ALREADY_EXISTS:
                logger.warning("cannot create %s: %s", OFFSETS_TOPIC, error)


def find_coordinator(
    services: BrokerServices,
    coordinator: GroupCoordinatorShell,
    creator: OffsetsTopicCreator,
    context: RequestContext,
    request: FindCoordinatorRequestData,
) -> Any:
    version, keys, key_type = request.version, request.keys, request.key_type
    found = [
        _coordinator_for(services, coordinator, creator, context, key, key_type) for key in keys
    ]
    if version >= 4:
        return _FindCoordinator(
            version=version,
            throttle_time_ms=0,
            coordinators=[
                _FindCoordinator.Coordinator(
                    key=key,
                    node_id=node_id,
                    host=host,
                    port=port,
                    error_code=error,
                    error_message=message,
                )
                for key, (error, message, node_id, host, port) in zip(keys, found, strict=True)
            ],
        )
    error, message, node_id, host, port = found[0]
    return _FindCoordinator(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        error_message=message,
        node_id=node_id,
        host=host,
        port=port,
    )


def _coordinator_for(
    services: BrokerServices,
    coordinator: GroupCoordinatorShell,
    creator: OffsetsTopicCreator,
    context: RequestContext,
    key: str,
    key_type: int,
) -> tuple[Errors, str | None, int, str, int]:
    """(error, message, node id, host, port) — Kafka's ``getCoordinator``."""
    if key_type == TRANSACTION_KEY_TYPE:
        return _no_node(Errors.COORDINATOR_NOT_AVAILABLE, "pykraft has no transaction coordinator")
    if key_type != GROUP_KEY_TYPE:
        return _no_node(Errors.INVALID_REQUEST, f"Unknown coordinator type {key_type}")
    image = services.metadata()
    topic = image.topics.by_name.get(OFFSETS_TOPIC)
    if topic is None:
        alive = sum(1 for broker in image.cluster.brokers.values() if not broker.fenced)
        creator.maybe_create(alive)
        return _no_node(Errors.COORDINATOR_NOT_AVAILABLE, f"{OFFSETS_TOPIC} is being created")
    registration = topic.partitions.get(coordinator.partition_for(key))
    leader = None
    if registration is not None and registration.has_leader():
        leader = image.cluster.broker(registration.leader)
    node = None
    if leader is not None and not leader.fenced:
        node = node_endpoint(leader, context.listener_name)
    if node is None:
        return _no_node(Errors.COORDINATOR_NOT_AVAILABLE, "The coordinator is not available.")
    return Errors.NONE, None, node.node_id, node.host, node.port


def _no_node(error: Errors, message: str) -> tuple[Errors, str | None, int, str, int]:
    return error, message, -1, "", -1


# ------------------------------------------------------------------ JoinGroup and friends


async def join_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: JoinGroupRequestData
) -> Any:
    version = request.version
    if request.group_instance_id is not None:
        result = JoinGroupResult(member_id=request.member_id, error=Errors.UNSUPPORTED_VERSION)
        return _join_response(version, result)
    join = JoinGroupRequest(
        group_id=request.group_id,
        member_id=request.member_id,
        client_id=context.header.client_id or "",
        client_host=f"/{context.client_host}",
        rebalance_timeout_ms=request.rebalance_timeout_ms,
        session_timeout_ms=request.session_timeout_ms,
        protocol_type=request.protocol_type,
        protocols=request.protocols,
        require_known_member_id=version >= 4,
    )
    return _join_response(version, await coordinator.join_group(join))


def _join_response(version: int, result: JoinGroupResult) -> Any:
    # Before v7 the protocol name is a non-null string (GroupCoordinator.NoProtocol).
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


async def sync_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: SyncGroupRequestData
) -> Any:
    version = request.version
    if request.group_instance_id is not None:
        return _SyncGroup(version=version, error_code=Errors.UNSUPPORTED_VERSION, assignment=b"")
    result = await coordinator.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments=request.assignments,
    )
    return _SyncGroup(
        version=version,
        throttle_time_ms=0,
        error_code=result.error,
        protocol_type=result.protocol_type,
        protocol_name=result.protocol_name,
        assignment=result.assignment,
    )


async def heartbeat(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: HeartbeatRequestData
) -> Any:
    if request.group_instance_id is not None:
        error = Errors.UNSUPPORTED_VERSION
    else:
        error = await coordinator.heartbeat(
            request.group_id, request.member_id, request.generation_id
        )
    return _Heartbeat(version=request.version, throttle_time_ms=0, error_code=error)


async def leave_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: LeaveGroupRequestData
) -> Any:
    version = request.version
    result = await coordinator.leave_group(request.group_id, list(request.members))
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
    """Before v3 one error: the group's, else the member's (``LeaveGroupResponse.getError``)."""
    if result.error is not Errors.NONE:
        return result.error
    return next((m.error for m in result.members if m.error is not Errors.NONE), Errors.NONE)


# ------------------------------------------------------------------ offsets


async def offset_commit(
    services: BrokerServices, coordinator: GroupCoordinatorShell, request: OffsetCommitRequestData
) -> Any:
    version = request.version
    named = [(t.name, p) for t in request.topics for p in t.partitions]
    errors: dict[TopicPartition, Errors] = {}
    if request.group_instance_id is not None:
        errors = {
            TopicPartition(name, p.partition_index): Errors.UNSUPPORTED_VERSION for name, p in named
        }
    else:
        errors = await _commit(services, coordinator, request, named)
    return _OffsetCommit(
        version=version,
        throttle_time_ms=0,
        topics=[
            _OffsetCommit.OffsetCommitResponseTopic(
                name=topic.name,
                partitions=[
                    _OffsetCommit.OffsetCommitResponseTopic.OffsetCommitResponsePartition(
                        partition_index=p.partition_index,
                        error_code=errors[TopicPartition(topic.name, p.partition_index)],
                    )
                    for p in topic.partitions
                ],
            )
            for topic in request.topics
        ],
    )


async def _commit(
    services: BrokerServices,
    coordinator: GroupCoordinatorShell,
    request: OffsetCommitRequestData,
    named: list[tuple[str, OffsetCommitPartition]],
) -> dict[TopicPartition, Errors]:
    now_ms = services.time_ms()
    retention_ms = request.retention_time_ms
    image = services.metadata()
    errors: dict[TopicPartition, Errors] = {}
    offsets: dict[TopicPartition, OffsetAndMetadata] = {}
    for name, partition in named:
        tp = TopicPartition(name, partition.partition_index)
        topic = image.topics.by_name.get(name)
        if topic is None or partition.partition_index not in topic.partitions:
            errors[tp] = Errors.UNKNOWN_TOPIC_OR_PARTITION
            continue
        offsets[tp] = OffsetAndMetadata(
            offset=partition.committed_offset,
            leader_epoch=partition.committed_leader_epoch,
            metadata=partition.committed_metadata or "",
            commit_timestamp_ms=now_ms,
            expire_timestamp_ms=None if retention_ms == NO_RETENTION else now_ms + retention_ms,
        )
    if offsets:
        errors.update(
            await coordinator.commit_offsets(
                group_id=request.group_id,
                member_id=request.member_id,
                generation_id=request.generation_id,
                offsets=offsets,
            )
        )
    return errors


async def offset_fetch(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: OffsetFetchRequestData
) -> Any:
    version = request.version
    if version >= 8:
        groups = [_fetch_group(coordinator, g.group_id, _wanted(g)) for g in request.groups]
        return _OffsetFetch(version=version, throttle_time_ms=0, groups=groups)
    (group,) = request.groups
    wanted = _wanted(group)
    error, offsets = coordinator.fetch_offsets(group.group_id, wanted)
    if error is not Errors.NONE and version < 2:
        # v1 has no group error: every partition asked for carries it.
        offsets = [(tp, None) for tp in wanted or []]
    partition_error = error if version < 2 else Errors.NONE
    topics: dict[str, list[Any]] = {}
    for tp, value in offsets:
        topics.setdefault(tp.topic, []).append(
            _OffsetFetch.OffsetFetchResponseTopic.OffsetFetchResponsePartition(
                partition_index=tp.partition, error_code=partition_error, **_committed(value)
            )
        )
    return _OffsetFetch(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        topics=[
            _OffsetFetch.OffsetFetchResponseTopic(name=name, partitions=parts)
            for name, parts in topics.items()
        ],
    )


def _wanted(group: OffsetFetchGroup) -> list[TopicPartition] | None:
    return None if group.partitions is None else list(group.partitions)


def _committed(value: OffsetAndMetadata | None) -> dict[str, Any]:
    if value is None:
        return {"committed_offset": NO_OFFSET, "committed_leader_epoch": NO_EPOCH, "metadata": ""}
    return {
        "committed_offset": value.offset,
        "committed_leader_epoch": value.leader_epoch,
        "metadata": value.metadata,
    }


def _fetch_group(
    coordinator: GroupCoordinatorShell, group_id: str, wanted: list[TopicPartition] | None
) -> Any:
    group_class = _OffsetFetch.OffsetFetchResponseGroup
    topic_class = group_class.OffsetFetchResponseTopics
    error, offsets = coordinator.fetch_offsets(group_id, wanted)
    topics: dict[str, list[Any]] = {}
    for tp, value in offsets:
        topics.setdefault(tp.topic, []).append(
            topic_class.OffsetFetchResponsePartitions(
                partition_index=tp.partition, error_code=Errors.NONE, **_committed(value)
            )
        )
    return group_class(
        group_id=group_id,
        error_code=error,
        topics=[topic_class(name=name, partitions=parts) for name, parts in topics.items()],
    )


# ------------------------------------------------------------------ describe and list


async def describe_groups(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: DescribeGroupsRequestData
) -> Any:
    described = []
    for group_id in request.groups:
        error, summary = coordinator.describe_group(group_id)
        described.append(
            _DescribeGroups.DescribedGroup(
                error_code=error,
                group_id=group_id,
                group_state=summary.state,
                protocol_type=summary.protocol_type,
                protocol_data=summary.protocol,
                members=[
                    _DescribeGroups.DescribedGroup.DescribedGroupMember(
                        member_id=m.member_id,
                        group_instance_id=None,
                        client_id=m.client_id,
                        client_host=m.client_host,
                        member_metadata=m.metadata,
                        member_assignment=m.assignment,
                    )
                    for m in summary.members
                ],
            )
        )
    return _DescribeGroups(version=request.version, throttle_time_ms=0, groups=described)


async def list_groups(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: ListGroupsRequestData
) -> Any:
    version = request.version
    error, overviews = coordinator.list_groups(request.states_filter)
    return _ListGroups(
        version=version,
        throttle_time_ms=0,
        error_code=error,
        groups=[
            _ListGroups.ListedGroup(
                group_id=g.group_id, protocol_type=g.protocol_type, group_state=g.state
            )
            for g in overviews
        ],
    )
