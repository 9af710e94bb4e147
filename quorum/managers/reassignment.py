"""Partition reassignment (KIP-455): AlterPartitionReassignments and ListPartitionReassignments.

Theory of operation (Kafka's ``ReplicationControlManager.alterPartitionReassignments`` /
``listPartitionReassignments``). A reassignment moves a partition from its replicas to a target
list in three steps, each one metadata record:

1. Start: the target is validated like a manual assignment (``validateManualPartitionAssignment``:
   not empty, no broker twice, every broker registered — else INVALID_REPLICA_ASSIGNMENT), then
   one ``PartitionChangeRecord`` sets replicas = target followed by the replicas being removed,
   ``adding_replicas`` = target - current and ``removing_replicas`` = current - target
   (``ReassignmentReplicas.of``). A target already in sync completes at once.
2. Catch up: brokers see themselves in ``replicas`` and follow (``local_changes``); the leader
   adds each caught-up replica to the ISR through AlterPartition.
3. Complete: the AlterPartition that puts the last target replica in the ISR completes the
   reassignment in the same record (``partition_change.build_partition_change``): replicas =
   target, ISR without the removing replicas, adding/removing cleared, and a new leader from the
   target when the leader was removed. Removed brokers then delete their replica.

A null target cancels (``cancelPartitionReassignment``): NO_REASSIGNMENT_IN_PROGRESS when none
runs; otherwise the original replicas come back (``ReassignmentRevert``), which needs an unclean
election — allowed only with ``unclean.leader.election.enable`` (else INVALID_REPLICA_ASSIGNMENT)
— when only adding replicas were in sync. Unknown topics and partitions are
UNKNOWN_TOPIC_OR_PARTITION. Each partition succeeds or fails alone (Kafka writes the records of
the partitions that succeeded); a partition named twice is INVALID_REQUEST, and a request that
would write more than one batch's records (``MAX_BATCH_RECORDS``) is refused whole.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
    OngoingPartitionReassignment,
    OngoingTopicReassignment,
    ReassignablePartition,
    ReassignablePartitionResult,
    ReassignableTopicResult,
    select_reassignments,
)
from pykraft.metadata.codec import MAX_BATCH_RECORDS
from pykraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata.records import MetadataRecord, PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.partition_change import (
    Election,
    build_partition_change,
    elr_for,
    is_active,
)
from pykraft.quorum.managers.reassignment_replicas import ReassignmentReplicas, ReassignmentRevert
from pykraft.quorum.managers.result import ControllerResult

UncleanPolicy = Callable[[str], bool]


class _Refused(Exception):
    """One partition's expected failure, carried to its result."""

    def __init__(self, error: ApiError) -> None:
        super().__init__(error.message)
        self.error = error


def _invalid(message: str) -> _Refused:
    return _Refused(ApiError.of(Errors.INVALID_REPLICA_ASSIGNMENT, message))


def validate_manual_assignment(image: MetadataImage, replicas: tuple[int, ...]) -> None:
    """Kafka's ``ReplicationControlManager.validateManualPartitionAssignment``."""
    if not replicas:
        raise _invalid("The manual partition assignment includes an empty replica list.")
    seen: set[int] = set()
    for replica in replicas:
        if replica in seen:
            raise _invalid(
                f"The manual partition assignment includes the broker {replica} more than once."
            )
        seen.add(replica)
        if replica not in image.cluster.brokers:
            raise _invalid(
                f"The manual partition assignment includes broker {replica}, but no such "
                "broker is registered."
            )


def _change(
    image: MetadataImage,
    topic: TopicImage,
    index: int,
    part: PartitionRegistration,
    target: tuple[int, ...],
    unclean: UncleanPolicy,
) -> PartitionChangeRecord | None:
    """Kafka's ``changePartitionReassignment``."""
    validate_manual_assignment(image, target)
    moving = ReassignmentReplicas.of(part.replicas, target)
    return build_partition_change(
        part,
        topic_id=topic.topic_id,
        partition_id=index,
        acceptable=lambda replica: is_active(image, replica),
        target_replicas=moving.replicas,
        # As Kafka: an empty side keeps what the partition has, so resending the target of a
        # reassignment in progress changes nothing.
        target_adding=moving.adding or None,
        target_removing=moving.removing or None,
        elr=elr_for(unclean, topic.name, part),
    )


def _cancel(
    image: MetadataImage,
    topic: TopicImage,
    index: int,
    part: PartitionRegistration,
    unclean: UncleanPolicy,
) -> PartitionChangeRecord | None:
    """Kafka's ``cancelPartitionReassignment``."""
    if not part.is_reassigning():
        raise _Refused(ApiError.of(Errors.NO_REASSIGNMENT_IN_PROGRESS))
    revert = ReassignmentRevert.of(part)
    unclean_enabled = unclean(topic.name)
    if revert.unclean and not unclean_enabled:
        raise _invalid(
            f"Unable to revert partition assignment for {topic.name}:{index} because it "
            "would require an unclean leader election."
        )
    return build_partition_change(
        part,
        topic_id=topic.topic_id,
        partition_id=index,
        acceptable=lambda replica: is_active(image, replica),
        target_isr=revert.isr,
        election=Election.UNCLEAN if unclean_enabled else Election.ONLINE,
        target_replicas=revert.replicas,
        target_adding=(),
        target_removing=(),
        elr=elr_for(unclean, topic.name, part),
    )


