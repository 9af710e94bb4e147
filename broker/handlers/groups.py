"""Group APIs: JoinGroup, SyncGroup, Heartbeat, LeaveGroup, OffsetCommit, OffsetFetch,
DescribeGroups, ListGroups, DeleteGroups and OffsetDelete (``group_deletes.py``) — Kafka's
``KafkaApis`` handlers in front of the group coordinator
(``coordinator.group.shell.GroupCoordinatorShell``). FindCoordinator, for groups and
transactional ids, is ``find_coordinator.py``; ``offsets_coordinator_topic`` tells it about
``__consumer_offsets``.

Static membership (KIP-345: ``group.instance.id`` in JoinGroup v5+, SyncGroup/Heartbeat v3+,
LeaveGroup v3+, OffsetCommit v7+) is passed to the coordinator
(``coordinator.group.static_members``); JoinGroup v9+ lets a restarted static leader skip the
assignment (KIP-814).

OffsetCommit: partitions of topics the metadata does not know are UNKNOWN_TOPIC_OR_PARTITION;
``retention_time_ms`` (v2-v4) sets the offset's expire timestamp (KIP-211's expiry honours
it); v1's ``commit_timestamp`` is stored as given. v0 and OffsetFetch v0 addressed
ZooKeeper: answered UNSUPPORTED_VERSION, as Kafka 3.9 answers them in KRaft mode. OffsetFetch
v8+ answers several groups per request; v0-v1 report a group error on every partition asked
for, v2+ once for the group, as Kafka does.

Authorization (Kafka's ``KafkaApis``): JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
OffsetCommit need READ on the group (else the whole answer is GROUP_AUTHORIZATION_FAILED),
OffsetCommit also READ on each topic (TOPIC_AUTHORIZATION_FAILED per partition). The
read-only APIs and their filtering are in ``group_reads.py``.

Requests reach the handlers as typed values (``group_requests.py`` reads kafka-python's objects
and applies the version rules); the responses are still built as kafka-python objects.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

from pykraft.broker.handlers.find_coordinator import CoordinatorTopic
from pykraft.broker.handlers.group_deletes import (
    OffsetDeleteRequestData,
    delete_groups,
    delete_groups_request,
    offset_delete,
    offset_delete_request,
)
from pykraft.broker.handlers.group_reads import describe_groups, list_groups, offset_fetch
from pykraft.broker.handlers.group_requests import (
    DEFAULT_COMMIT_TIMESTAMP,
    GROUP_KEY_TYPE,
    NO_RETENTION,
    HeartbeatRequestData,
    JoinGroupRequestData,
    LeaveGroupRequestData,
    OffsetCommitPartition,
    OffsetCommitRequestData,
    SyncGroupRequestData,
    describe_groups_request,
    heartbeat_request,
    join_group_request,
    leave_group_request,
    list_groups_request,
    offset_commit_request,
    offset_fetch_request,
    sync_group_request,
)
from pykraft.broker.handlers.group_responses import (
    heartbeat_response,
    join_group_response,
    leave_group_response,
    offset_commit_response,
    sync_group_response,
)
from pykraft.broker.handlers.services import BrokerServices, authorized_topics
from pykraft.broker.kafka_apis import ApiHandler, ResponseBody, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.coordinator.group.coordinator import JoinGroupRequest
from pykraft.coordinator.group.offsets import OFFSETS_TOPIC
from pykraft.coordinator.group.records import OffsetAndMetadata
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol import unsupported
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_request
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

# Kafka's GroupCoordinator.offsetsTopicConfigs (segment.bytes: offsets.topic.segment.bytes'
# default); the log cleaner (storage/log_cleaner.py) compacts the topic.
OFFSETS_TOPIC_CONFIGS = {
    "cleanup.policy": "compact",
    "compression.type": "producer",
    "segment.bytes": str(100 * 1024 * 1024),
}

Request = TypeVar("Request")
# JoinGroup v9 (KIP-814): the response's SkipAssignment.
SKIP_ASSIGNMENT_VERSION = 9


def group_handlers(
    services: BrokerServices, coordinator: GroupCoordinatorShell
) -> dict[ApiKey, ApiHandler]:
    authorizer = services.authorizer

    def bind(
        read: Callable[[Any], Request],
        handle: Callable[[GroupCoordinatorShell, RequestContext, Request], Awaitable[Any]],
        group_read: bool = False,
    ) -> ApiHandler:
        """kafka-python's request object is read into its typed value before ``handle``.
        ``group_read``: the request's group needs READ, else the whole request is answered
        GROUP_AUTHORIZATION_FAILED (JoinGroup, SyncGroup, Heartbeat, LeaveGroup and
        OffsetCommit in Kafka's ``KafkaApis``)."""

        async def call(context: RequestContext, message: Any) -> Any:
            return await handle(coordinator, context, read(message))

        handler = kafka_python_handler(call)
        if not group_read:
            return handler

        async def checked(context: RequestContext, body: memoryview) -> ResponseBody | None:
            if authorizer.enabled:
                header = context.header
                group_id = decode_request(header.api_key, header.api_version, body).group_id
                if not authorizer.authorize(
                    context, AclOperation.READ, ResourceType.GROUP, group_id
                ):
                    return unsupported.error_response(
                        header.api_key,
                        header.api_version,
                        body,
                        Errors.GROUP_AUTHORIZATION_FAILED,
                    )
            return await handler(context, body)

        return checked

    async def commit(
        shell: GroupCoordinatorShell, context: RequestContext, request: OffsetCommitRequestData
    ) -> Any:
        return await offset_commit(services, shell, request, context)

    # The read-only APIs filter by what the principal may DESCRIBE (group_reads.py).
    fetch = functools.partial(offset_fetch, authorizer=authorizer)
    describe = functools.partial(describe_groups, authorizer=authorizer)
    listed = functools.partial(list_groups, authorizer=authorizer)
    # DeleteGroups and OffsetDelete check DELETE themselves (group_deletes.py).
    deleted = functools.partial(delete_groups, authorizer=authorizer)

    async def offsets_deleted(
        shell: GroupCoordinatorShell, context: RequestContext, request: OffsetDeleteRequestData
    ) -> Any:
        return await offset_delete(shell, context, request, services.metadata(), authorizer)

    return {
        ApiKey.JOIN_GROUP: bind(join_group_request, join_group, group_read=True),
        ApiKey.SYNC_GROUP: bind(sync_group_request, sync_group, group_read=True),
        ApiKey.HEARTBEAT: bind(heartbeat_request, heartbeat, group_read=True),
        ApiKey.LEAVE_GROUP: bind(leave_group_request, leave_group, group_read=True),
        ApiKey.OFFSET_COMMIT: bind(offset_commit_request, commit, group_read=True),
        ApiKey.OFFSET_FETCH: bind(offset_fetch_request, fetch),
        ApiKey.DESCRIBE_GROUPS: bind(describe_groups_request, describe),
        ApiKey.LIST_GROUPS: bind(list_groups_request, listed),
        ApiKey.DELETE_GROUPS: bind(delete_groups_request, deleted),
        ApiKey.OFFSET_DELETE: bind(offset_delete_request, offsets_deleted),
    }


# ------------------------------------------------------------------ FindCoordinator


def offsets_coordinator_topic(coordinator: GroupCoordinatorShell) -> CoordinatorTopic:
    """``__consumer_offsets`` as FindCoordinator's key type 0 sees it."""
    config = coordinator.config
    return CoordinatorTopic(
        key_type=GROUP_KEY_TYPE,
        topic=OFFSETS_TOPIC,
        partitions=config.offsets_topic_num_partitions,
        replication_factor=config.offsets_topic_replication_factor,
        configs=OFFSETS_TOPIC_CONFIGS,
        partition_for=coordinator.partition_for,
        resource_type=ResourceType.GROUP,
        refusal=Errors.GROUP_AUTHORIZATION_FAILED,
    )


# ------------------------------------------------------------------ JoinGroup and friends


async def join_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: JoinGroupRequestData
) -> Any:
    version = request.version
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
        group_instance_id=request.group_instance_id,
        supports_skipping_assignment=version >= SKIP_ASSIGNMENT_VERSION,
    )
    return join_group_response(version, await coordinator.join_group(join))


