"""Topics and partitions: CreateTopics, DeleteTopics, CreatePartitions.

Theory of operation (Kafka's ``ReplicationControlManager``). Each topic of a request is validated
on its own, in Kafka's order — legal name, not already existing, configs, then partition count,
replication factor and placement — and either fails with Kafka's error code and message or
contributes its records: a ``TopicRecord`` (with a fresh topic id drawn from the injected
random source), one ``PartitionRecord`` per partition (replicas striped by
``quorum.placement``; ISR = the active replicas; leader = the first of them; epochs 0), then its
``ConfigRecord``s. All records of one request form one atomic batch; a request in which nothing
succeeds writes nothing. ``validate_only`` answers as if creating but writes nothing.

Replicas are placed only on active brokers (registered, unfenced, not shutting down), so the
replication factor may not exceed their number: ``Replication factor: 4 larger than available
brokers: 3.`` (the message Kafka's ``AdminZkClient`` gives; KRaft's placer would also use
fenced brokers as followers).
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.topics import (
    CreatableTopic,
    CreatableTopicResult,
    CreatePartitionsRequest,
    CreatePartitionsResponse,
    CreatePartitionsTopic,
    CreatePartitionsTopicResult,
    CreateTopicsRequest,
    CreateTopicsResponse,
    DeletableTopicResult,
    DeleteTopicsRequest,
    DeleteTopicsResponse,
)
from pykraft.metadata.image import MetadataImage, TopicImage
from pykraft.metadata.records import (
    ConfigRecord,
    ConfigResourceType,
    MetadataRecord,
    PartitionRecord,
    RemoveTopicRecord,
    TopicRecord,
    uuid_to_kafka_string,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.configs import validate_config_map
from pykraft.quorum.managers.partition_change import is_active
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.managers.settings import ControllerSettings
from pykraft.quorum.placement import PlacementError, RandomSource, UsableBroker, place_replicas

# Kafka's Topic.MAX_NAME_LENGTH and legal characters [a-zA-Z0-9._-].
MAX_TOPIC_NAME_LENGTH = 249
_LEGAL_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-")


class _Rejected(Exception):
    """Internal: carries the ApiError that ends one topic's validation."""

    def __init__(self, error: Errors, message: str | None = None) -> None:
        super().__init__(message)
        self.api_error = ApiError.of(error, message)


def validate_topic_name(name: str) -> ApiError:
    """Kafka's ``Topic.validate``: INVALID_TOPIC_EXCEPTION with Kafka's reasons."""
    reason = None
    if not name:
        reason = "the empty string is not allowed"
    elif name in (".", ".."):
        reason = f"'{name}' is not allowed"
    elif len(name) > MAX_TOPIC_NAME_LENGTH:
        reason = (
            f"the length of '{name}' is longer than the max allowed length {MAX_TOPIC_NAME_LENGTH}"
        )
    elif not set(name) <= _LEGAL_CHARS:
        reason = (
            f"'{name}' contains one or more characters other than ASCII alphanumerics, "
            "'.', '_' and '-'"
        )
    if reason is None:
        return SUCCESS
    return ApiError.of(Errors.INVALID_TOPIC_EXCEPTION, f"Topic name is invalid: {reason}")


def new_topic_id(image: MetadataImage, rng: RandomSource, taken: set[str]) -> str:
    """A fresh id like Kafka's ``Uuid.randomUuid``: never zero, never the metadata topic's id
    (0, 1), never spelled with a leading '-', never one in use."""
    while True:
        value = rng.randrange(1 << 128)
        topic_id = uuid_to_kafka_string(value.to_bytes(16, "big"))
        if (
            value > 1
            and not topic_id.startswith("-")
            and topic_id not in taken
            and topic_id not in image.topics.by_id
        ):
            taken.add(topic_id)
            return topic_id


