"""Structs shared by the hand-written Produce and Fetch codecs (KIP-951 leader discovery).

Produce v10 and Fetch v16 responses tell a client, through tagged fields, who leads a partition
it got NOT_LEADER_OR_FOLLOWER / FENCED_LEADER_EPOCH for (``CurrentLeader``) and how to reach
that broker (``NodeEndpoints``), so it can retry without a Metadata round trip.
"""

from __future__ import annotations

import attrs

from pykraft.protocol.wire import (
    EMPTY_TAGGED_FIELDS,
    INT32,
    Reader,
    encode_array_length,
    encode_nullable_string,
    encode_string,
)


@attrs.frozen
class LeaderIdAndEpoch:
    """A tagged field; written only when it differs from the default (-1, -1), like Kafka."""

    leader_id: int = -1
    leader_epoch: int = -1

    def is_default(self) -> bool:
        return self.leader_id == -1 and self.leader_epoch == -1

    def encode(self) -> bytes:
        """As a tagged struct value: both ints, then the struct's empty tagged-field section."""
        return INT32.pack(self.leader_id) + INT32.pack(self.leader_epoch) + EMPTY_TAGGED_FIELDS

    @classmethod
    def decode(cls, reader: Reader) -> LeaderIdAndEpoch:
        value = cls(reader.int32("leader_id"), reader.int32("leader_epoch"))
        reader.skip_tagged_fields("LeaderIdAndEpoch tagged fields")
        return value


# The default (unknown) leader; immutable, so one shared instance serves as every default.
UNKNOWN_LEADER = LeaderIdAndEpoch()


@attrs.frozen
class NodeEndpoint:
    node_id: int
    host: str
    port: int
    rack: str | None = None


def encode_node_endpoints(node_endpoints: tuple[NodeEndpoint, ...]) -> bytes:
    """The ``NodeEndpoints`` tagged field's value: a compact array of flexible structs."""
    parts = [encode_array_length(len(node_endpoints), compact=True)]
    for endpoint in node_endpoints:
        parts.append(INT32.pack(endpoint.node_id))
        parts.append(encode_string(endpoint.host, compact=True))
        parts.append(INT32.pack(endpoint.port))
        parts.append(encode_nullable_string(endpoint.rack, compact=True))
        parts.append(EMPTY_TAGGED_FIELDS)
    return b"".join(parts)


def decode_node_endpoints(reader: Reader) -> tuple[NodeEndpoint, ...]:
    endpoints = []
    for _ in range(reader.array_length("node_endpoints", compact=True)):
        endpoint = NodeEndpoint(
            reader.int32("node_id"),
            reader.string("host", compact=True),
            reader.int32("port"),
            reader.nullable_string("rack", compact=True),
        )
        reader.skip_tagged_fields("NodeEndpoint tagged fields")
        endpoints.append(endpoint)
    return tuple(endpoints)
