"""Produce (v3-v11; KafkaApis answers v0-v2 itself) — Kafka's ``KafkaApis.handleProduceRequest``.

Each partition's records are checked the way Kafka's ``ProduceRequest.validateRecords`` does:
at least one batch, magic 2, exactly one batch (INVALID_RECORD otherwise), zstd only from v7
(UNSUPPORTED_COMPRESSION_TYPE); bytes that do not even hold a batch header are CORRUPT_MESSAGE.
The rest (CRC, sizes, record counts, idempotence) is the log's (``ReplicaManager``), with the
error codes it maps. The appends happen before the handler's first ``await`` — acks=-1 then
waits for the ISR (``ReplicaManager.append_records``, Kafka's DelayedProduce: NONE,
NOT_ENOUGH_REPLICAS_AFTER_APPEND, NOT_LEADER_OR_FOLLOWER or REQUEST_TIMED_OUT after
``timeout_ms``) — so appends on one connection keep request order.

acks=0 gets no response at all. When such a request failed, Kafka closes the connection so the
client notices (``sendResponseCallback``: "closing connection due to error during produce
request with correlation id ... acks=0"); we raise a ``ProtocolError`` to the same effect.
A NOT_LEADER_OR_FOLLOWER partition carries the current leader and its endpoint (KIP-951, v10).

A transactional producer's request (``transactional_id``) goes to ``ReplicaManager`` with its id:
with ``transaction.partition.verification.enable`` the broker asks the transaction coordinator
before a producer's first write to a partition (KIP-890 part 1, ``broker.transactional_appends``).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping

import attrs

from pykraft.broker.handlers.services import BrokerServices, current_leader
from pykraft.broker.kafka_apis import ApiHandler, ResponseBody, request_throttle_ms
from pykraft.broker.network import RequestContext
from pykraft.broker.replica_manager import AppendResult
from pykraft.broker.transaction_verification import supported_operation
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.protocol.common import UNKNOWN_LEADER, NodeEndpoint
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceResponse,
    decode_produce_request,
    encode_produce_response,
    unsupported_version_response,
)
from pykraft.storage.record_batch import (
    ATTRIBUTES_POS,
    COMPRESSION_MASK,
    CURRENT_MAGIC,
    LOG_OVERHEAD,
    MAGIC_POS,
    CompressionType,
)
from pykraft.storage.topic_partition import TopicPartition

FIRST_SERVED_VERSION = 3
FIRST_ZSTD_VERSION = 7


class ProduceFailedWithoutAcks(ProtocolError):
    """An acks=0 produce failed: closing the connection is the only way to say so."""


def validate_records(records: memoryview | None, api_version: int) -> tuple[Errors, str] | None:
    """Kafka's ``ProduceRequest.validateRecords`` for v3+; None when the records may go on."""
    prefix = f"Produce requests with version {api_version}"
    if records is None or len(records) == 0:
        return Errors.INVALID_RECORD, f"{prefix} must have at least one record batch"
    if len(records) <= MAGIC_POS:
        return Errors.CORRUPT_MESSAGE, f"{len(records)} bytes cannot hold a record batch"
    if records[MAGIC_POS] != CURRENT_MAGIC:
        return (
            Errors.INVALID_RECORD,
            f"{prefix} are only allowed to contain record batches with magic version 2",
        )
    batch_length = int.from_bytes(records[LOG_OVERHEAD - 4 : LOG_OVERHEAD], "big", signed=True)
    if batch_length >= 0 and LOG_OVERHEAD + batch_length < len(records):
        return (
            Errors.INVALID_RECORD,
            f"{prefix} are only allowed to contain exactly one record batch",
        )
    if len(records) > ATTRIBUTES_POS + 1 and api_version < FIRST_ZSTD_VERSION:
        compression = records[ATTRIBUTES_POS + 1] & COMPRESSION_MASK
        if compression == CompressionType.ZSTD:
            return (
                Errors.UNSUPPORTED_COMPRESSION_TYPE,
                f"{prefix} cannot carry zstd-compressed batches (needs version 7)",
            )
    return None


def produce_handler(services: BrokerServices) -> ApiHandler:
    async def handle(request: RequestContext, body: memoryview) -> ResponseBody | None:
        version = request.header.api_version
        produce = decode_produce_request(body, version)
        throttle_ms = 0
        if services.client_quotas is not None:
            # KafkaApis records the request's size against producer_byte_rate; recorded before
            # the first await, so the listener mutes the connection (KIP-219, acks=0 included)
            # before it dispatches the next request, as Kafka reads one request at a time.
            throttle_ms = services.client_quotas.record_produce(request, len(body))
        if version < FIRST_SERVED_VERSION:
            response = unsupported_version_response(produce)
        else:
            response = await append(
                services,
                produce,
                version,
                request.listener_name,
                writable(services, request, produce.transactional_id),
            )
        if produce.acks == 0:
            _close_if_failed(response, request)
            return None
        # request_percentage too, for acks != 0 (KafkaApis); the larger throttle is answered.
        throttle_ms = max(throttle_ms, request_throttle_ms(request))
        if throttle_ms:
            response = attrs.evolve(response, throttle_time_ms=throttle_ms)
        return encode_produce_response(response, version)

    return handle