async def sync_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: SyncGroupRequestData
) -> Any:
    result = await coordinator.sync_group(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        protocol_type=request.protocol_type,
        protocol_name=request.protocol_name,
        assignments=request.assignments,
        group_instance_id=request.group_instance_id,
    )
    return sync_group_response(request.version, result)


async def heartbeat(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: HeartbeatRequestData
) -> Any:
    error = await coordinator.heartbeat(
        request.group_id, request.member_id, request.generation_id, request.group_instance_id
    )
    return heartbeat_response(request.version, error)


async def leave_group(
    coordinator: GroupCoordinatorShell, context: RequestContext, request: LeaveGroupRequestData
) -> Any:
    result = await coordinator.leave_group(request.group_id, list(request.members))
    return leave_group_response(request.version, result)


# ------------------------------------------------------------------ offsets


async def offset_commit(
    services: BrokerServices,
    coordinator: GroupCoordinatorShell,
    request: OffsetCommitRequestData,
    context: RequestContext | None = None,
) -> Any:
    """The group's READ is checked by the caller; each topic needs READ (else
    TOPIC_AUTHORIZATION_FAILED on its partitions, ``handleOffsetCommitRequest``).

    v0 stored offsets in ZooKeeper: Kafka 3.9 in KRaft mode checks the topics as for any
    version, then, if a partition is left to commit, fails the whole request with
    UNSUPPORTED_VERSION (``commitOffsetsToZookeeper`` throws ``UnsupportedVersionException``
    and ``getErrorResponse`` puts it on every partition named)."""
    named = [(t.name, p) for t in request.topics for p in t.partitions]
    errors: dict[TopicPartition, Errors] = {}
    readable = authorized_topics(services, context, AclOperation.READ, (n for n, _ in named))
    for name, p in named:
        if name not in readable:
            errors[TopicPartition(name, p.partition_index)] = Errors.TOPIC_AUTHORIZATION_FAILED
    allowed = [(name, p) for name, p in named if name in readable]
    errors.update(_unknown_partitions(services, allowed))
    committable = [
        (name, p) for name, p in allowed if TopicPartition(name, p.partition_index) not in errors
    ]
    if request.version == 0 and committable:
        errors = {
            TopicPartition(name, p.partition_index): Errors.UNSUPPORTED_VERSION for name, p in named
        }
    elif committable:
        errors.update(await _commit(services, coordinator, request, committable))
    return offset_commit_response(request, errors)