def _active_brokers(image: MetadataImage) -> list[UsableBroker]:
    return [
        UsableBroker(b.id, b.rack) for b in image.cluster.brokers.values() if is_active(image, b.id)
    ]


def _place(
    image: MetadataImage, rng: RandomSource, num_partitions: int, replication_factor: int
) -> tuple[tuple[int, ...], ...]:
    # Kafka's AdminUtils checks, in its order and words.
    if num_partitions <= 0:
        raise _Rejected(Errors.INVALID_PARTITIONS, "Number of partitions must be larger than 0.")
    if replication_factor <= 0:
        raise _Rejected(
            Errors.INVALID_REPLICATION_FACTOR, "Replication factor must be larger than 0."
        )
    brokers = sorted(_active_brokers(image), key=lambda b: b.id)
    if replication_factor > len(brokers):
        raise _Rejected(
            Errors.INVALID_REPLICATION_FACTOR,
            f"Replication factor: "
            f"{replication_factor} larger than available brokers: {len(brokers)}.",
        )
    try:
        return place_replicas(
            brokers, num_partitions=num_partitions, replication_factor=replication_factor, rng=rng
        )
    except PlacementError as error:
        raise _Rejected(Errors.INVALID_REPLICATION_FACTOR, str(error)) from None


def _check_manual_assignment(
    image: MetadataImage, broker_ids: tuple[int, ...], replication_factor: int | None
) -> None:
    """Kafka's ``validateManualPartitionAssignment``."""
    if not broker_ids:
        raise _Rejected(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "The manual partition assignment includes an empty replica list.",
        )
    previous = None
    for broker_id in sorted(broker_ids):
        if broker_id not in image.cluster.brokers:
            raise _Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition "
                f"assignment includes broker {broker_id}, but no such broker is "
                "registered.",
            )
        if broker_id == previous:
            raise _Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"The manual partition assignment includes the broker {broker_id} more than once.",
            )
        previous = broker_id
    if replication_factor is not None and len(broker_ids) != replication_factor:
        raise _Rejected(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"The manual partition assignment "
            f"includes a partition with {len(broker_ids)} replica(s), but this is "
            f"not consistent with previous partitions, which have "
            f"{replication_factor} replica(s).",
        )


def _partition_record(
    image: MetadataImage, topic_id: str, partition_id: int, replicas: tuple[int, ...]
) -> PartitionRecord:
    isr = tuple(r for r in replicas if is_active(image, r))
    if not isr:
        raise _Rejected(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            f"All brokers specified in the "
            f"manual partition assignment for partition {partition_id} are fenced "
            "or in controlled shutdown.",
        )
    return PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=replicas,
        isr=isr,
        leader=isr[0],
        leader_epoch=0,
        partition_epoch=0,
    )


def _manual_replicas(image: MetadataImage, topic: CreatableTopic) -> tuple[tuple[int, ...], ...]:
    if topic.replication_factor != -1:
        raise _Rejected(
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, "
            "but replication factor was not set to -1.",
        )
    if topic.num_partitions != -1:
        raise _Rejected(
            Errors.INVALID_REQUEST,
            "A manual partition assignment was specified, but numPartitions was not set to -1.",
        )
    by_index: dict[int, tuple[int, ...]] = {}
    replication_factor = None
    for assignment in topic.assignments:
        if assignment.partition_index in by_index:
            raise _Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                "Found multiple manual partition "
                f"assignments for partition {assignment.partition_index}",
            )
        _check_manual_assignment(image, assignment.broker_ids, replication_factor)
        replication_factor = len(assignment.broker_ids)
        by_index[assignment.partition_index] = assignment.broker_ids
    if sorted(by_index) != list(range(len(by_index))):
        raise _Rejected(
            Errors.INVALID_REPLICA_ASSIGNMENT,
            "partitions should be a consecutive 0-based integer sequence",
        )
    return tuple(by_index[index] for index in range(len(by_index)))


