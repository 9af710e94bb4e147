"""The follower's hand-written Fetch codec against kafka-python's generated one.

Issue 18 moved the replica fetcher off kafka-python's generated ``FetchResponse`` decoder (it
copied the frame and every partition's records) and ``FetchRequest`` encoder (~5 us a
partition) onto ``protocol.fetch_client`` through ``fetcher.leader_codecs``. The request bytes
must equal what the generated encoder wrote, and nothing a follower reads may change: on any
valid response the leader's encoder can write, every field of every requested partition
equals what the generated decoder reads, and the records are zero-copy slices of the frame.
Bytes that end early, lie about a length or run on past the response are refused with a
``MalformedRequestError`` naming the field, never decoded into something else.
"""

from __future__ import annotations

import contextlib
import uuid
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest as KafkaPythonFetchRequest
from kafka.protocol.consumer import FetchResponse as KafkaPythonFetchResponse

from pykraft.fetcher.fetch_session import FINAL_EPOCH
from pykraft.fetcher.leader_codecs import (
    FIRST_REPLICA_STATE_FETCH_VERSION,
    FIRST_TOPIC_ID_FETCH_VERSION,
    FetchTarget,
    LeaderProtocolError,
    ReplicaFetch,
    decode_fetch_response,
    encode_fetch_request,
)
from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch
from pykraft.protocol.errors import MalformedRequestError, ProtocolError
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    NO_SNAPSHOT_ID,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchResponse,
    PartitionData,
    SnapshotId,
    encode_fetch_response,
)
from pykraft.protocol.wire import encode_uvarint
from pykraft.storage.topic_partition import TopicPartition
from tests.protocol.test_fetch import VERSIONS, fetch_responses, read_fake

# A follower negotiates any of v4-v17 (leader_codecs.negotiate); each version where a field
# the follower reads or writes appears or moves, the first and the last.
assert list(VERSIONS) == list(range(4, 18))
FOLLOWER_VERSIONS = [4, 5, 7, 9, 11, 12, 13, 15, 16, 17]


def body_of(response: FetchResponse, version: int) -> bytes:
    return encode_fetch_response(response, version).to_bytes(read_fake)


def request_for(response: FetchResponse, version: int) -> ReplicaFetch:
    """A follower's request naming every partition of ``response`` (one target per name)."""
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    targets = {}
    for topic in response.responses:
        for partition in topic.partitions:
            key = (topic.topic_id if by_id else topic.topic, partition.partition_index)
            name = str(topic.topic_id) if by_id else topic.topic
            topic_partition = TopicPartition(name, partition.partition_index)
            targets[key] = FetchTarget(
                topic_partition,
                topic.topic_id if by_id else None,
                FetchPartition(partition.partition_index, 0, 1 << 20),
            )
    return ReplicaFetch(tuple(targets.values()), max_wait_ms=500, min_bytes=1, max_bytes=1 << 20)


def kafka_python_view(
    body: bytes, version: int, request: ReplicaFetch
) -> dict[TopicPartition, tuple[Any, ...]]:
    """What the generated decoder reads, field by field, keyed as the follower keys it."""
    decoded = KafkaPythonFetchResponse.decode(body, version=version)
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    wanted = {
        (t.topic_id if by_id else t.topic_partition.topic, t.topic_partition.partition): (
            t.topic_partition
        )
        for t in request.targets
    }
    view = {}
    for topic in decoded.responses:
        key = topic.topic_id if by_id else topic.topic
        for p in topic.partitions:
            diverging, leader, snapshot = p_tags(p)
            aborted = p.aborted_transactions
            view[wanted[(key, p.partition_index)]] = (
                p.partition_index,
                p.error_code,
                p.high_watermark,
                p.last_stable_offset,
                getattr(p, "log_start_offset", -1),
                diverging,
                leader,
                snapshot,
                None
                if aborted is None
                else tuple(AbortedTransaction(a.producer_id, a.first_offset) for a in aborted),
                getattr(p, "preferred_read_replica", -1),
                p.records or b"",
            )
    return view


