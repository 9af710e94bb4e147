"""Hand-written Fetch codec, checked against kafka-python and kio for every version 4-16.

Requests: bytes written by kafka-python and by kio (identical) decode to the value the version
can carry. Responses: our segments, flattened, equal kafka-python's and kio's bytes; record
chunks (buffers and file slices) pass through untouched.
"""

from __future__ import annotations

import dataclasses
import struct
import uuid
from pathlib import Path
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.consumer import FetchRequest as KafkaPythonFetchRequest
from kafka.protocol.consumer import FetchResponse as KafkaPythonFetchResponse

from pykraft.protocol import fetch as fetch_codec
from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch, NodeEndpoint
from pykraft.protocol.errors import MalformedRequestError, ProtocolError, UnsupportedRequestError
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    NO_REPLICA_STATE,
    NO_SNAPSHOT_ID,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchRequest,
    FetchResponse,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
    ReplicaState,
    SnapshotId,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.protocol.segments import FileSliceLike, Segment, Segments
from pykraft.protocol.wire import ZERO_UUID
from tests.protocol.kio_helpers import error_code, kio_decode, kio_encode, kio_module, milliseconds

VERSIONS = range(4, 18)

int8s = st.integers(-(2**7), 2**7 - 1)
int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
names = st.from_regex(r"[a-zA-Z0-9._-]{1,24}", fullmatch=True)
uuids = st.uuids()


def kio_build(cls: Any, **values: Any) -> Any:
    """Instantiate a kio dataclass with those of ``values`` its version has."""
    accepted = {field.name for field in dataclasses.fields(cls)}
    return cls(**{name: value for name, value in values.items() if name in accepted})


# ------------------------------------------------------------------------------------ request

fetch_requests = st.builds(
    FetchRequest,
    replica_id=int32s,
    max_wait_ms=st.integers(0, 2**31 - 1),
    min_bytes=int32s,
    topics=st.lists(
        st.builds(
            FetchTopic,
            partitions=st.lists(
                st.builds(FetchPartition, int32s, int64s, int32s, int32s, int32s, int64s),
                max_size=4,
            ).map(tuple),
            topic=names,
            topic_id=uuids,
        ),
        max_size=4,
    ).map(tuple),
    max_bytes=int32s,
    isolation_level=st.sampled_from([0, 1]) | int8s,
    session_id=int32s,
    session_epoch=int32s,
    forgotten_topics_data=st.lists(
        st.builds(ForgottenTopic, st.lists(int32s, max_size=4).map(tuple), names, uuids),
        max_size=3,
    ).map(tuple),
    rack_id=st.just("") | names,
    cluster_id=st.none() | names,
    replica_state=st.just(NO_REPLICA_STATE) | st.builds(ReplicaState, int32s, int64s),
)


def visible_request(request: FetchRequest, version: int) -> FetchRequest:
    """The value ``version`` can carry; everything else takes the schema's default."""

    def partition(p: FetchPartition) -> FetchPartition:
        return attrs.evolve(
            p,
            current_leader_epoch=p.current_leader_epoch if version >= 9 else -1,
            last_fetched_epoch=p.last_fetched_epoch if version >= 12 else -1,
            log_start_offset=p.log_start_offset if version >= 5 else -1,
        )

    def topic_key(topic: Any) -> dict[str, Any]:
        if version >= 13:
            return {"topic": "", "topic_id": topic.topic_id}
        return {"topic": topic.topic, "topic_id": ZERO_UUID}

    state = request.replica_state if version >= 15 else NO_REPLICA_STATE
    return attrs.evolve(
        request,
        replica_id=state.replica_id if version >= 15 else request.replica_id,
        topics=tuple(
            FetchTopic(tuple(partition(p) for p in t.partitions), **topic_key(t))
            for t in request.topics
        ),
        session_id=request.session_id if version >= 7 else 0,
        session_epoch=request.session_epoch if version >= 7 else -1,
        forgotten_topics_data=tuple(
            ForgottenTopic(f.partitions, **topic_key(f)) for f in request.forgotten_topics_data
        )
        if version >= 7
        else (),
        rack_id=request.rack_id if version >= 11 else "",
        cluster_id=request.cluster_id if version >= 12 else None,
        replica_state=state,
    )


