"""The handlers register with KafkaApis and answer through its dispatch (framing included)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse
from kafka.protocol.metadata import MetadataRequest, MetadataResponse
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.broker.handlers import broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.protocol.segments import Segments
from pykraft.storage.file_slice import FileSlice
from tests.broker.handler_support import started_cluster
from tests.broker.replica_harness import (
    Cluster,
    batch,
    encode,
    pets_led_here,
    request_context,
    services,
)


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_led_here())


def dispatch(apis: KafkaApis, api_key: ApiKey, version: int, body: bytes) -> bytes:
    async def run() -> Segments | None:
        return await apis.dispatch(request_context(api_key, version), memoryview(bytearray(body)))

    segments = asyncio.run(run())
    assert segments is not None
    frame = segments.to_bytes(
        lambda part: FileSlice(part.path, part.position, part.length).read_bytes()
    )
    assert int.from_bytes(frame[:4], "big") == len(frame) - 4
    correlation_id, body_start = parse_response_header(
        frame[4:], response_header_version(api_key, version)
    )
    assert correlation_id == 11
    return frame[4 + body_start :]


def test_every_data_plane_api_registers(cluster: Cluster) -> None:
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster)))
    assert apis.registered == {
        ApiKey.API_VERSIONS,
        ApiKey.SASL_HANDSHAKE,
        ApiKey.SASL_AUTHENTICATE,
        ApiKey.PRODUCE,
        ApiKey.FETCH,
        ApiKey.LIST_OFFSETS,
        ApiKey.METADATA,
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        ApiKey.DELETE_RECORDS,
        ApiKey.DESCRIBE_LOG_DIRS,
        ApiKey.ALTER_REPLICA_LOG_DIRS,
        ApiKey.CREATE_TOPICS,
        ApiKey.DELETE_TOPICS,
        ApiKey.CREATE_PARTITIONS,
        ApiKey.DESCRIBE_CONFIGS,
        ApiKey.ALTER_CONFIGS,
        ApiKey.INCREMENTAL_ALTER_CONFIGS,
        ApiKey.DESCRIBE_CLUSTER,
        ApiKey.CREATE_ACLS,
        ApiKey.DESCRIBE_ACLS,
        ApiKey.DELETE_ACLS,
        ApiKey.ALTER_USER_SCRAM_CREDENTIALS,
        ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS,
        ApiKey.ELECT_LEADERS,
        ApiKey.DESCRIBE_QUORUM,
        ApiKey.DESCRIBE_CLIENT_QUOTAS,
        ApiKey.ALTER_CLIENT_QUOTAS,
        ApiKey.DESCRIBE_TOPIC_PARTITIONS,
        ApiKey.UPDATE_FEATURES,
        ApiKey.UNREGISTER_BROKER,
        # KIP-853, forwarded to the controller.
        ApiKey.ADD_RAFT_VOTER,
        ApiKey.REMOVE_RAFT_VOTER,
        # KIP-714's ListClientMetricsResources, from the image.
        ApiKey.LIST_CONFIG_RESOURCES,
        # They act on the partitions this broker leads: no coordinator needed.
        ApiKey.WRITE_TXN_MARKERS,
        ApiKey.DESCRIBE_PRODUCERS,
        # KIP-455, forwarded to the controller.
        ApiKey.ALTER_PARTITION_REASSIGNMENTS,
        ApiKey.LIST_PARTITION_REASSIGNMENTS,
        ApiKey.CREATE_DELEGATION_TOKEN,
        ApiKey.RENEW_DELEGATION_TOKEN,
        ApiKey.EXPIRE_DELEGATION_TOKEN,
        ApiKey.DESCRIBE_DELEGATION_TOKEN,
    }


def test_produce_then_fetch_through_kafka_apis(cluster: Cluster) -> None:
    apis = KafkaApis()
    apis.register_all(broker_handlers(services(cluster)))
    metadata = MetadataResponse.decode(
        dispatch(apis, ApiKey.METADATA, 12, encode(MetadataRequest(version=12, topics=None), 12)),
        version=12,
    )
    assert [t.name for t in metadata.topics] == ["pets"]
    data = bytes(batch(b"hello"))
    produce = ProduceRequest(
        version=10,
        transactional_id=None,
        acks=-1,
        timeout_ms=1000,
        topic_data=[
            ProduceRequest.TopicProduceData(
                name="pets",
                partition_data=[
                    ProduceRequest.TopicProduceData.PartitionProduceData(index=0, records=data)
                ],
            )
        ],
    )
    produced = ProduceResponse.decode(
        dispatch(apis, ApiKey.PRODUCE, 10, encode(produce, 10)), version=10
    )
    assert produced.responses[0].partition_responses[0].error_code == Errors.NONE
    fetch = FetchRequest(
        version=12,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            FetchRequest.FetchTopic(
                topic="pets",
                partitions=[
                    FetchRequest.FetchTopic.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=0,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    fetched = FetchResponse.decode(dispatch(apis, ApiKey.FETCH, 12, encode(fetch, 12)), version=12)
    records = fetched.responses[0].partitions[0].records
    # The client's batch, byte for byte, but for the stamped base offset and leader epoch.
    assert records[16:] == data[16:]