def p_tags(p: Any) -> tuple[EpochEndOffset, LeaderIdAndEpoch, SnapshotId]:
    diverging = getattr(p, "diverging_epoch", None)
    leader = getattr(p, "current_leader", None)
    snapshot = getattr(p, "snapshot_id", None)
    return (
        NO_DIVERGING_EPOCH
        if diverging is None
        else EpochEndOffset(diverging.epoch, diverging.end_offset),
        UNKNOWN_LEADER
        if leader is None
        else LeaderIdAndEpoch(leader.leader_id, leader.leader_epoch),
        NO_SNAPSHOT_ID if snapshot is None else SnapshotId(snapshot.end_offset, snapshot.epoch),
    )


def our_view(answers: dict[TopicPartition, PartitionData]) -> dict[TopicPartition, tuple[Any, ...]]:
    view = {}
    for topic_partition, p in answers.items():
        assert p.records is not None
        chunks = []
        for chunk in p.records:
            assert isinstance(chunk, memoryview), f"records decode as frame slices: {chunk!r}"
            chunks.append(chunk)
        view[topic_partition] = (
            p.partition_index,
            p.error_code,
            p.high_watermark,
            p.last_stable_offset,
            p.log_start_offset,
            p.diverging_epoch,
            p.current_leader,
            p.snapshot_id,
            p.aborted_transactions,
            p.preferred_read_replica,
            b"".join(chunks),
        )
    return view


error_free_responses = fetch_responses.map(lambda response: attrs.evolve(response, error_code=0))


@pytest.mark.parametrize("version", FOLLOWER_VERSIONS)
@settings(max_examples=15, deadline=None)
@given(response=error_free_responses)
def test_decoder_reads_what_the_generated_decoder_reads(
    version: int, response: FetchResponse
) -> None:
    body = body_of(response, version)
    request = request_for(response, version)
    answers = decode_fetch_response(memoryview(body), version, request)
    assert our_view(answers) == kafka_python_view(body, version, request)


@pytest.mark.parametrize("version", [4, 16])
@settings(max_examples=10, deadline=None)
@given(response=error_free_responses)
def test_records_are_slices_of_the_frame_not_copies(version: int, response: FetchResponse) -> None:
    frame = bytearray(body_of(response, version))
    answers = decode_fetch_response(memoryview(frame), version, request_for(response, version))
    for data in answers.values():
        assert data.records is not None
        for chunk in data.records:
            assert isinstance(chunk, memoryview) and chunk.obj is frame


# One version of each layout: v4 (no log start), v11 (last non-flexible), v12 (flexible, names),
# v16 (topic ids, node endpoints).
LAYOUTS = [4, 11, 12, 16]


@pytest.mark.parametrize("version", LAYOUTS)
@settings(max_examples=10, deadline=None)
@given(response=error_free_responses)
def test_every_truncated_response_is_refused(version: int, response: FetchResponse) -> None:
    body = body_of(response, version)
    request = request_for(response, version)
    for end in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_fetch_response(memoryview(body)[:end], version, request)


@pytest.mark.parametrize("version", LAYOUTS)
@settings(max_examples=10, deadline=None)
@given(response=error_free_responses, extra=st.binary(min_size=1, max_size=8))
def test_bytes_after_the_response_are_refused(
    version: int, response: FetchResponse, extra: bytes
) -> None:
    body = body_of(response, version) + extra
    with pytest.raises(MalformedRequestError, match="left after the response"):
        decode_fetch_response(memoryview(body), version, request_for(response, version))


@pytest.mark.parametrize("version", LAYOUTS)
@given(records=st.binary(max_size=200), more=st.integers(1, 1000))
@settings(max_examples=15, deadline=None)
def test_a_records_length_that_lies_long_is_refused(
    version: int, records: bytes, more: int
) -> None:
    """The one partition's records claim ``more`` bytes than they have."""
    records = b"RECORDS:" + records  # found only where they are in the frame
    topic_id = uuid.UUID(int=7)
    response = FetchResponse(
        (FetchableTopicResponse((PartitionData(0, records=(records,)),), "t", topic_id),)
    )
    body = body_of(response, version)
    start = body.rindex(records)
    flexible = version >= 12
    old = encode_uvarint(len(records) + 1) if flexible else len(records).to_bytes(4, "big")
    new = (
        encode_uvarint(len(records) + 1 + more)
        if flexible
        else (len(records) + more).to_bytes(4, "big")
    )
    assert body[start - len(old) : start] == old
    lying = body[: start - len(old)] + new + body[start:]
    # A lie past the frame's end names the records; a shorter one swallows the fields after
    # them (tagged fields), which then come up short: refused either way.
    past_the_end = more > len(body) - (start + len(records))
    with pytest.raises(MalformedRequestError, match="records" if past_the_end else ""):
        decode_fetch_response(memoryview(lying), version, request_for(response, version))


