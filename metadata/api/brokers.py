"""The broker RPCs of the controller's HTTP API: KIP-631 lifecycle, AlterPartition, KIP-730.

The request types are the pure controller's inputs (``quorum.controller`` re-exports them) and
the response types its outputs; each route's JSON is encoded and decoded here, once, by the
controller that serves it and the broker that calls it (snake_case; errors: ``errors.py``):

POST /v1/brokers/register
    {"broker_id": 1, "incarnation_id": "<Kafka uuid text>", "rack": null,
     "endpoints": [{"name": "PLAINTEXT", "host": "127.0.0.1", "port": 9092,
                    "security_protocol": 0}],
     "features": [{"name": "metadata.version", "min_supported_version": 1,
                   "max_supported_version": 1}]}
    -> {"broker_id": 1, "broker_epoch": 17, "heartbeat_interval_ms": 2000,
        "session_timeout_ms": 9000}
POST /v1/brokers/heartbeat
    {"broker_id": 1, "broker_epoch": 17, "current_metadata_offset": 42,
     "want_fence": false, "want_shut_down": false,
     "offline_log_dirs": ["<directory id>"],                          (KIP-858; optional)
     "offline_replicas": [{"topic_id": "<topic id>", "partition": 0}],  (optional)
     "broker_topic_metrics": {"messages_in": 120, "bytes_in": 9000, "bytes_out": 4500,
                              "replication_bytes_in": 0, "replication_bytes_out": 0,
                              "fetch_requests": 31, "sampled_ms": 81234}}  (pykraft; optional)
    -> {"is_caught_up": true, "is_fenced": false, "in_controlled_shutdown": false,
        "should_shut_down": false}
DELETE /v1/brokers/{broker_id}        (UnregisterBroker) -> {"broker_id": 1}
POST /v1/alter-partition
    {"broker_id": 1, "broker_epoch": 17, "partitions": [{"topic_id": "...",
     "partition_index": 0, "leader_epoch": 3, "partition_epoch": 5,
     "new_isr": [{"broker_id": 1, "broker_epoch": 17}, 2], "leader_recovery_state": 0}]}
    -> {"partitions": [{"topic_id", "partition_index", "error": "NONE", "message": null,
        "leader_id", "leader_epoch", "isr", "partition_epoch", "leader_recovery_state"}]}
POST /v1/producer-ids   {"broker_id": 1, "broker_epoch": 17}
    -> {"producer_id_start": 0, "producer_id_len": 1000}
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature, LeaderRecoveryState

_RECOVERED = LeaderRecoveryState.RECOVERED.value


# ---------------------------------------------------------------------------- registration


@attrs.frozen
class BrokerRegistrationRequest:
    broker_id: int
    # Kafka Uuid text (22 characters of URL-safe base64), new for every broker process start.
    incarnation_id: str
    listeners: tuple[BrokerEndpoint, ...] = ()
    rack: str | None = None
    features: tuple[BrokerFeature, ...] = ()
    # KIP-966 PreviousBrokerEpoch (BrokerRegistrationRequest v3+): the epoch the broker had at
    # its last clean shutdown, -1 when it has none (an unclean shutdown, or a first start).
    previous_broker_epoch: int = -1


@attrs.frozen
class BrokerRegistrationResponse:
    error: ApiError
    broker_epoch: int = -1


@attrs.frozen(kw_only=True)
class BrokerRegistrationReply:
    """The HTTP answer to a registration: the epoch, and the session the broker must keep."""

    broker_id: int
    broker_epoch: int
    heartbeat_interval_ms: int
    session_timeout_ms: int


def endpoint_to_json(endpoint: BrokerEndpoint) -> JsonObject:
    return {
        "name": endpoint.name,
        "host": endpoint.host,
        "port": endpoint.port,
        "security_protocol": endpoint.security_protocol,
    }


def endpoint_from_json(fields: Fields) -> BrokerEndpoint:
    return BrokerEndpoint(
        name=fields.string("name"),
        host=fields.string("host"),
        port=fields.integer("port"),
        security_protocol=fields.integer("security_protocol", 0),
    )


def registration_request_to_json(request: BrokerRegistrationRequest) -> JsonObject:
    return {
        "broker_id": request.broker_id,
        "incarnation_id": request.incarnation_id,
        "rack": request.rack,
        "endpoints": [endpoint_to_json(e) for e in request.listeners],
        "features": [
            {
                "name": f.name,
                "min_supported_version": f.min_supported_version,
                "max_supported_version": f.max_supported_version,
            }
            for f in request.features
        ],
        "previous_broker_epoch": request.previous_broker_epoch,
    }


def registration_request_from_json(fields: Fields) -> BrokerRegistrationRequest:
    return BrokerRegistrationRequest(
        broker_id=fields.integer("broker_id"),
        incarnation_id=fields.string("incarnation_id"),
        listeners=tuple(endpoint_from_json(e) for e in fields.objects("endpoints")),
        rack=fields.optional_string("rack"),
        features=tuple(
            BrokerFeature(
                name=f.string("name"),
                min_supported_version=f.integer("min_supported_version"),
                max_supported_version=f.integer("max_supported_version"),
            )
            for f in fields.objects("features", [])
        ),
        previous_broker_epoch=fields.integer("previous_broker_epoch", -1),
    )


def registration_reply_to_json(reply: BrokerRegistrationReply) -> JsonObject:
    return {
        "broker_id": reply.broker_id,
        "broker_epoch": reply.broker_epoch,
        "heartbeat_interval_ms": reply.heartbeat_interval_ms,
        "session_timeout_ms": reply.session_timeout_ms,
    }


def registration_reply_from_json(fields: Fields) -> BrokerRegistrationReply:
    return BrokerRegistrationReply(
        broker_id=fields.integer("broker_id"),
        broker_epoch=fields.integer("broker_epoch"),
        heartbeat_interval_ms=fields.integer("heartbeat_interval_ms"),
        session_timeout_ms=fields.integer("session_timeout_ms"),
    )


# ---------------------------------------------------------------------------- heartbeat


@attrs.frozen(order=True)
class OfflineReplica:
    """One of the broker's replicas on an offline log dir (Kafka's ``TopicIdPartition``)."""

    topic_id: str
    partition_id: int


@attrs.frozen
class BrokerTopicCounters:
    """The broker's cumulative all-topics ``BrokerTopicMetrics`` counts since it started (the
    meters' ``Count``: MessagesInPerSec, BytesInPerSec, BytesOutPerSec,
    ReplicationBytesInPerSec, ReplicationBytesOutPerSec) and its Fetch requests (RequestMetrics
    RequestsPerSec request=Fetch; consumer and follower fetches together, as pykraft counts
    them). Sent with each heartbeat so the active controller's web console can show live
    rates without knowing the brokers' metrics endpoints (``quorum/broker_rates.py``); never
    written to the metadata log."""

    messages_in: int = 0
    bytes_in: int = 0
    bytes_out: int = 0
    replication_bytes_in: int = 0
    replication_bytes_out: int = 0
    fetch_requests: int = 0

    def __attrs_post_init__(self) -> None:
        assert min(attrs.astuple(self)) >= 0, f"counters only go up: {self}"


_COUNTER_NAMES = tuple(field.name for field in attrs.fields(BrokerTopicCounters))
# Each counter is a Java long's count (Kafka's meters), so a value past it is not a count.
MAX_COUNTER = 2**63 - 1


def counters_to_json(counters: BrokerTopicCounters) -> JsonObject:
    return attrs.asdict(counters)


def counters_from_json(fields: Fields) -> BrokerTopicCounters:
    values = {name: fields.integer(name) for name in _COUNTER_NAMES}
    wrong = [name for name, value in values.items() if not 0 <= value <= MAX_COUNTER]
    if wrong:
        raise JsonBodyError(f"The counter {wrong[0]!r} must be between 0 and {MAX_COUNTER}.")
    return BrokerTopicCounters(**values)


@attrs.frozen
class BrokerHeartbeatRequest:
    broker_id: int
    broker_epoch: int
    current_metadata_offset: int
    want_fence: bool = False
    want_shut_down: bool = False
    # KIP-858 ``OfflineLogDirs``: the directory ids of the broker's failed log dirs.
    offline_log_dirs: tuple[str, ...] = ()
    # pykraft: the broker's replicas on those dirs (Kafka reads them from the partitions'
    # ``Directories``; see quorum.managers.directories).
    offline_replicas: tuple[OfflineReplica, ...] = ()
    # pykraft: the broker's throughput counters for the console's rates; None from a broker
    # that does not send them (older, or a test's), which heartbeats as before.
    counters: BrokerTopicCounters | None = None
    # pykraft: the broker's own monotonic clock when it read ``counters`` (one clock per
    # process, so per broker epoch): rates use it, not when the controller got to the heartbeat.
    counters_sampled_ms: int | None = None
    # Why the counters sent were dropped (the heartbeat itself is accepted: counters only feed
    # the console, never a broker's liveness); None when they were fine or absent.
    counters_refused: str | None = None


@attrs.frozen
class BrokerHeartbeatResponse:
    """Kafka's BrokerHeartbeatResponse; over HTTP a failed heartbeat is the error body instead,
    so an answer read back carries ``SUCCESS``."""

    error: ApiError = SUCCESS
    is_caught_up: bool = False
    is_fenced: bool = True
    in_controlled_shutdown: bool = False
    should_shut_down: bool = False


def heartbeat_request_to_json(request: BrokerHeartbeatRequest) -> JsonObject:
    body: JsonObject = {
        "broker_id": request.broker_id,
        "broker_epoch": request.broker_epoch,
        "current_metadata_offset": request.current_metadata_offset,
        "want_fence": request.want_fence,
        "want_shut_down": request.want_shut_down,
        "offline_log_dirs": list(request.offline_log_dirs),
        "offline_replicas": [
            {"topic_id": r.topic_id, "partition": r.partition_id} for r in request.offline_replicas
        ],
    }
    if request.counters is not None:
        metrics = counters_to_json(request.counters)
        if request.counters_sampled_ms is not None:
            metrics["sampled_ms"] = request.counters_sampled_ms
        body["broker_topic_metrics"] = metrics
    return body


def _offline_log_dirs(fields: Fields) -> tuple[str, ...]:
    directory_ids = fields.array("offline_log_dirs", [])
    if not all(isinstance(directory_id, str) for directory_id in directory_ids):
        raise JsonBodyError("Each offline log dir is a directory id.")
    return tuple(directory_ids)


def heartbeat_request_from_json(fields: Fields) -> BrokerHeartbeatRequest:
    try:
        counters, sampled_ms = _optional_counters(fields)
        refused = None
    except JsonBodyError as error:
        counters, sampled_ms, refused = None, None, str(error)
    return BrokerHeartbeatRequest(
        broker_id=fields.integer("broker_id"),
        broker_epoch=fields.integer("broker_epoch"),
        current_metadata_offset=fields.integer("current_metadata_offset", -1),
        want_fence=fields.boolean("want_fence", False),
        want_shut_down=fields.boolean("want_shut_down", False),
        offline_log_dirs=_offline_log_dirs(fields),
        offline_replicas=tuple(
            OfflineReplica(topic_id=r.string("topic_id"), partition_id=r.integer("partition"))
            for r in fields.objects("offline_replicas", [])
        ),
        counters=counters,
        counters_sampled_ms=sampled_ms,
        counters_refused=refused,
    )


def _optional_counters(fields: Fields) -> tuple[BrokerTopicCounters | None, int | None]:
    counters = fields.optional_object("broker_topic_metrics")
    if counters is None:
        return None, None
    return counters_from_json(counters), counters.optional_integer("sampled_ms")


def heartbeat_response_to_json(response: BrokerHeartbeatResponse) -> JsonObject:
    assert response.error.is_success(), "a failed heartbeat is answered with the error body"
    return {
        "is_caught_up": response.is_caught_up,
        "is_fenced": response.is_fenced,
        "in_controlled_shutdown": response.in_controlled_shutdown,
        "should_shut_down": response.should_shut_down,
    }


def heartbeat_response_from_json(fields: Fields) -> BrokerHeartbeatResponse:
    return BrokerHeartbeatResponse(
        is_caught_up=fields.boolean("is_caught_up"),
        is_fenced=fields.boolean("is_fenced"),
        in_controlled_shutdown=fields.boolean("in_controlled_shutdown"),
        should_shut_down=fields.boolean("should_shut_down"),
    )


# ---------------------------------------------------------------------------- unregister


@attrs.frozen
class UnregisterBrokerRequest:
    broker_id: int


@attrs.frozen
class UnregisterBrokerResponse:
    error: ApiError


def unregister_request_from_path(raw: str) -> UnregisterBrokerRequest:
    """``{broker_id}`` of ``DELETE /v1/brokers/{broker_id}``."""
    if not (raw.isascii() and raw.isdigit()):
        raise JsonBodyError(f"Broker id {raw!r} is not an integer.")
    return UnregisterBrokerRequest(broker_id=int(raw))


def unregister_answer_to_json(request: UnregisterBrokerRequest) -> JsonObject:
    return {"broker_id": request.broker_id}


def unregister_answer_from_json(fields: Fields) -> UnregisterBrokerRequest:
    return UnregisterBrokerRequest(broker_id=fields.integer("broker_id"))


# ---------------------------------------------------------------------------- AlterPartition


@attrs.frozen
class BrokerState:
    """One member of a proposed ISR; ``broker_epoch`` -1 skips the epoch check (KIP-903)."""

    broker_id: int
    broker_epoch: int = -1


@attrs.frozen
class AlterPartitionData:
    topic_id: str
    partition_index: int
    leader_epoch: int
    partition_epoch: int
    new_isr_with_epochs: tuple[BrokerState, ...]
    leader_recovery_state: int = _RECOVERED


@attrs.frozen
class AlterPartitionRequest:
    broker_id: int
    broker_epoch: int
    partitions: tuple[AlterPartitionData, ...]


@attrs.frozen
class AlterPartitionResult:
    topic_id: str
    partition_index: int
    error: ApiError
    leader_id: int = -1
    leader_epoch: int = -1
    isr: tuple[int, ...] = ()
    partition_epoch: int = -1
    leader_recovery_state: int = _RECOVERED


@attrs.frozen
class AlterPartitionResponse:
    # Request-level error (STALE_BROKER_EPOCH); the partitions are empty then.
    error: ApiError
    partitions: tuple[AlterPartitionResult, ...] = ()


def _isr_member(item: object, where: str) -> BrokerState:
    """A member is a broker id (KIP-497, before epochs) or {broker_id, broker_epoch} (KIP-903)."""
    if type(item) is int:
        return BrokerState(broker_id=item)
    if isinstance(item, dict):
        member = Fields(item, where)
        return BrokerState(
            broker_id=member.integer("broker_id"), broker_epoch=member.integer("broker_epoch", -1)
        )
    raise JsonBodyError("Each new_isr member is a broker id or {broker_id, broker_epoch}.")


def alter_partition_request_to_json(request: AlterPartitionRequest) -> JsonObject:
    return {
        "broker_id": request.broker_id,
        "broker_epoch": request.broker_epoch,
        "partitions": [
            {
                "topic_id": p.topic_id,
                "partition_index": p.partition_index,
                "leader_epoch": p.leader_epoch,
                "partition_epoch": p.partition_epoch,
                "new_isr": [
                    {"broker_id": m.broker_id, "broker_epoch": m.broker_epoch}
                    for m in p.new_isr_with_epochs
                ],
                "leader_recovery_state": p.leader_recovery_state,
            }
            for p in request.partitions
        ],
    }


def _alter_partition_data(fields: Fields) -> AlterPartitionData:
    return AlterPartitionData(
        topic_id=fields.string("topic_id"),
        partition_index=fields.integer("partition_index"),
        leader_epoch=fields.integer("leader_epoch"),
        partition_epoch=fields.integer("partition_epoch"),
        new_isr_with_epochs=tuple(
            _isr_member(m, "a member of 'new_isr'") for m in fields.array("new_isr")
        ),
        leader_recovery_state=fields.integer("leader_recovery_state", _RECOVERED),
    )


def alter_partition_request_from_json(fields: Fields) -> AlterPartitionRequest:
    return AlterPartitionRequest(
        broker_id=fields.integer("broker_id"),
        broker_epoch=fields.integer("broker_epoch"),
        partitions=tuple(_alter_partition_data(p) for p in fields.objects("partitions")),
    )


def alter_partition_response_to_json(response: AlterPartitionResponse) -> JsonObject:
    assert response.error.is_success(), "a refused request is answered with the error body"
    return {
        "partitions": [
            {
                "topic_id": p.topic_id,
                "partition_index": p.partition_index,
                **error_field_to_json(p.error),
                "leader_id": p.leader_id,
                "leader_epoch": p.leader_epoch,
                "isr": list(p.isr),
                "partition_epoch": p.partition_epoch,
                "leader_recovery_state": p.leader_recovery_state,
            }
            for p in response.partitions
        ]
    }


def _alter_partition_result(fields: Fields) -> AlterPartitionResult:
    return AlterPartitionResult(
        topic_id=fields.string("topic_id"),
        partition_index=fields.integer("partition_index"),
        error=error_field_from_json(fields),
        leader_id=fields.integer("leader_id"),
        leader_epoch=fields.integer("leader_epoch"),
        isr=fields.integers("isr"),
        partition_epoch=fields.integer("partition_epoch"),
        leader_recovery_state=fields.integer("leader_recovery_state"),
    )


def alter_partition_response_from_json(fields: Fields) -> AlterPartitionResponse:
    return AlterPartitionResponse(
        error=SUCCESS,
        partitions=tuple(_alter_partition_result(p) for p in fields.objects("partitions")),
    )


# ---------------------------------------------------------------------------- producer ids


@attrs.frozen
class AllocateProducerIdsRequest:
    broker_id: int
    broker_epoch: int


@attrs.frozen
class AllocateProducerIdsResponse:
    error: ApiError
    producer_id_start: int = -1
    producer_id_len: int = 0


def producer_ids_request_to_json(request: AllocateProducerIdsRequest) -> JsonObject:
    return {"broker_id": request.broker_id, "broker_epoch": request.broker_epoch}


def producer_ids_request_from_json(fields: Fields) -> AllocateProducerIdsRequest:
    return AllocateProducerIdsRequest(
        broker_id=fields.integer("broker_id"), broker_epoch=fields.integer("broker_epoch")
    )


def producer_ids_response_to_json(response: AllocateProducerIdsResponse) -> JsonObject:
    assert response.error.is_success(), "a refused request is answered with the error body"
    return {
        "producer_id_start": response.producer_id_start,
        "producer_id_len": response.producer_id_len,
    }


def producer_ids_response_from_json(fields: Fields) -> AllocateProducerIdsResponse:
    return AllocateProducerIdsResponse(
        error=SUCCESS,
        producer_id_start=fields.integer("producer_id_start"),
        producer_id_len=fields.integer("producer_id_len"),
    )