def writable(
    services: BrokerServices, request: RequestContext, transactional_id: str | None
) -> Callable[[str], Errors] | None:
    """``KafkaApis.handleProduceRequest``'s checks: WRITE on the transactional id when there is
    one (else every partition TRANSACTIONAL_ID_AUTHORIZATION_FAILED), WRITE on each topic
    (else TOPIC_AUTHORIZATION_FAILED). Since KIP-679 (Kafka 3.0) an idempotent Produce needs
    no IDEMPOTENT_WRITE: InitProducerId checked it. None when authorization is off: every
    write is allowed, and no check runs per topic."""
    authorizer = services.authorizer
    if not authorizer.enabled:
        return None
    allowed: dict[str, Errors] = {}
    if transactional_id is not None and not authorizer.authorize(
        request, AclOperation.WRITE, ResourceType.TRANSACTIONAL_ID, transactional_id
    ):
        return lambda _: Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED

    def check(topic: str) -> Errors:
        if topic not in allowed:
            granted = authorizer.authorize(request, AclOperation.WRITE, ResourceType.TOPIC, topic)
            allowed[topic] = Errors.NONE if granted else Errors.TOPIC_AUTHORIZATION_FAILED
        return allowed[topic]

    return check


async def append(
    services: BrokerServices,
    produce: ProduceRequest,
    api_version: int,
    listener_name: str,
    authorized: Callable[[str], Errors] | None = None,
) -> ProduceResponse:
    """Validate and append every partition; the response lists them in request order.
    ``authorized(topic)`` is NONE or the error that refuses the topic's partitions."""
    entries: dict[TopicPartition, memoryview | None] = {}
    results: dict[TopicPartition, AppendResult] = {}
    for topic in produce.topic_data:
        refusal = Errors.NONE if authorized is None else authorized(topic.name)
        for partition in topic.partition_data:
            topic_partition = TopicPartition(topic.name, partition.index)
            if refusal is not Errors.NONE:
                results[topic_partition] = AppendResult(error=refusal)
                continue
            problem = validate_records(partition.records, api_version)
            if problem is None:
                entries[topic_partition] = partition.records
            else:
                results[topic_partition] = AppendResult(error=problem[0], error_message=problem[1])
    results.update(
        await services.replica_manager.append_records(
            entries,
            required_acks=produce.acks,
            timeout_ms=produce.timeout_ms,
            now_ms=services.wall_clock_ms(),
            transactional_id=produce.transactional_id,
            supported_operation=supported_operation(api_version),
        )
    )
    return _response(services, results, listener_name)


def _response(
    services: BrokerServices, results: Mapping[TopicPartition, AppendResult], listener_name: str
) -> ProduceResponse:
    image = None  # read only for a NOT_LEADER_OR_FOLLOWER partition's current leader
    topics: dict[str, list[PartitionProduceResponse]] = {}
    endpoints: dict[int, NodeEndpoint] = {}
    for topic_partition, result in results.items():
        leader = UNKNOWN_LEADER
        if result.error is Errors.NOT_LEADER_OR_FOLLOWER:
            image = services.metadata() if image is None else image
            leader, endpoint = current_leader(image, topic_partition, listener_name)
            if endpoint is not None:
                endpoints[endpoint.node_id] = endpoint
        partition = PartitionProduceResponse(
            topic_partition.partition,
            result.error,
            result.base_offset,
            result.log_append_time_ms,
            result.log_start_offset,
            tuple(BatchIndexAndErrorMessage(e.batch_index, e.message) for e in result.record_errors)
            if result.record_errors
            else (),
            result.error_message,
            leader,
        )
        partitions = topics.get(topic_partition.topic)
        if partitions is None:
            topics[topic_partition.topic] = [partition]
        else:
            partitions.append(partition)
    return ProduceResponse(
        tuple([TopicProduceResponse(name, tuple(parts)) for name, parts in topics.items()]),
        0,
        tuple([endpoints[node_id] for node_id in sorted(endpoints)]) if endpoints else (),
    )


def _close_if_failed(response: ProduceResponse, request: RequestContext) -> None:
    failed = [
        f"{topic.name}-{partition.index}: {Errors(partition.error_code).name}"
        for topic in response.responses
        for partition in topic.partition_responses
        if partition.error_code != Errors.NONE
    ]
    if failed:
        raise ProduceFailedWithoutAcks(
            f"acks=0 produce with correlation id {request.header.correlation_id} failed "
            f"({', '.join(failed)}); closing the connection so the client notices"
        )
