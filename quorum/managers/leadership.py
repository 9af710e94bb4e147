"""ISR changes from partition leaders (AlterPartition) and leader elections (ElectLeaders).

Theory of operation. ``AlterPartition`` is optimistic concurrency on a partition (KIP-497): the
leader sends the leader epoch and partition epoch it saw with the ISR it wants. The controller
rejects it, per partition, in Kafka's order (``ReplicationControlManager
.validateAlterPartitionData``): unknown topic or partition; epochs newer than the controller's
(``NOT_CONTROLLER`` — this controller must be stale); an older leader epoch
(``FENCED_LEADER_EPOCH``); a sender that is not the leader (``NOT_LEADER_OR_FOLLOWER``); an older
partition epoch (``INVALID_UPDATE_VERSION``); an ISR that is not a duplicate-free subset of the
replicas or lacks the leader (``INVALID_REQUEST``); a leader recovery state that goes backwards;
and replicas that may not join (fenced, shutting down, unregistered, or a stale broker epoch:
``INELIGIBLE_REPLICA``, KIP-903). An accepted change becomes a ``PartitionChangeRecord`` built by
``partition_change.build_partition_change``; the answer carries the partition as it will be.

``ElectLeaders`` (KIP-460) runs a PREFERRED or UNCLEAN election per partition with Kafka's
per-partition errors: ``ELECTION_NOT_NEEDED`` when the preferred replica already leads (or, for
UNCLEAN, when there is a leader), ``PREFERRED_LEADER_NOT_AVAILABLE`` /
``ELIGIBLE_LEADERS_NOT_AVAILABLE`` when the election would change nothing.

Kafka's KRaft controller answers a non-leader sender with ``INVALID_REQUEST``; pykraft answers
``NOT_LEADER_OR_FOLLOWER``, which brokers treat the same way (refresh metadata, do not retry).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pykraft.metadata.api.admin import (
    ElectionType,
    ElectLeadersRequest,
    ElectLeadersResponse,
    PartitionResult,
    ReplicaElectionResult,
)
from pykraft.metadata.api.brokers import (
    AlterPartitionData,
    AlterPartitionRequest,
    AlterPartitionResponse,
    AlterPartitionResult,
    BrokerState,
)
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.records import LeaderRecoveryState, MetadataRecord, PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.cluster_checks import check_broker_epoch
from pykraft.quorum.managers.partition_change import (
    Election,
    build_partition_change,
    elr_for,
    is_active,
)
from pykraft.quorum.managers.result import ControllerResult

_RECOVERED = LeaderRecoveryState.RECOVERED.value
_RECOVERING = LeaderRecoveryState.RECOVERING.value


def _ineligible(image: MetadataImage, state: BrokerState) -> str | None:
    """Why a proposed ISR member may not join, or None (Kafka's ineligibleReplicasForIsr)."""
    registration = image.cluster.brokers.get(state.broker_id)
    if registration is None:
        return "not registered"
    if registration.in_controlled_shutdown:
        return "shutting down"
    if registration.fenced:
        return "fenced"
    if state.broker_epoch != -1 and state.broker_epoch != registration.epoch:
        return (
            f"broker epoch mismatch: requested={state.broker_epoch} VS "
            f"expected={registration.epoch}"
        )
    return None


def _validate(
    image: MetadataImage,
    broker_id: int,
    partition: PartitionRegistration | None,
    data: AlterPartitionData,
) -> ApiError:
    if partition is None:
        return ApiError.of(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    if (
        data.leader_epoch > partition.leader_epoch
        or data.partition_epoch > partition.partition_epoch
    ):
        return ApiError.of(Errors.NOT_CONTROLLER)
    if data.leader_epoch < partition.leader_epoch:
        return ApiError.of(Errors.FENCED_LEADER_EPOCH)
    if broker_id != partition.leader:
        return ApiError.of(
            Errors.NOT_LEADER_OR_FOLLOWER,
            f"Broker {broker_id} is not the "
            f"leader of the partition; the leader is {partition.leader}.",
        )
    if data.partition_epoch < partition.partition_epoch:
        return ApiError.of(Errors.INVALID_UPDATE_VERSION)
    new_isr = [state.broker_id for state in data.new_isr_with_epochs]
    if len(set(new_isr)) != len(new_isr) or not set(new_isr) <= set(partition.replicas):
        return ApiError.of(
            Errors.INVALID_REQUEST,
            f"Invalid ISR {new_isr}: it must be a "
            f"subset of the replicas {list(partition.replicas)} without repeats.",
        )
    if partition.leader not in new_isr:
        return ApiError.of(
            Errors.INVALID_REQUEST, f"Invalid ISR {new_isr}: it must include the leader."
        )
    if data.leader_recovery_state not in (_RECOVERED, _RECOVERING):
        return ApiError.of(
            Errors.INVALID_REQUEST, f"Unknown leader recovery state {data.leader_recovery_state}."
        )
    if data.leader_recovery_state == _RECOVERING and len(new_isr) > 1:
        return ApiError.of(
            Errors.INVALID_REQUEST,
            "The ISR may have only the leader while the "
            "leader is recovering from an unclean election.",
        )
    if (
        partition.leader_recovery_state.value == _RECOVERED
        and data.leader_recovery_state == _RECOVERING
    ):
        return ApiError.of(
            Errors.INVALID_REQUEST,
            "The leader recovery state cannot change from RECOVERED to RECOVERING.",
        )
    reasons = [(s.broker_id, _ineligible(image, s)) for s in data.new_isr_with_epochs]
    ineligible = [f"{broker} ({reason})" for broker, reason in reasons if reason is not None]
    if ineligible:
        return ApiError.of(
            Errors.INELIGIBLE_REPLICA,
            "Ineligible replicas in the new ISR: " + ", ".join(ineligible) + ".",
        )
    return SUCCESS


def _alter_one(
    image: MetadataImage, broker_id: int, data: AlterPartitionData, unclean: Callable[[str], bool]
) -> tuple[PartitionChangeRecord | None, AlterPartitionResult]:
    topic = image.topics.by_id.get(data.topic_id)
    if topic is None:
        return None, AlterPartitionResult(
            data.topic_id, data.partition_index, ApiError.of(Errors.UNKNOWN_TOPIC_ID)
        )
    partition = topic.partitions.get(data.partition_index)
    error = _validate(image, broker_id, partition, data)
    if error.is_failure() or partition is None:
        return None, AlterPartitionResult(data.topic_id, data.partition_index, error)
    record = build_partition_change(
        partition,
        topic_id=topic.topic_id,
        partition_id=data.partition_index,
        acceptable=lambda replica: is_active(image, replica),
        target_isr=tuple(state.broker_id for state in data.new_isr_with_epochs),
        election=Election.UNCLEAN if unclean(topic.name) else Election.ONLINE,
        target_leader_recovery_state=LeaderRecoveryState(data.leader_recovery_state),
        elr=elr_for(unclean, topic.name, partition),
    )
    after = partition if record is None else partition.merge(record)
    if after.leader != broker_id:
        # Only a completed reassignment may move leadership here (Kafka: NEW_LEADER_ELECTED).
        return record, AlterPartitionResult(
            data.topic_id, data.partition_index, ApiError.of(Errors.NEW_LEADER_ELECTED)
        )
    return record, AlterPartitionResult(
        data.topic_id,
        data.partition_index,
        SUCCESS,
        leader_id=after.leader,
        leader_epoch=after.leader_epoch,
        isr=after.isr,
        partition_epoch=after.partition_epoch,
        leader_recovery_state=after.leader_recovery_state.value,
    )


def alter_partition(
    image: MetadataImage, request: AlterPartitionRequest, unclean: Callable[[str], bool]
) -> ControllerResult[AlterPartitionResponse]:
    """Kafka's ``ReplicationControlManager.alterPartition``."""
    error = check_broker_epoch(image, request.broker_id, request.broker_epoch)
    if error.is_failure():
        return ControllerResult((), AlterPartitionResponse(error))
    records: list[MetadataRecord] = []
    results: list[AlterPartitionResult] = []
    seen: set[tuple[str, int]] = set()
    for data in request.partitions:
        key = (data.topic_id, data.partition_index)
        if key in seen:
            results.append(
                AlterPartitionResult(
                    data.topic_id,
                    data.partition_index,
                    ApiError.of(
                        Errors.INVALID_REQUEST,
                        "The partition appears more than once in the request.",
                    ),
                )
            )
            continue
        seen.add(key)
        record, result = _alter_one(image, request.broker_id, data, unclean)
        if record is not None:
            records.append(record)
        results.append(result)
    return ControllerResult(tuple(records), AlterPartitionResponse(SUCCESS, tuple(results)))


def _elect_one(
    image: MetadataImage,
    topic_name: str,
    partition_id: int,
    election_type: ElectionType,
    policy: Callable[[str], bool] | None,
) -> tuple[PartitionChangeRecord | None, ApiError]:
    """Kafka's ``ReplicationControlManager.electLeader``."""
    topic = image.topics.by_name.get(topic_name)
    if topic is None:
        return None, ApiError.of(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such topic as {topic_name}"
        )
    partition = topic.partitions.get(partition_id)
    if partition is None:
        return None, ApiError.of(
            Errors.UNKNOWN_TOPIC_OR_PARTITION, f"No such partition as {topic_name}-{partition_id}"
        )
    preferred = partition.replicas[0] if partition.replicas else -1
    if (election_type is ElectionType.PREFERRED and partition.leader == preferred) or (
        election_type is ElectionType.UNCLEAN and partition.has_leader()
    ):
        return None, ApiError.of(Errors.ELECTION_NOT_NEEDED)
    election = Election.PREFERRED if election_type is ElectionType.PREFERRED else Election.UNCLEAN
    record = build_partition_change(
        partition,
        topic_id=topic.topic_id,
        partition_id=partition_id,
        election=election,
        acceptable=lambda replica: is_active(image, replica),
        elr=elr_for(policy, topic_name, partition),
    )
    if record is None:
        return None, ApiError.of(
            Errors.PREFERRED_LEADER_NOT_AVAILABLE
            if election_type is ElectionType.PREFERRED
            else Errors.ELIGIBLE_LEADERS_NOT_AVAILABLE
        )
    return record, SUCCESS


def _requested(
    image: MetadataImage, request: ElectLeadersRequest
) -> Iterator[tuple[str, tuple[int, ...]]]:
    if request.topic_partitions is None:
        for name in sorted(image.topics.by_name):
            yield name, tuple(sorted(image.topics.by_name[name].partitions))
    else:
        for topic in request.topic_partitions:
            yield topic.topic, topic.partitions


def elect_leaders(
    image: MetadataImage,
    request: ElectLeadersRequest,
    policy: Callable[[str], bool] | None = None,
) -> ControllerResult[ElectLeadersResponse]:
    """Kafka's ``ReplicationControlManager.electLeaders``."""
    try:
        election_type = ElectionType(request.election_type)
    except ValueError:
        return ControllerResult(
            (),
            ElectLeadersResponse(
                ApiError.of(
                    Errors.INVALID_REQUEST, f"Unknown election type {request.election_type}"
                )
            ),
        )
    all_partitions = request.topic_partitions is None
    records: list[MetadataRecord] = []
    results: list[ReplicaElectionResult] = []
    for topic_name, partition_ids in _requested(image, request):
        partition_results: list[PartitionResult] = []
        for partition_id in dict.fromkeys(partition_ids):
            record, error = _elect_one(image, topic_name, partition_id, election_type, policy)
            if record is not None:
                records.append(record)
            # For "every partition", partitions that already have the right leader are left out.
            if not (all_partitions and error.error is Errors.ELECTION_NOT_NEEDED):
                partition_results.append(PartitionResult(partition_id, error))
        results.append(ReplicaElectionResult(topic_name, tuple(partition_results)))
    return ControllerResult(tuple(records), ElectLeadersResponse(SUCCESS, tuple(results)))
