"""The Metadata response (v0-v12), encoded by hand, a topic at a time.

Why by hand: a broker answers a client's Metadata for every topic it asks about, and with
10,000 partitions building kafka-python's objects and encoding them took 50 ms of the broker's
loop on an idle machine and 0.4-0.5 s on a loaded one (issue 18's scale runs: librdkafka asks
again at every leader change, and a broker answered nothing else meanwhile). Each topic's entry
is encoded on its own (``encode_topic``), and each partition's within it (``encode_partition``),
so the broker can keep their bytes while the topic, the partition and the brokers they name stay
as they are; ``encode_response`` joins the entries.

Layout, from Kafka's ``MetadataResponse.json``: ``throttle_time_ms`` (v3+); brokers (node id,
host, port, rack v1+); ``cluster_id`` (v2+); ``controller_id`` (v1+); topics (error, name —
nullable from v12 —, topic id v10+, ``is_internal`` v1+, partitions, topic authorized operations
v8+); cluster authorized operations (v8-v10). A partition: error, index, leader, leader epoch
(v7+), replicas, ISR, offline replicas (v5+). From v9 the message is flexible: compact strings
and arrays, and an empty tagged-field section closing every struct.
"""

from __future__ import annotations

import struct
from collections.abc import Sequence
from typing import NamedTuple

from pykraft.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    encode_array_length,
    encode_nullable_string,
    encode_string,
    encode_uvarint,
)

FIRST_VERSION, LAST_VERSION = 0, 12
FIRST_FLEXIBLE_VERSION = 9
# KIP-430: authorized operations not asked for (kafka-python's {31}, Kafka's Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = 1 << 31

_INT16 = struct.Struct(">h")
_INT32 = struct.Struct(">i")
_UINT32 = struct.Struct(">I")
_BROKER = struct.Struct(">i")
_PARTITION_HEAD = struct.Struct(">hii")  # error, index, leader
_PARTITION_HEAD_V7 = struct.Struct(">hiii")  # ... and leader epoch


class BrokerEntry(NamedTuple):
    node_id: int
    host: str
    port: int
    rack: str | None


class PartitionEntry(NamedTuple):
    error_code: int
    partition_index: int
    leader_id: int
    leader_epoch: int
    replica_nodes: Sequence[int]
    isr_nodes: Sequence[int]
    offline_replicas: Sequence[int]


def check_version(version: int) -> None:
    if not FIRST_VERSION <= version <= LAST_VERSION:
        raise ValueError(f"Metadata v{version} is not encoded here (v0-v12)")


def encode_topic(
    version: int,
    error_code: int,
    name: str | None,
    topic_id: bytes,
    is_internal: bool,
    partitions: Sequence[bytes],
    authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> bytes:
    """One entry of the response's topics array; ``topic_id`` is the 16 bytes of the UUID,
    ``partitions`` each from ``encode_partition`` at ``version``."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray(_INT16.pack(error_code))
    if name is None and version < 12:
        raise ValueError(f"a topic without a name needs Metadata v12+, not v{version}")
    out += encode_nullable_string(name, compact=flexible)
    if version >= 10:
        out += topic_id
    if version >= 1:
        out.append(1 if is_internal else 0)
    out += encode_array_length(len(partitions), compact=flexible)
    out += b"".join(partitions)
    if version >= 8:
        out += _UINT32.pack(authorized_operations)
    if flexible:
        out += EMPTY_TAGGED_FIELDS
    return bytes(out)


def encode_partition(version: int, partition: PartitionEntry) -> bytes:
    """One entry of a topic's partitions array."""
    flexible = version >= FIRST_FLEXIBLE_VERSION
    out = bytearray()
    if version >= 7:
        out += _PARTITION_HEAD_V7.pack(
            partition.error_code,
            partition.partition_index,
            partition.leader_id,
            partition.leader_epoch,
        )
    else:
        out += _PARTITION_HEAD.pack(
            partition.error_code, partition.partition_index, partition.leader_id
        )
    out += _int32_array(partition.replica_nodes, flexible)
    out += _int32_array(partition.isr_nodes, flexible)
    if version >= 5:
        out += _int32_array(partition.offline_replicas, flexible)
    if flexible:
        out += EMPTY_TAGGED_FIELDS
    return bytes(out)


def _int32_array(values: Sequence[int], flexible: bool) -> bytes:
    return encode_array_length(len(values), compact=flexible) + struct.pack(
        f">{len(values)}i", *values
    )


def encode_response(
    version: int,
    *,
    throttle_time_ms: int,
    brokers: Sequence[BrokerEntry],
    cluster_id: str | None,
    controller_id: int,
    topics: Sequence[bytes],
    cluster_authorized_operations: int = AUTHORIZED_OPERATIONS_OMITTED,
) -> bytes:
    """The response body (no header) around ``topics``, each from ``encode_topic`` at
    ``version``."""
    check_version(version)
    flexible = version >= FIRST_FLEXIBLE_VERSION
    parts: list[bytes] = []
    if version >= 3:
        parts.append(_INT32.pack(throttle_time_ms))
    parts.append(encode_array_length(len(brokers), compact=flexible))
    for broker in brokers:
        parts.append(_BROKER.pack(broker.node_id))
        parts.append(encode_string(broker.host, compact=flexible))
        parts.append(_INT32.pack(broker.port))
        if version >= 1:
            parts.append(encode_nullable_string(broker.rack, compact=flexible))
        if flexible:
            parts.append(EMPTY_TAGGED_FIELDS)
    if version >= 2:
        parts.append(encode_nullable_string(cluster_id, compact=flexible))
    if version >= 1:
        parts.append(_INT32.pack(controller_id))
    parts.append(encode_uvarint(len(topics) + 1) if flexible else _INT32.pack(len(topics)))
    parts.extend(topics)
    if 8 <= version <= 10:
        parts.append(_UINT32.pack(cluster_authorized_operations))
    if flexible:
        parts.append(EMPTY_TAGGED_FIELDS)
    return b"".join(parts)
