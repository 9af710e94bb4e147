"""Raw Produce, ListOffsets and Fetch exchanges for the record-level hostile cases.

The batches these cases send lie about their records, so no client library may build them:
the helpers here put exact bytes on the wire (kafka-python's request classes, a valid header
and CRC around whatever records section the case chooses) and decode the one answer.
"""

from __future__ import annotations

import struct
import time
from pathlib import Path
from typing import Any

import crc32c
from kafka.protocol.consumer import (
    FetchRequest,
    FetchResponse,
    ListOffsetsRequest,
    ListOffsetsResponse,
)
from kafka.protocol.producer import ProduceRequest, ProduceResponse

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.headers import parse_response_header, response_header_version
from pykraft.storage.record_batch import (
    BATCH_HEADER_SIZE,
    BatchHeader,
    CompressionType,
    encode_header,
)
from tests.broker.wire_client import blocking_exchange, request_frame
from tests.hostile.conftest import SingleBroker

PRODUCE_VERSION = 9
LIST_OFFSETS_VERSION = 7
FETCH_VERSION = 12
TIMESTAMP = 1_700_000_000_000
RSS_LIMIT_BYTES = 300 * 1024 * 1024
ANSWER_LIMIT_S = 1.0


def raw_batch(
    records: bytes,
    count: int,
    compression: CompressionType = CompressionType.NONE,
    *,
    last_offset_delta: int | None = None,
    timestamp: int = TIMESTAMP,
) -> bytes:
    """A v2 batch with a valid header and CRC around ``records`` (already compressed)."""
    header = BatchHeader(
        base_offset=0,
        batch_length=BATCH_HEADER_SIZE - 12 + len(records),
        partition_leader_epoch=-1,
        magic=2,
        crc=0,
        attributes=int(compression),
        last_offset_delta=count - 1 if last_offset_delta is None else last_offset_delta,
        base_timestamp=timestamp,
        max_timestamp=timestamp,
        producer_id=-1,
        producer_epoch=-1,
        base_sequence=-1,
        records_count=count,
    )
    batch = bytearray(encode_header(header) + records)
    struct.pack_into(">I", batch, 17, crc32c.crc32c(bytes(batch[21:])))
    return bytes(batch)


def _exchange(broker: SingleBroker, api_key: ApiKey, version: int, body: bytes) -> bytes:
    frame = request_frame(api_key, version, 7, body)
    (answer,) = blocking_exchange(broker.host_port[1], frame, timeout_s=30.0)
    _, body_start = parse_response_header(answer, response_header_version(api_key, version))
    return answer[body_start:]


def produce(broker: SingleBroker, topic: str, records: bytes) -> tuple[int, float]:
    """``(error code, seconds to the answer)`` of an acks=-1 Produce of ``records``."""
    topic_data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        version=PRODUCE_VERSION,
        transactional_id=None,
        acks=-1,
        timeout_ms=5000,
        topic_data=[
            topic_data(
                name=topic,
                partition_data=[topic_data.PartitionProduceData(index=0, records=records)],
            )
        ],
    )
    started = time.monotonic()
    body = _exchange(broker, ApiKey.PRODUCE, PRODUCE_VERSION, request.encode(version=9))
    elapsed = time.monotonic() - started
    response = ProduceResponse.decode(body, version=PRODUCE_VERSION)
    return int(response.responses[0].partition_responses[0].error_code), elapsed


def list_offsets(broker: SingleBroker, topic: str, timestamp: int) -> tuple[int, int, float]:
    """``(error code, offset, seconds)`` of ListOffsets for ``timestamp`` on partition 0."""
    topic_cls = ListOffsetsRequest.ListOffsetsTopic
    request = ListOffsetsRequest(
        version=LIST_OFFSETS_VERSION,
        replica_id=-1,
        isolation_level=0,
        topics=[
            topic_cls(
                name=topic,
                partitions=[
                    topic_cls.ListOffsetsPartition(
                        partition_index=0, current_leader_epoch=-1, timestamp=timestamp
                    )
                ],
            )
        ],
    )
    started = time.monotonic()
    body = _exchange(
        broker, ApiKey.LIST_OFFSETS, LIST_OFFSETS_VERSION,
        request.encode(version=LIST_OFFSETS_VERSION),
    )  # fmt: skip
    elapsed = time.monotonic() - started
    response = ListOffsetsResponse.decode(body, version=LIST_OFFSETS_VERSION)
    partition = response.topics[0].partitions[0]
    return int(partition.error_code), int(partition.offset), elapsed


def fetch(broker: SingleBroker, topic: str, offset: int) -> tuple[int, int, float]:
    """``(error code, bytes of records, seconds)`` of a consumer Fetch from ``offset``."""
    topic_cls = FetchRequest.FetchTopic
    request = FetchRequest(
        version=FETCH_VERSION,
        replica_id=-1,
        max_wait_ms=0,
        min_bytes=0,
        max_bytes=64 << 20,
        isolation_level=0,
        session_id=0,
        session_epoch=-1,
        topics=[
            topic_cls(
                topic=topic,
                partitions=[
                    topic_cls.FetchPartition(
                        partition=0,
                        current_leader_epoch=-1,
                        fetch_offset=offset,
                        last_fetched_epoch=-1,
                        log_start_offset=-1,
                        partition_max_bytes=64 << 20,
                    )
                ],
            )
        ],
        forgotten_topics_data=[],
        rack_id="",
    )
    started = time.monotonic()
    body = _exchange(broker, ApiKey.FETCH, FETCH_VERSION, request.encode(version=FETCH_VERSION))
    elapsed = time.monotonic() - started
    response: Any = FetchResponse.decode(body, version=FETCH_VERSION)
    partition = response.responses[0].partitions[0]
    return int(partition.error_code), len(partition.records or b""), elapsed


def peak_rss_bytes(broker: SingleBroker) -> int:
    """The broker process's peak resident set (VmHWM of /proc/<pid>/status)."""
    assert broker.broker.process is not None
    status = Path(f"/proc/{broker.broker.process.pid}/status").read_text()
    for line in status.splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM in /proc/<pid>/status")
