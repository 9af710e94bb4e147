"""ConsumerGroupHeartbeat's request checks, its config, and the answer's rules (KIP-848).

Kafka's ``GroupMetadataManager.throwIfConsumerGroupHeartbeatRequestIsInvalid`` and
``throwIfMemberEpochIsInvalid``, as predicates returning the error and message Kafka gives
(``None``: valid). ``coordinator.group.consumer_groups`` runs the heartbeat itself.
"""

from __future__ import annotations

import attrs

from pykraft.coordinator.group.assignors import RANGE_ASSIGNOR, UNIFORM_ASSIGNOR, Assignment
from pykraft.coordinator.group.consumer_group import ConsumerGroup, compile_regex
from pykraft.coordinator.group.consumer_member import (
    JOIN_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_MEMBER_EPOCH,
    LEAVE_GROUP_STATIC_MEMBER_EPOCH,
    ConsumerGroupMember,
    assignment_changed,
    is_subset,
)
from pykraft.coordinator.group.effects import (
    ConsumerGroupHeartbeatResult,
    HeartbeatResult,
    JoinGroupResult,
    LeaveGroupResult,
    Result,
    SyncGroupResult,
)
from pykraft.coordinator.group.state import GroupMetadata, GroupState
from pykraft.protocol.errors import Errors

# Kafka's Integer.MAX_VALUE default of group.consumer.max.size.
UNBOUNDED_GROUP_SIZE = 2**31 - 1
CLASSIC_PROTOCOL = "classic"
CONSUMER_PROTOCOL = "consumer"


@attrs.frozen
class ConsumerGroupConfig:
    """``GroupCoordinatorConfig``'s consumer group properties, with Kafka 3.9's defaults.

    ``group.coordinator.rebalance.protocols`` defaults to ``classic`` alone in Kafka 3.9 (the
    consumer protocol is opt-in there); pykraft enables ``consumer`` by default, as Kafka 4.0
    does, because librdkafka and the Java client ship ``group.protocol=consumer``."""

    session_timeout_ms: int = 45_000  # group.consumer.session.timeout.ms
    min_session_timeout_ms: int = 45_000  # group.consumer.min.session.timeout.ms
    max_session_timeout_ms: int = 60_000  # group.consumer.max.session.timeout.ms
    heartbeat_interval_ms: int = 5_000  # group.consumer.heartbeat.interval.ms
    min_heartbeat_interval_ms: int = 5_000  # group.consumer.min.heartbeat.interval.ms
    max_heartbeat_interval_ms: int = 15_000  # group.consumer.max.heartbeat.interval.ms
    max_size: int = UNBOUNDED_GROUP_SIZE  # group.consumer.max.size
    # group.consumer.assignors: the first is the default.
    assignors: tuple[str, ...] = (UNIFORM_ASSIGNOR, RANGE_ASSIGNOR)
    rebalance_protocols: frozenset[str] = frozenset({CLASSIC_PROTOCOL, CONSUMER_PROTOCOL})
    # group.consumer.migration.policy: disabled, upgrade, downgrade or bidirectional (Kafka
    # 4.0's default; pykraft builds the upgrade only, coordinator.group.consumer_migration).
    migration_policy: str = "bidirectional"


@attrs.frozen(kw_only=True)
class ConsumerGroupHeartbeatRequest:
    """ConsumerGroupHeartbeat v0's fields; None means "unchanged since the last heartbeat"."""

    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    # topic id -> partitions the member owns; None: not sent.
    topic_partitions: Assignment | None = None
    client_id: str = ""
    client_host: str = ""

    @property
    def is_leave(self) -> bool:
        return self.member_epoch in (LEAVE_GROUP_MEMBER_EPOCH, LEAVE_GROUP_STATIC_MEMBER_EPOCH)

    @property
    def is_full(self) -> bool:
        """A full heartbeat (joining, or after an error) carries every field."""
        return self.member_epoch == JOIN_GROUP_MEMBER_EPOCH or (
            self.rebalance_timeout_ms != -1
            and self.subscribed_topic_names is not None
            and self.topic_partitions is not None
        )