def _topic_replicas(
    image: MetadataImage, topic: CreatableTopic, settings: ControllerSettings, rng: RandomSource
) -> tuple[tuple[int, ...], ...]:
    if topic.assignments:
        return _manual_replicas(image, topic)
    num_partitions = (
        settings.default_num_partitions if topic.num_partitions == -1 else topic.num_partitions
    )
    replication_factor = (
        settings.default_replication_factor
        if topic.replication_factor == -1
        else topic.replication_factor
    )
    if num_partitions > settings.max_partitions_per_request:
        raise _Rejected(
            Errors.INVALID_PARTITIONS,
            "Excessively large number of partitions per "
            f"request: at most {settings.max_partitions_per_request}.",
        )
    return _place(image, rng, num_partitions, replication_factor)


def _create_topic(
    image: MetadataImage,
    topic: CreatableTopic,
    settings: ControllerSettings,
    rng: RandomSource,
    taken_ids: set[str],
) -> tuple[list[MetadataRecord], CreatableTopicResult]:
    error = validate_topic_name(topic.name)
    if error.is_success():
        error = _check_absent(image, topic)
    if error.is_success():
        error = validate_config_map(
            ConfigResourceType.TOPIC, {c.name: c.value for c in topic.configs}
        )
    if error.is_failure():
        return [], CreatableTopicResult(topic.name, error)
    try:
        placements = _topic_replicas(image, topic, settings, rng)
        topic_id = new_topic_id(image, rng, taken_ids)
        records: list[MetadataRecord] = [TopicRecord(name=topic.name, topic_id=topic_id)]
        records.extend(
            _partition_record(image, topic_id, partition_id, replicas)
            for partition_id, replicas in enumerate(placements)
        )
    except _Rejected as rejected:
        return [], CreatableTopicResult(topic.name, rejected.api_error)
    records.extend(
        ConfigRecord(
            resource_type=ConfigResourceType.TOPIC,
            resource_name=topic.name,
            name=config.name,
            value=config.value,
        )
        for config in sorted(topic.configs, key=lambda c: c.name)
    )
    return records, CreatableTopicResult(
        topic.name, SUCCESS, topic_id, len(placements), len(placements[0])
    )


def _check_absent(image: MetadataImage, topic: CreatableTopic) -> ApiError:
    if topic.name in image.topics.by_name:
        return ApiError.of(Errors.TOPIC_ALREADY_EXISTS, f"Topic '{topic.name}' already exists.")
    return SUCCESS


def create_topics(
    image: MetadataImage,
    request: CreateTopicsRequest,
    settings: ControllerSettings,
    rng: RandomSource,
) -> ControllerResult[CreateTopicsResponse]:
    records: list[MetadataRecord] = []
    results: list[CreatableTopicResult] = []
    names = [topic.name for topic in request.topics]
    taken_ids: set[str] = set()
    for topic in request.topics:
        if names.count(topic.name) > 1:
            # Kafka's ControllerApis rejects every entry of a repeated name.
            results.append(
                CreatableTopicResult(
                    topic.name, ApiError.of(Errors.INVALID_REQUEST, "Duplicate topic name.")
                )
            )
            continue
        topic_records, result = _create_topic(image, topic, settings, rng, taken_ids)
        records.extend(topic_records)
        results.append(
            result
            if not request.validate_only or result.error.is_failure()
            else attrs.evolve(result, topic_id=None)
        )
    if request.validate_only:
        records = []
    return ControllerResult(tuple(records), CreateTopicsResponse(tuple(results)))


