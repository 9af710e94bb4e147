"""The InitProducerId handler (Kafka's KafkaApis.handleInitProducerIdRequest and
TransactionCoordinator.handleInitProducerId for producers without a transactional id):
kafka-python-encoded requests at every served version, producer-id blocks allocated by the real
``QuorumController`` against the broker's image, and the ids used for idempotent Produce through
the real handlers — a retried batch is answered with its original offset."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.producer import (
    InitProducerIdRequest,
    InitProducerIdResponse,
    ProduceRequest,
    ProduceResponse,
)

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers import broker_handlers
from pykraft.broker.handlers.init_producer_id import init_producer_id_handler
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.broker.producer_ids import ProducerIdManager
from pykraft.metadata.records import ProducerIdsRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.quorum.controller import AllocateProducerIdsRequest, QuorumController
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    LOCAL,
    NOW_MS,
    PETS0,
    Cluster,
    batch,
    call,
    call_async,
    encode,
    pets_led_here,
    request_context,
    services,
)

# broker(LOCAL) in the harness registers with broker epoch 100 + LOCAL.
LOCAL_BROKER_EPOCH = 101
_Topic = ProduceRequest.TopicProduceData
_Partition = _Topic.PartitionProduceData


class QuorumAllocator:
    """``POST /v1/producer-ids`` in process: the real QuorumController decides, and its
    ProducerIdsRecord is published to the broker's image, as the HTTP route does."""

    def __init__(self, cluster: Cluster) -> None:
        self.cluster = cluster
        self.controller = QuorumController(rng=random.Random(7), now_ms=NOW_MS)
        self.calls = 0

    async def allocate_producer_ids(self, *, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        self.calls += 1
        result = self.controller.allocate_producer_ids(
            self.cluster.image, AllocateProducerIdsRequest(broker_id, broker_epoch), NOW_MS
        )
        error = result.response.error
        if error.is_failure():
            raise ControllerError(error.name, error.message or error.name)
        self.cluster.publish(*result.records)
        return result.response.producer_id_start, result.response.producer_id_len


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_led_here())


def manager(
    cluster: Cluster, broker_epoch: int = LOCAL_BROKER_EPOCH, **options: Any
) -> ProducerIdManager:
    options.setdefault("monotonic_ms", cluster.clock.monotonic_ms)
    return ProducerIdManager(
        QuorumAllocator(cluster), broker_id=LOCAL, broker_epoch=lambda: broker_epoch, **options
    )


def init_request(
    version: int,
    transactional_id: str | None = None,
    producer_id: int = -1,
    producer_epoch: int = -1,
) -> bytes:
    request = InitProducerIdRequest(
        version=version,
        transactional_id=transactional_id,
        transaction_timeout_ms=60_000,
        producer_id=producer_id,
        producer_epoch=producer_epoch,
    )
    return encode(request, version)


async def init_producer_id(
    ids: ProducerIdManager, version: int = 4, **fields: Any
) -> tuple[Errors, int, int]:
    body = await call_async(
        init_producer_id_handler(ids),
        ApiKey.INIT_PRODUCER_ID,
        version,
        init_request(version, **fields),
    )
    assert body is not None
    response = InitProducerIdResponse.decode(body, version=version)
    assert response.throttle_time_ms == 0
    return Errors(response.error_code), response.producer_id, response.producer_epoch


@pytest.mark.parametrize("version", [0, 1, 2, 3, 4])
def test_each_request_gets_a_new_producer_id_with_epoch_0(cluster: Cluster, version: int) -> None:
    ids = manager(cluster)

    async def body() -> list[tuple[Errors, int, int]]:
        return [await init_producer_id(ids, version) for _ in range(3)]

    assert asyncio.run(body()) == [(Errors.NONE, 0, 0), (Errors.NONE, 1, 0), (Errors.NONE, 2, 0)]
    # The block came from the controller, which logged where the next one starts (KIP-730).
    assert cluster.image.producer_ids.next_producer_id == 1000


def test_a_v3_request_naming_its_producer_gets_a_new_id_too(cluster: Cluster) -> None:
    # TransactionCoordinator: with a null transactional id "always blindly accept the request
    # and return a new producerId" (kafka-python's idempotent KIP-360 bump takes it).
    ids = manager(cluster)

    async def body() -> list[tuple[Errors, int, int]]:
        first = await init_producer_id(ids, 3)
        return [first, await init_producer_id(ids, 3, producer_id=first[1], producer_epoch=0)]

    assert asyncio.run(body()) == [(Errors.NONE, 0, 0), (Errors.NONE, 1, 0)]


@pytest.mark.parametrize(
    ("fields", "expected"),
    [
        # KIP-360: producer id and epoch are both -1 or both name the producer.
        ({"producer_id": 7, "producer_epoch": -1}, Errors.INVALID_REQUEST),
        ({"producer_id": -1, "producer_epoch": 3}, Errors.INVALID_REQUEST),
        # TransactionCoordinator: an empty transactional id is an invalid request.
        ({"transactional_id": ""}, Errors.INVALID_REQUEST),
        # No transaction coordinator here: no client may use a transactional id.
        ({"transactional_id": "orders-tx"}, Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED),
    ],
)
def test_requests_refused_before_any_id_is_used(
    cluster: Cluster, fields: dict[str, Any], expected: Errors
) -> None:
    ids = manager(cluster)

    async def body() -> list[tuple[Errors, int, int]]:
        return [await init_producer_id(ids, 4, **fields), await init_producer_id(ids, 4)]

    assert asyncio.run(body()) == [(expected, -1, -1), (Errors.NONE, 0, 0)]