Refusal = tuple[Errors, str]


def request_error(
    request: ConsumerGroupHeartbeatRequest, config: ConsumerGroupConfig
) -> Refusal | None:
    """``throwIfConsumerGroupHeartbeatRequestIsInvalid``."""
    invalid = Errors.INVALID_REQUEST
    if request.group_id == "":
        return invalid, "GroupId can't be empty."
    if request.instance_id is not None and request.instance_id == "":
        return invalid, "InstanceId can't be empty."
    if request.rack_id is not None and request.rack_id == "":
        return invalid, "RackId can't be empty."
    epoch = request.member_epoch
    if (epoch > 0 or epoch == LEAVE_GROUP_MEMBER_EPOCH) and request.member_id == "":
        return invalid, "MemberId can't be empty."
    if epoch == JOIN_GROUP_MEMBER_EPOCH:
        if request.rebalance_timeout_ms == -1:
            return invalid, "RebalanceTimeoutMs must be provided in first request."
        if request.topic_partitions is None or any(request.topic_partitions.values()):
            return invalid, "TopicPartitions must be empty when (re-)joining."
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            return (
                invalid,
                "SubscribedTopicNames or SubscribedTopicRegex must be set in first request.",
            )
    elif epoch == LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        if request.member_id == "":
            return invalid, "MemberId can't be empty."
        if request.instance_id is None:
            return invalid, "InstanceId can't be null."
    elif epoch < LEAVE_GROUP_STATIC_MEMBER_EPOCH:
        return invalid, f"MemberEpoch is {epoch}, but must be greater than or equal to -2."
    regex = request.subscribed_topic_regex
    if regex is not None and compile_regex(regex) is None:
        return (
            Errors.INVALID_REGULAR_EXPRESSION,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression.",
        )
    assignor = request.server_assignor
    if assignor is not None and assignor not in config.assignors:
        supported = ", ".join(config.assignors)
        return (
            Errors.UNSUPPORTED_ASSIGNOR,
            f"ServerAssignor {assignor} is not supported. Supported assignors: {supported}.",
        )
    return None


def validate_member(
    group: ConsumerGroup, member_id: str, instance_id: str | None, *, admin: bool = False
) -> ConsumerGroupMember | Refusal:
    """``validateConsumerGroupMember``: the member a request names, by its member id, or by its
    instance id when it has one (UNKNOWN_MEMBER_ID when no member holds it, FENCED_INSTANCE_ID
    when another member id does: ``throwIfStaticMemberIsUnknown`` /
    ``throwIfInstanceIdIsFenced``). ``admin``: LeaveGroup, where an empty ``member_id`` with
    an instance id is an administrative removal (``classicGroupLeaveToConsumerGroup``)."""
    if instance_id is None:
        member = group.members.get(member_id)
        if member is None:
            return (
                Errors.UNKNOWN_MEMBER_ID,
                f"Member {member_id} is not a member of group {group.group_id}.",
            )
        return member
    member = group.member_by_instance_id(instance_id)
    if member is None:
        return Errors.UNKNOWN_MEMBER_ID, f"Instance id {instance_id} is unknown."
    if member.member_id != member_id and not (admin and member_id == ""):
        return (
            Errors.FENCED_INSTANCE_ID,
            f"Static member {member_id} with instance id {instance_id} was fenced by member "
            f"{member.member_id}.",
        )
    return member


def member_epoch_error(
    member: ConsumerGroupMember, received_epoch: int, owned: Assignment | None
) -> Refusal | None:
    """``throwIfMemberEpochIsInvalid``: a member ahead of the coordinator, or behind it other
    than by one lost response (previous epoch with a subset of its partitions), is fenced."""
    if received_epoch > member.member_epoch:
        return (
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a greater member epoch ({received_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}). The member "
            "must abandon all its partitions and rejoin.",
        )
    lost_response = received_epoch == member.previous_member_epoch and is_subset(
        owned, member.assigned_partitions
    )
    if received_epoch < member.member_epoch and not lost_response:
        return (
            Errors.FENCED_MEMBER_EPOCH,
            f"The consumer group member has a smaller member epoch ({received_epoch}) than "
            f"the one known by the group coordinator ({member.member_epoch}). The member "
            "must abandon all its partitions and rejoin.",
        )
    return None


