"""Hand-written Produce codec, checked against kafka-python and kio for every version.

Requests: bytes written by kafka-python (v0-v10) and by kio (v3-v10) decode to the same value.
Responses: our bytes equal kafka-python's (v0-v10) and kio's (v3-v10) byte for byte.
"""

from __future__ import annotations

import datetime
from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from kafka.protocol.producer import ProduceRequest as KafkaPythonProduceRequest
from kafka.protocol.producer import ProduceResponse as KafkaPythonProduceResponse

from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch, NodeEndpoint
from pykraft.protocol.errors import (
    Errors,
    MalformedRequestError,
    ProtocolError,
    UnsupportedRequestError,
)
from pykraft.protocol.produce import (
    BatchIndexAndErrorMessage,
    PartitionProduceData,
    PartitionProduceResponse,
    ProduceRequest,
    ProduceResponse,
    TopicProduceData,
    TopicProduceResponse,
    _decode_checked,
    decode_produce_request,
    encode_produce_response,
    unsupported_version_response,
)
from tests.protocol.kio_helpers import error_code, kio_decode, kio_encode, kio_module, milliseconds

VERSIONS = range(0, 12)
KIO_VERSIONS = range(3, 12)

int16s = st.integers(-(2**15), 2**15 - 1)
int32s = st.integers(-(2**31), 2**31 - 1)
int64s = st.integers(-(2**63), 2**63 - 1)
names = st.from_regex(r"[a-zA-Z0-9._-]{1,24}", fullmatch=True)
texts = st.text(max_size=30)
views = st.binary().map(lambda data: memoryview(data))

produce_requests = st.builds(
    ProduceRequest,
    transactional_id=st.none() | texts,
    acks=st.sampled_from([-1, 0, 1]) | int16s,
    timeout_ms=st.integers(0, 2**31 - 1),
    topic_data=st.lists(
        st.builds(
            TopicProduceData,
            name=names,
            partition_data=st.lists(
                st.builds(PartitionProduceData, index=int32s, records=st.none() | views),
                max_size=4,
            ).map(tuple),
        ),
        max_size=4,
    ).map(tuple),
)


def as_kafka_python(request: ProduceRequest, version: int) -> bytes:
    topic_cls = KafkaPythonProduceRequest.TopicProduceData
    partition_cls = topic_cls.PartitionProduceData
    message = KafkaPythonProduceRequest(
        version=version,
        transactional_id=request.transactional_id,
        acks=request.acks,
        timeout_ms=request.timeout_ms,
        topic_data=[
            topic_cls(
                name=topic.name,
                partition_data=[
                    partition_cls(index=p.index, records=p.records) for p in topic.partition_data
                ],
            )
            for topic in request.topic_data
        ],
    )
    return bytes(message.encode(version=version))


def as_kio(request: ProduceRequest, version: int) -> bytes:
    schema = kio_module("produce", version, "request")
    return kio_encode(
        schema.ProduceRequest(
            transactional_id=request.transactional_id,
            acks=request.acks,
            timeout=milliseconds(request.timeout_ms),
            topic_data=tuple(
                schema.TopicProduceData(
                    name=topic.name,
                    partition_data=tuple(
                        schema.PartitionProduceData(index=p.index, records=p.records)
                        for p in topic.partition_data
                    ),
                )
                for topic in request.topic_data
            ),
        )
    )


def visible(request: ProduceRequest, version: int) -> ProduceRequest:
    """What a version can carry: v0-v2 have no transactional_id."""
    return request if version >= 3 else attrs.evolve(request, transactional_id=None)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(request=produce_requests)
def test_request_written_by_kafka_python(version: int, request: ProduceRequest) -> None:
    body = as_kafka_python(request, version)
    assert decode_produce_request(body, version) == visible(request, version)


@pytest.mark.parametrize("version", KIO_VERSIONS)
@settings(max_examples=40, deadline=None)
@given(request=produce_requests)
def test_request_written_by_kio(version: int, request: ProduceRequest) -> None:
    body = as_kio(request, version)
    assert body == as_kafka_python(request, version)
    assert decode_produce_request(body, version) == request


@pytest.mark.parametrize("version", [3, 8, 9, 10])
def test_records_are_zero_copy_slices_of_the_frame(version: int) -> None:
    request = ProduceRequest(
        "txn",
        -1,
        30_000,
        (
            TopicProduceData(
                "t",
                (
                    PartitionProduceData(0, memoryview(b"batch-bytes")),
                    PartitionProduceData(1, None),
                ),
            ),
        ),
    )
    frame = bytearray(as_kafka_python(request, version))
    decoded = decode_produce_request(frame, version)
    records = decoded.topic_data[0].partition_data[0].records
    assert records is not None and records.obj is frame and not records.readonly
    records[0:5] = b"BATCH"  # patching in place reaches the frame: no copy was made
    assert b"BATCH-bytes" in frame
    assert decoded.topic_data[0].partition_data[1].records is None