def test_transactional_ids_are_refused_at_every_version(cluster: Cluster) -> None:
    ids = manager(cluster)

    async def body() -> list[tuple[Errors, int, int]]:
        return [await init_producer_id(ids, v, transactional_id="t") for v in range(5)]

    assert asyncio.run(body()) == [(Errors.TRANSACTIONAL_ID_AUTHORIZATION_FAILED, -1, -1)] * 5


def test_no_block_from_the_controller_answers_a_retriable_error(cluster: Cluster) -> None:
    # The controller refuses a stale broker epoch (STALE_BROKER_EPOCH); Kafka's manager answers
    # COORDINATOR_LOAD_IN_PROGRESS, which clients retry, "rather than REQUEST_TIMED_OUT since
    # older clients treat the error as fatal".
    ids = manager(cluster, broker_epoch=LOCAL_BROKER_EPOCH - 1)
    answer = asyncio.run(init_producer_id(ids))
    assert answer == (Errors.COORDINATOR_LOAD_IN_PROGRESS, -1, -1)
    assert cluster.image.producer_ids.next_producer_id == -1  # nothing allocated


def test_blocks_of_two_brokers_never_overlap(cluster: Cluster) -> None:
    # The controller's ProducerIdsRecord moves the next block past every block handed out.
    ours = manager(cluster)
    cluster.publish(ProducerIdsRecord(broker_id=2, broker_epoch=102, next_producer_id=7000))
    assert asyncio.run(init_producer_id(ours)) == (Errors.NONE, 7000, 0)
    assert cluster.image.producer_ids.next_producer_id == 8000


# ------------------------------------------------------------------ through KafkaApis


def dispatch(apis: KafkaApis, api_key: ApiKey, version: int, body: bytes) -> bytes:
    """One request through KafkaApis.dispatch; the response body after its header."""

    async def run() -> bytes:
        segments = await apis.dispatch(
            request_context(api_key, version), memoryview(bytearray(body))
        )
        assert segments is not None
        return segments.to_bytes(lambda part: b"")  # no file slices in these answers

    frame = asyncio.run(run())
    _, body_start = parse_response_header(frame[4:], response_header_version(api_key, version))
    return frame[4 + body_start :]


def produce_body(records: bytes, version: int = 9) -> bytes:
    request = ProduceRequest(
        version=version,
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[_Topic(name="pets", partition_data=[_Partition(index=0, records=records)])],
    )
    return encode(request, version)


def produced(apis: KafkaApis, records: bytes) -> tuple[Errors, int]:
    response = ProduceResponse.decode(
        dispatch(apis, ApiKey.PRODUCE, 9, produce_body(records)), version=9
    )
    partition = response.responses[0].partition_responses[0]
    return Errors(partition.error_code), partition.base_offset


def test_kafka_apis_serves_init_producer_id_and_the_ids_deduplicate_produce(
    cluster: Cluster,
) -> None:
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster), producer_ids=manager(cluster)))
    assert ApiKey.INIT_PRODUCER_ID in apis.registered
    init = InitProducerIdResponse.decode(
        dispatch(apis, ApiKey.INIT_PRODUCER_ID, 4, init_request(4)), version=4
    )
    assert (init.error_code, init.producer_id, init.producer_epoch) == (0, 0, 0)
    producer = {"producer_id": init.producer_id, "producer_epoch": init.producer_epoch}

    assert produced(apis, bytes(batch(b"plain"))) == (Errors.NONE, 0)
    first = bytes(batch(b"a", b"b", base_sequence=0, **producer))
    assert produced(apis, first) == (Errors.NONE, 1)
    # The producer retries the same batch (its answer was lost): the original offset, nothing
    # appended (Kafka's ProducerStateManager duplicate check over the last five batches).
    assert produced(apis, first) == (Errors.NONE, 1)
    assert produced(apis, bytes(batch(b"c", base_sequence=2, **producer))) == (Errors.NONE, 3)
    assert produced(apis, first) == (Errors.NONE, 1)
    # A gap in the sequence is refused (ProducerAppendInfo.checkSequence).
    assert (
        produced(apis, bytes(batch(b"e", base_sequence=9, **producer)))[0]
        == Errors.OUT_OF_ORDER_SEQUENCE_NUMBER
    )
    assert cluster.replica_manager.get_partition(PETS0).log_end_offset == 4  # type: ignore[union-attr]


def test_without_a_producer_id_source_init_producer_id_is_not_registered(
    cluster: Cluster,
) -> None:
    assert ApiKey.INIT_PRODUCER_ID not in broker_handlers(services(cluster))


def test_the_handler_decodes_with_kafka_python_at_v0(cluster: Cluster) -> None:
    # aiokafka and librdkafka < 2.11 send v0 (DESIGN.md §3.5).
    ids = manager(cluster)
    body = call(init_producer_id_handler(ids), ApiKey.INIT_PRODUCER_ID, 0, init_request(0))
    assert body is not None
    response = InitProducerIdResponse.decode(body, version=0)
    assert (response.error_code, response.producer_id, response.producer_epoch) == (0, 0, 0)
