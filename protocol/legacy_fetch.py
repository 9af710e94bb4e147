"""Fetch v0-v3: the versions that return message format v0/v1, advertised and answered
UNSUPPORTED_VERSION on every partition.

Why: Kafka 3.9 advertises Fetch from v0 (``FetchRequest.json``) and converts stored batches down
for these versions; pykraft stores only RecordBatch v2 and never converts (DESIGN.md §3.3), so
it answers them the way Kafka's ``FetchRequest.getErrorResponse`` answers any failed fetch: each
partition asked for with the error, high watermark -1 and no records. A v0-v3 client learns
the broker is too new instead of being disconnected (``protocol.apis.request_disposition``).

Layouts (Kafka's ``FetchRequest.json`` / ``FetchResponse.json`` at v0-v3, none flexible):
request ``replica_id, max_wait_ms, min_bytes, max_bytes (v3+), topics [topic, partitions
[partition, fetch_offset, partition_max_bytes]]``; response ``throttle_time_ms (v1+), responses
[topic, partitions [partition_index, error_code, high_watermark, records]]``.
"""

from __future__ import annotations

import struct

import attrs

from pykraft.protocol.errors import Errors
from pykraft.protocol.kafka_3_9_versions import LEGACY_FETCH_VERSIONS
from pykraft.protocol.segments import Buffer
from pykraft.protocol.wire import Reader, encode_array_length, encode_string

# FetchResponse.INVALID_HIGH_WATERMARK.
INVALID_HIGH_WATERMARK = -1


@attrs.frozen
class LegacyFetchTopic:
    name: str
    partitions: tuple[int, ...]


def decode_legacy_fetch_request(body: Buffer, api_version: int) -> tuple[LegacyFetchTopic, ...]:
    """The topics and partitions a Fetch v0-v3 request names; ``MalformedRequestError`` on bad
    bytes."""
    assert api_version in LEGACY_FETCH_VERSIONS, api_version
    reader = Reader(body)
    reader.int32("replica_id")
    reader.int32("max_wait_ms")
    reader.int32("min_bytes")
    if api_version >= 3:
        reader.int32("max_bytes")
    topics = []
    for _ in range(reader.array_length("topics", compact=False)):
        name = reader.string("topic", compact=False)
        partitions = []
        for _ in range(reader.array_length("partitions", compact=False)):
            partitions.append(reader.int32("partition"))
            reader.int64("fetch_offset")
            reader.int32("partition_max_bytes")
        topics.append(LegacyFetchTopic(name, tuple(partitions)))
    return tuple(topics)


def encode_legacy_fetch_error(
    topics: tuple[LegacyFetchTopic, ...],
    api_version: int,
    error: Errors = Errors.UNSUPPORTED_VERSION,
) -> bytes:
    """The Fetch v0-v3 response body with ``error`` on every partition asked for."""
    assert api_version in LEGACY_FETCH_VERSIONS, api_version
    out = bytearray()
    if api_version >= 1:
        out += struct.pack(">i", 0)  # throttle_time_ms
    out += encode_array_length(len(topics), compact=False)
    for topic in topics:
        out += encode_string(topic.name, compact=False)
        out += encode_array_length(len(topic.partitions), compact=False)
        for partition in topic.partitions:
            # partition_index, error_code, high_watermark, records (empty, not null)
            out += struct.pack(">ihqi", partition, int(error), INVALID_HIGH_WATERMARK, 0)
    return bytes(out)
