"""Whole request/response exchanges, byte for byte, without sockets.

A client library (kafka-python, whose framing is independent of ours) writes a framed request;
the bytes go through ``FrameDecoder`` → ``parse_request_header`` → ``request_disposition`` →
body codec → ``frame_response``, and the client library parses our framed answer. This is the
path the broker's network layer will drive.
"""

from __future__ import annotations

import io
import uuid
from typing import Any

from kafka.protocol.consumer import FetchRequest as KafkaPythonFetchRequest
from kafka.protocol.consumer import FetchResponse as KafkaPythonFetchResponse
from kafka.protocol.metadata import ApiVersionsRequest, ApiVersionsResponse, MetadataRequest
from kafka.protocol.producer import ProduceRequest as KafkaPythonProduceRequest
from kafka.protocol.producer import ProduceResponse as KafkaPythonProduceResponse

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    RequestDisposition,
    decode_request,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    request_disposition,
    response_class,
)
from pykraft.protocol.fetch import (
    FetchableTopicResponse,
    FetchResponse,
    PartitionData,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.protocol.framing import FrameDecoder, frame_response
from pykraft.protocol.headers import parse_request_header, response_header_version
from pykraft.protocol.produce import (
    PartitionProduceResponse,
    ProduceResponse,
    TopicProduceResponse,
    decode_produce_request,
    encode_produce_response,
)
from pykraft.protocol.segments import Segments


def client_frame(request: Any, correlation_id: int) -> bytes:
    request.with_header(correlation_id=correlation_id, client_id="scenario-client")
    return bytes(request.encode(header=True, framed=True))


def receive(stream: bytes) -> list[bytearray]:
    decoder = FrameDecoder()
    frames = []
    for start in range(0, len(stream), 3):  # worst-case TCP segmentation
        decoder.receive_data(stream[start : start + 3])
        while (frame := decoder.next_frame()) is not None:
            frames.append(frame)
    return frames


def flat(segments: Segments) -> bytes:
    return segments.to_bytes(lambda part: b"")


def test_api_versions_handshake_of_a_kafka_4_client() -> None:
    # kafka-python 3.0 asks with v4, Kafka 3.9's maximum (and ours): answered at once, with
    # a response header v0 as every ApiVersions answer (KIP-511).
    first = client_frame(
        ApiVersionsRequest(
            version=4, client_software_name="kafka-python", client_software_version="3.0.12"
        ),
        1,
    )
    [frame] = receive(first)
    header, body_offset = parse_request_header(frame)
    assert (header.api_key, header.api_version, header.correlation_id) == (18, 4, 1)
    assert header.client_id == "scenario-client" and header.header_version == 2
    assert request_disposition(header.api_key, header.api_version) == RequestDisposition.SERVE
    decode_request(header.api_key, header.api_version, memoryview(frame)[body_offset:])
    answer = flat(
        frame_response(1, response_header_version(18, 4), encode_api_versions_response(4))
    )
    table = ApiVersionsResponse.decode(io.BytesIO(answer), version=4, header=True, framed=True)
    assert table.header.correlation_id == 1 and table.error_code == 0
    assert {k.api_key for k in table.api_keys} == {int(k) for k in SUPPORTED_API_VERSIONS}


def test_api_versions_handshake_of_a_client_newer_than_us() -> None:
    # A v5 request gets the v0 error listing our ApiVersions range; the client retries at 4.
    assert (
        request_disposition(ApiKey.API_VERSIONS, 5)
        == RequestDisposition.ANSWER_UNSUPPORTED_API_VERSIONS
    )
    answer = flat(
        frame_response(
            1, response_header_version(18, 5), encode_unsupported_api_versions_response()
        )
    )
    error = ApiVersionsResponse.decode(io.BytesIO(answer), version=0, header=True, framed=True)
    assert error.header.correlation_id == 1 and error.error_code == 35
    assert [(k.api_key, k.max_version) for k in error.api_keys] == [(18, 4)]


def test_pipelined_requests_keep_their_order_and_bodies() -> None:
    stream = b"".join(
        client_frame(MetadataRequest(version=version, topics=None), correlation_id)
        for correlation_id, version in enumerate([0, 4, 9, 12], start=10)
    )
    frames = receive(stream)
    seen = []
    for frame in frames:
        header, body_offset = parse_request_header(frame)
        request = decode_request(header.api_key, header.api_version, frame[body_offset:])
        seen.append((header.correlation_id, header.api_version, request.version))
    assert seen == [(10, 0, 0), (11, 4, 4), (12, 9, 9), (13, 12, 12)]


def test_metadata_v12_answer_uses_the_flexible_response_header() -> None:
    [frame] = receive(client_frame(MetadataRequest(version=12, topics=None), 7))
    header, _ = parse_request_header(frame)
    assert header.header_version == 2
    metadata_response = response_class(ApiKey.METADATA)
    body = encode_response(
        ApiKey.METADATA,
        12,
        metadata_response(
            version=12,
            throttle_time_ms=0,
            brokers=[
                metadata_response.MetadataResponseBroker(
                    node_id=1, host="127.0.0.1", port=9092, rack=None
                )
            ],
            cluster_id="pykraft",
            controller_id=1,
            topics=[],
        ),
    )
    answer = flat(frame_response(7, response_header_version(header.api_key, 12), body))
    decoded = metadata_response.decode(io.BytesIO(answer), version=12, header=True, framed=True)
    assert decoded.header.correlation_id == 7
    assert decoded.brokers[0].port == 9092 and decoded.cluster_id == "pykraft"


def test_produce_v9_then_fetch_v12_of_the_same_batch() -> None:
    batch = bytes(range(70))  # stands in for a RecordBatch; the codec never looks inside
    topic_cls = KafkaPythonProduceRequest.TopicProduceData
    produce = KafkaPythonProduceRequest(
        version=9,
        transactional_id=None,
        acks=-1,
        timeout_ms=500,
        topic_data=[
            topic_cls(
                name="events",
                partition_data=[topic_cls.PartitionProduceData(index=0, records=batch)],
            )
        ],
    )
    [frame] = receive(client_frame(produce, 21))
    header, body_offset = parse_request_header(frame)
    request = decode_produce_request(memoryview(frame)[body_offset:], header.api_version)
    records = request.topic_data[0].partition_data[0].records
    assert records is not None and records.obj is frame and bytes(records) == batch
    body = encode_produce_response(
        ProduceResponse(
            (
                TopicProduceResponse(
                    "events", (PartitionProduceResponse(0, base_offset=41, log_start_offset=0),)
                ),
            )
        ),
        9,
    )
    answer = flat(frame_response(21, response_header_version(0, 9), body))
    produced = KafkaPythonProduceResponse.decode(
        io.BytesIO(answer), version=9, header=True, framed=True
    )
    assert produced.header.correlation_id == 21
    assert produced.responses[0].partition_responses[0].base_offset == 41

    fetch_topic = KafkaPythonFetchRequest.FetchTopic
    fetch = KafkaPythonFetchRequest(
        version=12,
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        max_bytes=1 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            fetch_topic(
                topic="events",
                partitions=[
                    fetch_topic.FetchPartition(
                        partition=0,
                        current_leader_epoch=3,
                        fetch_offset=41,
                        last_fetched_epoch=3,
                        log_start_offset=-1,
                        partition_max_bytes=1 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    [frame] = receive(client_frame(fetch, 22))
    header, body_offset = parse_request_header(frame)
    fetch_request = decode_fetch_request(frame[body_offset:], header.api_version)
    assert fetch_request.topics[0].partitions[0].fetch_offset == 41
    body_segments = encode_fetch_response(
        FetchResponse(
            (
                FetchableTopicResponse(
                    (
                        PartitionData(
                            0,
                            high_watermark=42,
                            last_stable_offset=42,
                            log_start_offset=0,
                            records=(records,),
                        ),
                    ),
                    topic="events",
                    topic_id=uuid.uuid4(),
                ),
            )
        ),
        12,
    )
    answer = flat(frame_response(22, response_header_version(1, 12), body_segments))
    fetched = KafkaPythonFetchResponse.decode(
        io.BytesIO(answer), version=12, header=True, framed=True
    )
    assert fetched.header.correlation_id == 22
    assert bytes(fetched.responses[0].partitions[0].records) == batch