def request_as_kafka_python(request: FetchRequest, version: int) -> bytes:
    topic_cls = KafkaPythonFetchRequest.FetchTopic
    state = request.replica_state
    message = KafkaPythonFetchRequest(
        version=version,
        cluster_id=request.cluster_id,
        replica_id=request.replica_id,
        replica_state=None
        if state == NO_REPLICA_STATE
        else KafkaPythonFetchRequest.ReplicaState(
            replica_id=state.replica_id, replica_epoch=state.replica_epoch
        ),
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        max_bytes=request.max_bytes,
        isolation_level=request.isolation_level,
        session_id=request.session_id,
        session_epoch=request.session_epoch,
        topics=[
            topic_cls(
                topic=t.topic,
                topic_id=t.topic_id,
                partitions=[topic_cls.FetchPartition(**attrs.asdict(p)) for p in t.partitions],
            )
            for t in request.topics
        ],
        forgotten_topics_data=[
            KafkaPythonFetchRequest.ForgottenTopic(
                topic=f.topic, topic_id=f.topic_id, partitions=list(f.partitions)
            )
            for f in request.forgotten_topics_data
        ],
        rack_id=request.rack_id,
    )
    return bytes(message.encode(version=version))


def request_as_kio(request: FetchRequest, version: int) -> bytes:
    schema = kio_module("fetch", version, "request")
    return kio_encode(
        kio_build(
            schema.FetchRequest,
            cluster_id=request.cluster_id,
            replica_id=request.replica_id,
            replica_state=schema.ReplicaState(**attrs.asdict(request.replica_state))
            if version >= 15
            else None,
            max_wait=milliseconds(request.max_wait_ms),
            min_bytes=request.min_bytes,
            max_bytes=request.max_bytes,
            isolation_level=request.isolation_level,
            session_id=request.session_id,
            session_epoch=request.session_epoch,
            topics=tuple(
                kio_build(
                    schema.FetchTopic,
                    topic=t.topic,
                    topic_id=t.topic_id,
                    partitions=tuple(
                        kio_build(schema.FetchPartition, **attrs.asdict(p)) for p in t.partitions
                    ),
                )
                for t in request.topics
            ),
            forgotten_topics_data=tuple(
                kio_build(
                    schema.ForgottenTopic,
                    topic=f.topic,
                    topic_id=f.topic_id,
                    partitions=f.partitions,
                )
                for f in request.forgotten_topics_data
            )
            if version >= 7
            else (),
            rack_id=request.rack_id,
        )
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=30, deadline=None)
@given(request=fetch_requests)
def test_request_written_by_kafka_python_and_kio(version: int, request: FetchRequest) -> None:
    body = request_as_kafka_python(request, version)
    assert request_as_kio(request, version) == body
    assert decode_fetch_request(body, version) == visible_request(request, version)


def test_follower_fetch_v15_carries_replica_state_not_replica_id() -> None:
    # KIP-903: the follower sends its broker epoch; replica_id leaves the body.
    request = FetchRequest(
        replica_id=-1,
        max_wait_ms=500,
        min_bytes=1,
        topics=(FetchTopic((FetchPartition(0, 42, 1 << 20, 7, 6, 0),), topic_id=uuid.uuid4()),),
        replica_state=ReplicaState(replica_id=2, replica_epoch=1234),
    )
    decoded = decode_fetch_request(request_as_kafka_python(request, 15), 15)
    assert decoded.replica_id == 2
    assert decoded.replica_state == ReplicaState(2, 1234)
    assert decoded.topics[0].partitions[0].last_fetched_epoch == 6