def delete_topics(
    image: MetadataImage, request: DeleteTopicsRequest
) -> ControllerResult[DeleteTopicsResponse]:
    """One ``RemoveTopicRecord`` per topic; replaying it drops partitions and topic configs."""
    records: list[MetadataRecord] = []
    results: list[DeletableTopicResult] = []
    deleted: set[str] = set()
    targets: list[tuple[str | None, str | None, TopicImage | None, Errors]] = [
        (name, None, image.topics.by_name.get(name), Errors.UNKNOWN_TOPIC_OR_PARTITION)
        for name in request.names
    ]
    targets += [
        (None, topic_id, image.topics.by_id.get(topic_id), Errors.UNKNOWN_TOPIC_ID)
        for topic_id in request.topic_ids
    ]
    for name, topic_id, topic, missing in targets:
        if topic is None:
            results.append(DeletableTopicResult(name, topic_id, ApiError.of(missing)))
            continue
        if topic.topic_id in deleted:
            kind = "name" if name is not None else "id"
            results.append(
                DeletableTopicResult(
                    name, topic_id, ApiError.of(Errors.INVALID_REQUEST, f"Duplicate topic {kind}.")
                )
            )
            continue
        deleted.add(topic.topic_id)
        records.append(RemoveTopicRecord(topic_id=topic.topic_id))
        results.append(DeletableTopicResult(topic.name, topic.topic_id, SUCCESS))
    return ControllerResult(tuple(records), DeleteTopicsResponse(tuple(results)))


def _new_partitions(
    image: MetadataImage,
    request: CreatePartitionsTopic,
    settings: ControllerSettings,
    rng: RandomSource,
) -> list[MetadataRecord]:
    topic = image.topics.by_name.get(request.name)
    if topic is None:
        raise _Rejected(Errors.UNKNOWN_TOPIC_OR_PARTITION)
    current = len(topic.partitions)
    if request.count < current:
        raise _Rejected(
            Errors.INVALID_PARTITIONS,
            f"Topic currently has {current} partitions, "
            f"which is higher than the requested {request.count}.",
        )
    if request.count == current:
        raise _Rejected(Errors.INVALID_PARTITIONS, f"Topic already has {current} partitions.")
    additional = request.count - current
    if additional > settings.max_partitions_per_request:
        raise _Rejected(
            Errors.INVALID_PARTITIONS,
            "Excessively large number of partitions per "
            f"request: at most {settings.max_partitions_per_request}.",
        )
    if not topic.partitions:
        raise _Rejected(
            Errors.UNKNOWN_SERVER_ERROR,
            f"Invalid state: topic {request.name} appears to have no partitions.",
        )
    replication_factor = len(topic.partitions[min(topic.partitions)].replicas)
    if request.assignments is None:
        placements = _place(image, rng, additional, replication_factor)
    else:
        if len(request.assignments) != additional:
            raise _Rejected(
                Errors.INVALID_REPLICA_ASSIGNMENT,
                f"Attempted to add {additional} "
                f"additional partition(s), but only {len(request.assignments)} "
                "assignment(s) were specified.",
            )
        for broker_ids in request.assignments:
            _check_manual_assignment(image, broker_ids, replication_factor)
        placements = request.assignments
    return [
        _partition_record(image, topic.topic_id, current + index, replicas)
        for index, replicas in enumerate(placements)
    ]


def create_partitions(
    image: MetadataImage,
    request: CreatePartitionsRequest,
    settings: ControllerSettings,
    rng: RandomSource,
) -> ControllerResult[CreatePartitionsResponse]:
    records: list[MetadataRecord] = []
    results: list[CreatePartitionsTopicResult] = []
    names = [topic.name for topic in request.topics]
    for topic in request.topics:
        error = SUCCESS
        if names.count(topic.name) > 1:
            error = ApiError.of(Errors.INVALID_REQUEST, "Duplicate topic name.")
        else:
            try:
                records.extend(_new_partitions(image, topic, settings, rng))
            except _Rejected as rejected:
                error = rejected.api_error
        results.append(CreatePartitionsTopicResult(topic.name, error))
    if request.validate_only:
        records = []
    return ControllerResult(tuple(records), CreatePartitionsResponse(tuple(results)))