@pytest.mark.parametrize("version", LAYOUTS)
@given(garbage=st.binary(max_size=120))
@settings(max_examples=30, deadline=None)
def test_garbage_raises_only_protocol_errors(version: int, garbage: bytes) -> None:
    """What the leader endpoint turns into a connection error (``BrokerConnection.decoded``)."""
    request = ReplicaFetch((), max_wait_ms=500, min_bytes=1, max_bytes=1 << 20)
    with contextlib.suppress(ProtocolError, ValueError):
        decode_fetch_response(memoryview(garbage), version, request)


def test_a_top_level_error_is_still_refused_as_the_leader_said() -> None:
    body = body_of(FetchResponse((), error_code=70), 16)
    request = ReplicaFetch((), max_wait_ms=500, min_bytes=1, max_bytes=1 << 20)
    with pytest.raises(LeaderProtocolError, match="top-level error 70"):
        decode_fetch_response(memoryview(body), 16, request)


# ------------------------------------------------------------------------------ the request

int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
replica_fetches = st.builds(
    ReplicaFetch,
    targets=st.lists(
        st.builds(
            FetchTarget,
            st.builds(
                TopicPartition,
                st.sampled_from(["orders", "payments", "a.b-c_d"]),
                st.integers(0, 2**31 - 1),
            ),
            st.sampled_from([uuid.UUID(int=1), uuid.UUID(int=2), uuid.uuid4()]),
            st.builds(FetchPartition, int32s, int64s, int32s, int32s, int32s, int64s),
        ),
        max_size=6,
    ).map(tuple),
    max_wait_ms=int32s,
    min_bytes=int32s,
    max_bytes=int32s,
)


def kafka_python_request(
    request: ReplicaFetch, version: int, replica_id: int, broker_epoch: int
) -> bytes:
    """What the follower sent before issue 18, through kafka-python's generated classes."""
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    topic_cls = KafkaPythonFetchRequest.FetchTopic
    groups: dict[Any, list[FetchTarget]] = {}
    for target in request.targets:
        key = target.topic_id if by_id else target.topic_partition.topic
        groups.setdefault(key, []).append(target)
    topics = [
        topic_cls(
            topic="" if by_id else key,
            topic_id=key if by_id else uuid.UUID(int=0),
            partitions=[topic_cls.FetchPartition(**attrs.asdict(t.partition)) for t in group],
        )
        for key, group in groups.items()
    ]
    message = KafkaPythonFetchRequest(
        version=version,
        cluster_id=None,
        replica_id=replica_id,
        replica_state=KafkaPythonFetchRequest.ReplicaState(
            replica_id=replica_id, replica_epoch=broker_epoch
        )
        if version >= FIRST_REPLICA_STATE_FETCH_VERSION
        else None,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=0,
        session_id=0,
        session_epoch=FINAL_EPOCH,
        topics=topics,
        forgotten_topics_data=[],
        rack_id="",
    )
    return bytes(message.encode(version=version))


@pytest.mark.parametrize("version", FOLLOWER_VERSIONS)
@settings(max_examples=15, deadline=None)
@given(request=replica_fetches, replica_id=st.integers(0, 2**31 - 1), broker_epoch=int64s)
def test_request_bytes_equal_the_generated_encoder(
    version: int, request: ReplicaFetch, replica_id: int, broker_epoch: int
) -> None:
    assert encode_fetch_request(request, version, replica_id, broker_epoch) == (
        kafka_python_request(request, version, replica_id, broker_epoch)
    )