@pytest.mark.parametrize("version", [2, 3, 9])
def test_every_truncated_request_is_rejected(version: int) -> None:
    request = ProduceRequest(
        "t-id",
        1,
        100,
        (TopicProduceData("topic", (PartitionProduceData(3, memoryview(b"\x00" * 10)),)),),
    )
    body = as_kafka_python(request, version)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_produce_request(body[:cut], version)


def checked_outcome(body: bytes, version: int) -> ProduceRequest | str:
    """What ``_decode_checked`` (every field through ``Reader``) makes of ``body``."""
    try:
        return _decode_checked(body, version)
    except MalformedRequestError as error:
        return str(error)


def outcome(body: bytes, version: int) -> ProduceRequest | str:
    try:
        return decode_produce_request(body, version)
    except MalformedRequestError as error:
        return str(error)


@pytest.mark.parametrize("version", [3, 8, 9, 11])
@settings(max_examples=60, deadline=None)
@given(request=produce_requests, data=st.data())
def test_the_fast_decoder_agrees_with_the_checked_one(
    version: int, request: ProduceRequest, data: st.DataObject
) -> None:
    """``decode_produce_request`` reads common requests without ``Reader``: on every request,
    and on every request with one byte changed, it answers exactly as ``_decode_checked``
    (the same value, or the same error naming the same field)."""
    body = bytearray(as_kafka_python(request, version))
    assert outcome(bytes(body), version) == visible(request, version)
    position = data.draw(st.integers(0, len(body) - 1))
    body[position] = data.draw(st.integers(0, 255))
    assert outcome(bytes(body), version) == checked_outcome(bytes(body), version)


@pytest.mark.parametrize("tagged_after", ["records", "null records", "topic", "request"])
def test_tagged_fields_the_fast_decoder_skips_are_read_past(tagged_after: str) -> None:
    """A v9 request with a tagged field (tag 5, 2 bytes) after a partition's records, a topic
    or the request decodes as without it: such requests take the checked decoder's path."""
    records = None if tagged_after == "null records" else memoryview(b"batch")
    request = ProduceRequest(
        None, 1, 100, (TopicProduceData("t", (PartitionProduceData(0, records),)),)
    )
    plain = as_kafka_python(request, 9)
    ends = {
        "records": len(plain) - 3,
        "null records": len(plain) - 3,
        "topic": len(plain) - 2,
        "request": len(plain) - 1,
    }
    at = ends[tagged_after]
    assert plain[at] == 0  # the empty tagged-field section replaced
    body = plain[:at] + b"\x01\x05\x02ab" + plain[at + 1 :]
    assert decode_produce_request(body, 9) == request


@pytest.mark.parametrize("version", [3, 9])
@settings(max_examples=200, deadline=None)
@given(body=st.binary(max_size=80))
def test_garbage_raises_only_protocol_errors(version: int, body: bytes) -> None:
    try:
        decoded = decode_produce_request(body, version)
    except ProtocolError as error:
        assert error.args
    else:
        assert isinstance(decoded, ProduceRequest)


@pytest.mark.parametrize("version", [-1, 12, 13])
def test_versions_outside_the_codec_are_refused(version: int) -> None:
    with pytest.raises(UnsupportedRequestError):
        decode_produce_request(b"", version)
    with pytest.raises(UnsupportedRequestError):
        encode_produce_response(ProduceResponse(()), version)


# ---------------------------------------------------------------------------------- responses

leaders = st.just(UNKNOWN_LEADER) | st.builds(LeaderIdAndEpoch, int32s, int32s)
append_times = st.just(-1) | st.integers(0, 2**41)
partition_responses = st.builds(
    PartitionProduceResponse,
    index=int32s,
    error_code=st.sampled_from(sorted(e.value for e in Errors if e.value <= 110)),
    base_offset=int64s,
    log_append_time_ms=append_times,
    log_start_offset=int64s,
    record_errors=st.lists(
        st.builds(BatchIndexAndErrorMessage, int32s, st.none() | texts), max_size=3
    ).map(tuple),
    error_message=st.none() | texts,
    current_leader=leaders,
)
produce_responses = st.builds(
    ProduceResponse,
    responses=st.lists(
        st.builds(
            TopicProduceResponse,
            names,
            st.lists(partition_responses, max_size=3).map(tuple),
        ),
        max_size=3,
    ).map(tuple),
    throttle_time_ms=st.integers(0, 2**31 - 1),
    node_endpoints=st.lists(
        st.builds(NodeEndpoint, int32s, names, int32s, st.none() | names), max_size=2
    ).map(tuple),
)


