"""The hand-written Metadata response (protocol/metadata_response.py) is byte for byte what
kafka-python's generated encoder writes for the same values, at every version v0-v12, and
decodes back to them."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.metadata import MetadataResponse

from pykraft.protocol.metadata_response import (
    AUTHORIZED_OPERATIONS_OMITTED,
    BrokerEntry,
    PartitionEntry,
    encode_partition,
    encode_response,
    encode_topic,
)

VERSIONS = range(0, 13)

int32s = st.integers(-(2**31), 2**31 - 1)
node_ids = st.lists(st.integers(0, 2**31 - 1), max_size=4)
names = st.text(min_size=1, max_size=12)
operations = st.one_of(
    st.just(AUTHORIZED_OPERATIONS_OMITTED),
    st.sets(st.integers(0, 30), max_size=6).map(lambda ops: sum(1 << op for op in ops)),
)
brokers = st.builds(BrokerEntry, int32s, names, int32s, st.none() | names)
partitions = st.builds(
    PartitionEntry,
    st.integers(-1, 120),
    st.integers(0, 2**31 - 1),
    int32s,
    int32s,
    node_ids,
    node_ids,
    node_ids,
)


@st.composite
def topics(draw: st.DrawFn) -> dict[str, Any]:
    return {
        "error_code": draw(st.integers(-1, 120)),
        "name": draw(names),
        "topic_id": draw(st.uuids(allow_nil=True)),
        "is_internal": draw(st.booleans()),
        "partitions": draw(st.lists(partitions, max_size=4)),
        "authorized_operations": draw(operations),
    }


responses = st.fixed_dictionaries(
    {
        "throttle_time_ms": st.integers(0, 2**31 - 1),
        "brokers": st.lists(brokers, max_size=3),
        "cluster_id": st.none() | names,
        "controller_id": int32s,
        "topics": st.lists(topics(), max_size=3),
        "cluster_authorized_operations": operations,
    }
)


def _bits(value: int) -> set[int]:
    return {bit for bit in range(32) if value >> bit & 1}


def as_kafka_python(response: dict[str, Any], version: int) -> bytes:
    schema: Any = MetadataResponse
    topic_schema = schema.MetadataResponseTopic
    kept = schema(
        version=version,
        throttle_time_ms=response["throttle_time_ms"],
        brokers=[
            schema.MetadataResponseBroker(node_id=b.node_id, host=b.host, port=b.port, rack=b.rack)
            for b in response["brokers"]
        ],
        cluster_id=response["cluster_id"],
        controller_id=response["controller_id"],
        topics=[
            topic_schema(
                error_code=t["error_code"],
                name=t["name"],
                topic_id=t["topic_id"],
                is_internal=t["is_internal"],
                partitions=[
                    topic_schema.MetadataResponsePartition(
                        error_code=p.error_code,
                        partition_index=p.partition_index,
                        leader_id=p.leader_id,
                        leader_epoch=p.leader_epoch,
                        replica_nodes=list(p.replica_nodes),
                        isr_nodes=list(p.isr_nodes),
                        offline_replicas=list(p.offline_replicas),
                    )
                    for p in t["partitions"]
                ],
                authorized_operations=_bits(t["authorized_operations"]),
            )
            for t in response["topics"]
        ],
        authorized_operations=_bits(response["cluster_authorized_operations"]),
    )
    return bytes(kept.encode(version=version))


def ours(response: dict[str, Any], version: int) -> bytes:
    return encode_response(
        version,
        throttle_time_ms=response["throttle_time_ms"],
        brokers=response["brokers"],
        cluster_id=response["cluster_id"],
        controller_id=response["controller_id"],
        topics=[
            encode_topic(
                version,
                t["error_code"],
                t["name"],
                t["topic_id"].bytes,
                t["is_internal"],
                [encode_partition(version, p) for p in t["partitions"]],
                t["authorized_operations"],
            )
            for t in response["topics"]
        ],
        cluster_authorized_operations=response["cluster_authorized_operations"],
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(response=responses)
def test_the_bytes_equal_kafka_pythons(version: int, response: dict[str, Any]) -> None:
    encoded = ours(response, version)
    assert encoded == as_kafka_python(response, version)
    decoded = MetadataResponse.decode(encoded, version=version)
    assert [t.name for t in decoded.topics] == [t["name"] for t in response["topics"]]


def test_a_nameless_topic_needs_v12() -> None:
    """Only v12 has a nullable topic name (a topic asked by id the principal may not see)."""
    nameless = encode_topic(12, 29, None, uuid.uuid4().bytes, False, ())
    decoded = MetadataResponse.decode(
        encode_response(
            12, throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=1, topics=[nameless]
        ),
        version=12,
    )
    assert decoded.topics[0].name is None
    with pytest.raises(ValueError, match="v12"):
        encode_topic(11, 29, None, uuid.uuid4().bytes, False, ())


def test_versions_past_v12_are_refused() -> None:
    with pytest.raises(ValueError, match="v13"):
        encode_response(
            13, throttle_time_ms=0, brokers=[], cluster_id=None, controller_id=1, topics=[]
        )