def test_topic_ids_decode_as_sent_however_often_and_the_cache_stays_bounded(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Repeated ids come from a bounded cache of the 16 bytes; each request keeps its own.
    monkeypatch.setattr(fetch_codec, "MAX_CACHED_TOPIC_IDS", 2)
    monkeypatch.setattr(fetch_codec, "_TOPIC_IDS", {})
    ids = [uuid.uuid4() for _ in range(3)]
    for topic_id in [*ids, ids[0], ids[2], ids[1]]:
        request = FetchRequest(
            replica_id=2,
            max_wait_ms=500,
            min_bytes=1,
            topics=(FetchTopic((FetchPartition(3, 42, 1 << 20, 7, 6, 0),), topic_id=topic_id),),
            forgotten_topics_data=(ForgottenTopic((1,), topic_id=topic_id),),
            replica_state=ReplicaState(replica_id=2, replica_epoch=1234),
        )
        assert decode_fetch_request(request_as_kafka_python(request, 17), 17) == request
        assert len(fetch_codec._TOPIC_IDS) <= 2


@pytest.mark.parametrize("version", [4, 11, 12, 15])
def test_every_truncated_request_is_rejected(version: int) -> None:
    request = FetchRequest(
        replica_id=1,
        max_wait_ms=500,
        min_bytes=1,
        topics=(FetchTopic((FetchPartition(0, 42, 1 << 20),), "topic", uuid.uuid4()),),
        forgotten_topics_data=(ForgottenTopic((1, 2), "old", uuid.uuid4()),),
        rack_id="rack-a",
        cluster_id="cluster",
        replica_state=ReplicaState(1, 9),
    )
    body = request_as_kafka_python(request, version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_fetch_request(body[:cut], version)


@pytest.mark.parametrize("version", [4, 12, 16])
@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=100))
def test_garbage_raises_only_protocol_errors(version: int, body: bytes) -> None:
    try:
        decoded = decode_fetch_request(body, version)
    except ProtocolError as error:
        assert error.args
    else:
        assert isinstance(decoded, FetchRequest)


@pytest.mark.parametrize("version", range(12, 18))
@settings(max_examples=30, deadline=None)
@given(request=fetch_requests)
def test_the_common_shape_reads_as_the_checked_path_reads_it(
    version: int, request: FetchRequest
) -> None:
    # The leader decodes two follower fetches per acks=all record (issue 18): requests with
    # counts and lengths below 127 take the fast path, which must read what Reader reads.
    body = request_as_kafka_python(request, version)
    fast = fetch_codec._decode_common(memoryview(body), version)
    assert fast is not None and fast == fetch_codec._decode_checked(body, version)


def fast_agrees_with_checked(body: bytes, version: int) -> None:
    """The fast path declines — None, or one of the errors ``decode_fetch_request`` catches
    (a MalformedRequestError is a ValueError) to read the request again on the checked path —
    or reads exactly what the checked path reads."""
    try:
        fast = fetch_codec._decode_common(memoryview(body), version)
    except (IndexError, ValueError, struct.error):
        return
    if fast is not None:
        assert fast == fetch_codec._decode_checked(body, version)


@pytest.mark.parametrize("version", [12, 13, 15, 17])
def test_the_fast_path_never_reads_what_the_checked_path_refuses(version: int) -> None:
    # Every byte of a request with two topics, forgotten partitions, a rack, a cluster id and
    # a replica state, changed to values that matter to varints and tags, and every cut.
    request = FetchRequest(
        replica_id=3,
        max_wait_ms=500,
        min_bytes=1,
        topics=(
            FetchTopic(
                (FetchPartition(0, 42, 1 << 20, 7, 6, 0), FetchPartition(2, 9, 1 << 20, 7, 6, 0)),
                "pets",
                uuid.uuid4(),
            ),
            FetchTopic((FetchPartition(1, 5, 1 << 20, 3, 2, 1),), "birds", uuid.uuid4()),
        ),
        forgotten_topics_data=(ForgottenTopic((4, 5), "old", uuid.uuid4()),),
        rack_id="rack-a",
        cluster_id="cluster",
        replica_state=ReplicaState(3, 9),
    )
    body = request_as_kafka_python(request, version)
    assert fetch_codec._decode_common(memoryview(body), version) == visible_request(
        request, version
    )
    for index in range(len(body)):
        for value in (0x00, 0x01, 0x02, 0x03, 0x0D, 0x7F, 0x80, 0xFF):
            changed = bytearray(body)
            changed[index] = value
            fast_agrees_with_checked(bytes(changed), version)
    for cut in range(len(body)):
        fast_agrees_with_checked(body[:cut], version)


@pytest.mark.parametrize("version", [3, 18])
def test_versions_outside_the_codec_are_refused(version: int) -> None:
    with pytest.raises(UnsupportedRequestError):
        decode_fetch_request(b"", version)
    with pytest.raises(UnsupportedRequestError):
        encode_fetch_response(FetchResponse(()), version)