def response_as_kafka_python(response: ProduceResponse, version: int) -> bytes:
    topic_cls = KafkaPythonProduceResponse.TopicProduceResponse
    partition_cls = topic_cls.PartitionProduceResponse

    def partition(p: PartitionProduceResponse) -> Any:
        leader = p.current_leader
        return partition_cls(
            index=p.index,
            error_code=p.error_code,
            base_offset=p.base_offset,
            log_append_time_ms=p.log_append_time_ms,
            log_start_offset=p.log_start_offset,
            record_errors=[
                partition_cls.BatchIndexAndErrorMessage(
                    batch_index=e.batch_index, batch_index_error_message=e.batch_index_error_message
                )
                for e in p.record_errors
            ],
            error_message=p.error_message,
            current_leader=None
            if leader.is_default()
            else partition_cls.LeaderIdAndEpoch(
                leader_id=leader.leader_id, leader_epoch=leader.leader_epoch
            ),
        )

    message = KafkaPythonProduceResponse(
        version=version,
        responses=[
            topic_cls(
                name=t.name, partition_responses=[partition(p) for p in t.partition_responses]
            )
            for t in response.responses
        ],
        throttle_time_ms=response.throttle_time_ms,
        node_endpoints=[
            KafkaPythonProduceResponse.NodeEndpoint(
                node_id=n.node_id, host=n.host, port=n.port, rack=n.rack
            )
            for n in response.node_endpoints
        ],
    )
    return bytes(message.encode(version=version))


def timestamp(value_ms: int) -> datetime.datetime | None:
    if value_ms == -1:
        return None
    return datetime.datetime.fromtimestamp(value_ms / 1000, tz=datetime.UTC)


def response_as_kio(response: ProduceResponse, version: int) -> bytes:
    schema = kio_module("produce", version, "response")

    def partition(p: PartitionProduceResponse) -> Any:
        fields: dict[str, Any] = {
            "index": p.index,
            "error_code": error_code(p.error_code),
            "base_offset": p.base_offset,
            "log_append_time": timestamp(p.log_append_time_ms),
        }
        if version >= 5:
            fields["log_start_offset"] = p.log_start_offset
        if version >= 8:
            fields["record_errors"] = tuple(
                schema.BatchIndexAndErrorMessage(
                    batch_index=e.batch_index, batch_index_error_message=e.batch_index_error_message
                )
                for e in p.record_errors
            )
            fields["error_message"] = p.error_message
        if version >= 10:
            fields["current_leader"] = schema.LeaderIdAndEpoch(
                leader_id=p.current_leader.leader_id, leader_epoch=p.current_leader.leader_epoch
            )
        return schema.PartitionProduceResponse(**fields)

    fields: dict[str, Any] = {
        "responses": tuple(
            schema.TopicProduceResponse(
                name=t.name, partition_responses=tuple(partition(p) for p in t.partition_responses)
            )
            for t in response.responses
        ),
        "throttle_time": milliseconds(response.throttle_time_ms),
    }
    if version >= 10:
        fields["node_endpoints"] = tuple(
            schema.NodeEndpoint(node_id=n.node_id, host=n.host, port=n.port, rack=n.rack)
            for n in response.node_endpoints
        )
    return kio_encode(schema.ProduceResponse(**fields))


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=40, deadline=None)
@given(response=produce_responses)
def test_response_bytes_equal_kafka_python(version: int, response: ProduceResponse) -> None:
    encoded = encode_produce_response(response, version)
    assert encoded == response_as_kafka_python(response, version)
    decoded = KafkaPythonProduceResponse.decode(encoded, version=version)
    assert [t.name for t in decoded.responses] == [t.name for t in response.responses]


@pytest.mark.parametrize("version", KIO_VERSIONS)
@settings(max_examples=40, deadline=None)
@given(response=produce_responses)
def test_response_bytes_equal_kio(version: int, response: ProduceResponse) -> None:
    encoded = encode_produce_response(response, version)
    assert encoded == response_as_kio(response, version)
    schema = kio_module("produce", version, "response")
    decoded = kio_decode(schema.ProduceResponse, encoded)
    assert [int(p.index) for t in decoded.responses for p in t.partition_responses] == [
        p.index for t in response.responses for p in t.partition_responses
    ]


@pytest.mark.parametrize("version", [0, 1, 2])
def test_legacy_versions_get_unsupported_version_on_every_partition(version: int) -> None:
    request = ProduceRequest(
        None,
        1,
        1000,
        (
            TopicProduceData(
                "a",
                (
                    PartitionProduceData(0, memoryview(b"v0 message set")),
                    PartitionProduceData(1, memoryview(b"")),
                ),
            ),
            TopicProduceData("b", (PartitionProduceData(7, None),)),
        ),
    )
    decoded = decode_produce_request(as_kafka_python(request, version), version)
    body = encode_produce_response(unsupported_version_response(decoded), version)
    answer = KafkaPythonProduceResponse.decode(body, version=version)
    errors = [
        (t.name, p.index, p.error_code, p.base_offset)
        for t in answer.responses
        for p in t.partition_responses
    ]
    assert errors == [("a", 0, 35, -1), ("a", 1, 35, -1), ("b", 7, 35, -1)]