def _unknown_partitions(
    services: BrokerServices, named: list[tuple[str, OffsetCommitPartition]]
) -> dict[TopicPartition, Errors]:
    """UNKNOWN_TOPIC_OR_PARTITION for each partition the metadata does not know."""
    topics = services.metadata().topics
    return {
        TopicPartition(name, p.partition_index): Errors.UNKNOWN_TOPIC_OR_PARTITION
        for name, p in named
        if not topics.contains(name, p.partition_index)
    }


async def _commit(
    services: BrokerServices,
    coordinator: GroupCoordinatorShell,
    request: OffsetCommitRequestData,
    named: list[tuple[str, OffsetCommitPartition]],
) -> dict[TopicPartition, Errors]:
    """Commit partitions the metadata knows; a v1 ``commit_timestamp`` is kept as given
    (``GroupCoordinatorAdapter.createOffsetAndMetadata``), else the commit is stamped now."""
    now_ms = services.wall_clock_ms()
    retention_ms = request.retention_time_ms
    offsets = {
        TopicPartition(name, partition.partition_index): OffsetAndMetadata(
            offset=partition.committed_offset,
            leader_epoch=partition.committed_leader_epoch,
            metadata=partition.committed_metadata or "",
            commit_timestamp_ms=(
                now_ms
                if partition.commit_timestamp_ms == DEFAULT_COMMIT_TIMESTAMP
                else partition.commit_timestamp_ms
            ),
            expire_timestamp_ms=None if retention_ms == NO_RETENTION else now_ms + retention_ms,
        )
        for name, partition in named
    }
    return dict(
        await coordinator.commit_offsets(
            group_id=request.group_id,
            member_id=request.member_id,
            generation_id=request.generation_id,
            offsets=offsets,
            group_instance_id=request.group_instance_id,
            api_version=request.version,
        )
    )