def updated_member(
    member: ConsumerGroupMember, request: ConsumerGroupHeartbeatRequest
) -> ConsumerGroupMember:
    """``ConsumerGroupMember.Builder.maybeUpdate*``: the fields the heartbeat sets."""
    return attrs.evolve(
        member,
        instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
        rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
        rebalance_timeout_ms=(
            request.rebalance_timeout_ms
            if request.rebalance_timeout_ms != -1
            else member.rebalance_timeout_ms
        ),
        server_assignor_name=(
            request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor_name
        ),
        subscribed_topic_names=(
            tuple(sorted(set(request.subscribed_topic_names)))
            if request.subscribed_topic_names is not None
            else member.subscribed_topic_names
        ),
        subscribed_topic_regex=(
            request.subscribed_topic_regex
            if request.subscribed_topic_regex is not None
            else member.subscribed_topic_regex
        ),
        client_id=request.client_id,
        client_host=request.client_host,
        # A classic member heartbeating with the consumer protocol has upgraded itself
        # (``setClassicMemberMetadata(null)``).
        classic_protocols=None,
        classic_session_timeout_ms=None,
    )


def subscription_changed(before: ConsumerGroupMember, after: ConsumerGroupMember) -> bool:
    """``hasMemberSubscriptionChanged``: what the target assignment depends on."""
    return (
        before.subscribed_topic_names != after.subscribed_topic_names
        or before.subscribed_topic_regex != after.subscribed_topic_regex
        or before.server_assignor_name != after.server_assignor_name
        or before.rack_id != after.rack_id
    )


def metadata_changed(before: ConsumerGroupMember, after: ConsumerGroupMember) -> bool:
    """Anything of the member metadata record changed (it is written again)."""
    return (
        subscription_changed(before, after)
        or before.instance_id != after.instance_id
        or before.client_id != after.client_id
        or before.client_host != after.client_host
        or before.rebalance_timeout_ms != after.rebalance_timeout_ms
        or before.classic_protocols != after.classic_protocols
        or before.classic_session_timeout_ms != after.classic_session_timeout_ms
    )


def is_simple_group(group: GroupMetadata) -> bool:
    """Kafka's ``ClassicGroup.isSimpleGroup`` in spirit: an empty classic group that only
    holds offsets, which a consumer group may take over."""
    return group.is_(GroupState.EMPTY) and not group.members and not group.pending_members


def refused(refusal: tuple[Errors, str | None]) -> ConsumerGroupHeartbeatResult:
    error, message = refusal
    return ConsumerGroupHeartbeatResult(error=error, error_message=message)


def assignment_record_changed(before: ConsumerGroupMember, after: ConsumerGroupMember) -> bool:
    """Anything of the current assignment record changed (it is written again)."""
    return (
        before.member_epoch != after.member_epoch
        or before.previous_member_epoch != after.previous_member_epoch
        or before.state != after.state
        or assignment_changed(before, after)
        or dict(before.partitions_pending_revocation) != dict(after.partitions_pending_revocation)
    )


def failed(result: Result, error: Errors) -> Result:
    """``result``'s request answered with ``error`` instead (its records were not written)."""
    if isinstance(result, JoinGroupResult):
        return JoinGroupResult(member_id=result.member_id, error=error)
    if isinstance(result, SyncGroupResult):
        return SyncGroupResult(error=error)
    if isinstance(result, HeartbeatResult):
        return HeartbeatResult(error)
    if isinstance(result, LeaveGroupResult):
        return LeaveGroupResult(error)
    return refused((error, None))