# ----------------------------------------------------------------------------------- response


@attrs.frozen
class FakeSlice:
    """A file slice whose bytes the test knows; the path does not exist, so nobody may read it."""

    path: Path
    position: int
    length: int
    content: bytes = attrs.field(eq=False, repr=False)


def read_fake(part: FileSliceLike) -> bytes:
    assert isinstance(part, FakeSlice)
    return part.content


fake_slices = st.builds(
    lambda content, position: FakeSlice(
        Path("/nonexistent/00000000000000000000.log"), position, len(content), content
    ),
    st.binary(max_size=60),
    st.integers(0, 2**40),
)
chunks: st.SearchStrategy[Segment] = st.one_of(
    st.binary(max_size=60), st.binary(max_size=60).map(lambda data: memoryview(data)), fake_slices
)
partitions_data = st.builds(
    PartitionData,
    partition_index=int32s,
    error_code=st.sampled_from([0, 1, 3, 6, 74, 75, 100]),
    high_watermark=int64s,
    last_stable_offset=int64s,
    log_start_offset=int64s,
    diverging_epoch=st.just(NO_DIVERGING_EPOCH) | st.builds(EpochEndOffset, int32s, int64s),
    current_leader=st.just(UNKNOWN_LEADER) | st.builds(LeaderIdAndEpoch, int32s, int32s),
    snapshot_id=st.just(NO_SNAPSHOT_ID) | st.builds(SnapshotId, int64s, int32s),
    aborted_transactions=st.none()
    | st.lists(st.builds(AbortedTransaction, int64s, int64s), max_size=3).map(tuple),
    preferred_read_replica=int32s,
    records=st.none() | st.lists(chunks, max_size=4).map(tuple),
)
fetch_responses = st.builds(
    FetchResponse,
    responses=st.lists(
        st.builds(
            FetchableTopicResponse,
            st.lists(partitions_data, max_size=3).map(tuple),
            names,
            uuids,
        ),
        max_size=3,
    ).map(tuple),
    throttle_time_ms=st.integers(0, 2**31 - 1),
    error_code=st.sampled_from([0, 70, 71]),
    session_id=int32s,
    node_endpoints=st.lists(
        st.builds(NodeEndpoint, int32s, names, int32s, st.none() | names), max_size=2
    ).map(tuple),
)


def flat_records(records: tuple[Segment, ...] | None) -> bytes | None:
    if records is None:
        return None
    return Segments.of(records).to_bytes(read_fake)


def response_as_kafka_python(response: FetchResponse, version: int) -> bytes:
    topic_cls = KafkaPythonFetchResponse.FetchableTopicResponse
    partition_cls = topic_cls.PartitionData

    def tagged(value: Any, default: Any, cls: Any) -> Any:
        return None if value == default else cls(**attrs.asdict(value))

    def partition(p: PartitionData) -> Any:
        return partition_cls(
            partition_index=p.partition_index,
            error_code=p.error_code,
            high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset,
            diverging_epoch=tagged(
                p.diverging_epoch, NO_DIVERGING_EPOCH, partition_cls.EpochEndOffset
            ),
            current_leader=tagged(p.current_leader, UNKNOWN_LEADER, partition_cls.LeaderIdAndEpoch),
            snapshot_id=tagged(p.snapshot_id, NO_SNAPSHOT_ID, partition_cls.SnapshotId),
            aborted_transactions=None
            if p.aborted_transactions is None
            else [
                partition_cls.AbortedTransaction(**attrs.asdict(a)) for a in p.aborted_transactions
            ],
            preferred_read_replica=p.preferred_read_replica,
            records=flat_records(p.records),
        )

    message = KafkaPythonFetchResponse(
        version=version,
        throttle_time_ms=response.throttle_time_ms,
        error_code=response.error_code,
        session_id=response.session_id,
        responses=[
            topic_cls(
                topic=t.topic, topic_id=t.topic_id, partitions=[partition(p) for p in t.partitions]
            )
            for t in response.responses
        ],
        node_endpoints=[
            KafkaPythonFetchResponse.NodeEndpoint(**attrs.asdict(n))
            for n in response.node_endpoints
        ],
    )
    return bytes(message.encode(version=version))