def _alter_one(
    image: MetadataImage, topic_name: str, target: ReassignablePartition, unclean: UncleanPolicy
) -> PartitionChangeRecord | None:
    """Kafka's ``alterPartitionReassignment``: raises ``_Refused`` for an expected failure."""
    topic = image.topics.by_name.get(topic_name)
    if topic is None:
        raise _Refused(
            ApiError.of(
                Errors.UNKNOWN_TOPIC_OR_PARTITION, f"Unable to find a topic named {topic_name}."
            )
        )
    part = topic.partitions.get(target.partition_index)
    if part is None:
        raise _Refused(
            ApiError.of(
                Errors.UNKNOWN_TOPIC_OR_PARTITION,
                f"Unable to find partition {topic_name}:{target.partition_index}.",
            )
        )
    if target.replicas is None:
        return _cancel(image, topic, target.partition_index, part, unclean)
    return _change(image, topic, target.partition_index, part, target.replicas, unclean)


def alter_partition_reassignments(
    image: MetadataImage, request: AlterPartitionReassignmentsRequest, unclean: UncleanPolicy
) -> ControllerResult[AlterPartitionReassignmentsResponse]:
    """Kafka's ``ReplicationControlManager.alterPartitionReassignments``: one result per
    partition; the records of the partitions that succeeded, in request order.

    Every record is built from the same image, so a partition named twice would get two
    conflicting records: each of its entries is INVALID_REQUEST instead. One request writes at
    most ``MAX_BATCH_RECORDS`` records, one atomic batch (Kafka's ``MAX_RECORDS_PER_USER_OP``,
    its ``BoundedList``); past that the whole request is INVALID_REQUEST and writes nothing."""
    named = Counter(
        (topic.name, p.partition_index) for topic in request.topics for p in topic.partitions
    )
    records: list[MetadataRecord] = []
    responses: list[ReassignableTopicResult] = []
    for topic in request.topics:
        results: list[ReassignablePartitionResult] = []
        for target in topic.partitions:
            if named[(topic.name, target.partition_index)] > 1:
                results.append(ReassignablePartitionResult(target.partition_index, _DUPLICATE))
                continue
            try:
                record = _alter_one(image, topic.name, target, unclean)
            except _Refused as refused:
                results.append(ReassignablePartitionResult(target.partition_index, refused.error))
                continue
            if record is not None:
                records.append(record)
            results.append(ReassignablePartitionResult(target.partition_index, SUCCESS))
        responses.append(ReassignableTopicResult(topic.name, tuple(results)))
    if len(records) > MAX_BATCH_RECORDS:
        return ControllerResult((), _refuse_all(request, _TOO_MANY))
    return ControllerResult(
        tuple(records), AlterPartitionReassignmentsResponse(SUCCESS, tuple(responses))
    )


_DUPLICATE = ApiError.of(Errors.INVALID_REQUEST, "The partition is named more than once.")
_TOO_MANY = ApiError.of(
    Errors.INVALID_REQUEST,
    f"Cannot reassign more than {MAX_BATCH_RECORDS} partitions in a single request.",
)


def _refuse_all(
    request: AlterPartitionReassignmentsRequest, error: ApiError
) -> AlterPartitionReassignmentsResponse:
    return AlterPartitionReassignmentsResponse(
        SUCCESS,
        tuple(
            ReassignableTopicResult(
                topic.name,
                tuple(
                    ReassignablePartitionResult(p.partition_index, error) for p in topic.partitions
                ),
            )
            for topic in request.topics
        ),
    )


def list_partition_reassignments(
    image: MetadataImage, request: ListPartitionReassignmentsRequest
) -> ListPartitionReassignmentsResponse:
    """Kafka's ``ReplicationControlManager.listPartitionReassignments``: the reassignments in
    progress (replicas, adding, removing), by topic name then partition; a read of the image."""
    topics: list[OngoingTopicReassignment] = []
    for name in sorted(image.topics.by_name):
        partitions = tuple(
            OngoingPartitionReassignment(
                partition_index=index,
                replicas=part.replicas,
                adding_replicas=part.adding_replicas,
                removing_replicas=part.removing_replicas,
            )
            for index, part in sorted(image.topics.by_name[name].partitions.items())
            if part.is_reassigning()
        )
        if partitions:
            topics.append(OngoingTopicReassignment(name, partitions))
    everything = ListPartitionReassignmentsResponse(SUCCESS, tuple(topics))
    return select_reassignments(everything, request.topics)