def response_as_kio(response: FetchResponse, version: int) -> bytes:
    schema = kio_module("fetch", version, "response")

    def partition(p: PartitionData) -> Any:
        return kio_build(
            schema.PartitionData,
            partition_index=p.partition_index,
            error_code=error_code(p.error_code),
            high_watermark=p.high_watermark,
            last_stable_offset=p.last_stable_offset,
            log_start_offset=p.log_start_offset,
            diverging_epoch=kio_build(schema.EpochEndOffset, **attrs.asdict(p.diverging_epoch))
            if version >= 12
            else None,
            current_leader=kio_build(schema.LeaderIdAndEpoch, **attrs.asdict(p.current_leader))
            if version >= 12
            else None,
            snapshot_id=kio_build(schema.SnapshotId, **attrs.asdict(p.snapshot_id))
            if version >= 12
            else None,
            aborted_transactions=None
            if p.aborted_transactions is None
            else tuple(
                schema.AbortedTransaction(**attrs.asdict(a)) for a in p.aborted_transactions
            ),
            preferred_read_replica=p.preferred_read_replica,
            records=flat_records(p.records),
        )

    return kio_encode(
        kio_build(
            schema.FetchResponse,
            throttle_time=milliseconds(response.throttle_time_ms),
            error_code=error_code(response.error_code),
            session_id=response.session_id,
            responses=tuple(
                kio_build(
                    schema.FetchableTopicResponse,
                    topic=t.topic,
                    topic_id=t.topic_id,
                    partitions=tuple(partition(p) for p in t.partitions),
                )
                for t in response.responses
            ),
            node_endpoints=tuple(
                schema.NodeEndpoint(**attrs.asdict(n)) for n in response.node_endpoints
            )
            if version >= 16
            else None,
        )
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=30, deadline=None)
@given(response=fetch_responses)
def test_response_bytes_equal_kafka_python_and_kio(version: int, response: FetchResponse) -> None:
    segments = encode_fetch_response(response, version)
    flat = segments.to_bytes(read_fake)
    assert flat == response_as_kafka_python(response, version)
    assert flat == response_as_kio(response, version)
    decoded = kio_decode(kio_module("fetch", version, "response").FetchResponse, flat)
    assert [
        bytes(p.records) if p.records is not None else None
        for t in decoded.responses
        for p in t.partitions
    ] == [flat_records(p.records) for t in response.responses for p in t.partitions]


@settings(max_examples=50, deadline=None)
@given(response=fetch_responses, version=st.sampled_from(VERSIONS))
def test_record_chunks_pass_through_untouched(response: FetchResponse, version: int) -> None:
    segments = encode_fetch_response(response, version)
    passed_through = [part for part in segments.parts if isinstance(part, FakeSlice)]
    expected = [
        chunk
        for t in response.responses
        for p in t.partitions
        for chunk in p.records or ()
        if isinstance(chunk, FakeSlice) and chunk.length
    ]
    assert all(a is b for a, b in zip(passed_through, expected, strict=True))
    assert segments.length == len(segments.to_bytes(read_fake))


def test_sendfile_layout_for_a_real_segment_file(tmp_path: Path) -> None:
    @attrs.frozen
    class FileSlice:  # the shape of storage.file_slice.FileSlice
        path: Path
        position: int
        length: int

    log = tmp_path / "00000000000000000000.log"
    log.write_bytes(b"HEAD" + b"batch-one" + b"batch-two" + b"TAIL")
    piece = FileSlice(log, 4, 18)
    response = FetchResponse(
        (FetchableTopicResponse((PartitionData(0, high_watermark=2, records=(piece,)),), "t"),)
    )
    segments = encode_fetch_response(response, 11)
    assert segments.parts[1] is piece and len(segments.parts) == 3

    def read(part: FileSliceLike) -> bytes:
        with open(part.path, "rb") as file:
            file.seek(part.position)
            return file.read(part.length)

    decoded = KafkaPythonFetchResponse.decode(segments.to_bytes(read), version=11)
    assert decoded.responses[0].partitions[0].records == b"batch-onebatch-two"
