"""The replica fetcher's side of Fetch: request encoder and response decoder, v4-v16.

Request bytes must equal kafka-python's; both directions must round-trip through the broker
side (``decode_fetch_request`` / ``encode_fetch_response``).
"""

from __future__ import annotations

import uuid

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.protocol.common import UNKNOWN_LEADER, LeaderIdAndEpoch, NodeEndpoint
from pykraft.protocol.errors import MalformedRequestError
from pykraft.protocol.fetch import (
    NO_DIVERGING_EPOCH,
    NO_SNAPSHOT_ID,
    AbortedTransaction,
    EpochEndOffset,
    FetchableTopicResponse,
    FetchRequest,
    FetchResponse,
    PartitionData,
    SnapshotId,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.protocol.fetch_client import decode_fetch_response, encode_fetch_request
from pykraft.protocol.wire import ZERO_UUID
from tests.protocol.test_fetch import (
    VERSIONS,
    fetch_requests,
    fetch_responses,
    flat_records,
    read_fake,
    request_as_kafka_python,
    visible_request,
)


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None)
@given(request=fetch_requests)
def test_request_bytes_equal_kafka_python_and_round_trip(
    version: int, request: FetchRequest
) -> None:
    body = encode_fetch_request(request, version)
    assert body == request_as_kafka_python(request, version)
    assert decode_fetch_request(body, version) == visible_request(request, version)


def visible_response(response: FetchResponse, version: int) -> FetchResponse:
    """What ``version`` carries, with each partition's records as one chunk."""

    def partition(p: PartitionData) -> PartitionData:
        records = flat_records(p.records)
        flexible = version >= 12
        return attrs.evolve(
            p,
            log_start_offset=p.log_start_offset if version >= 5 else -1,
            preferred_read_replica=p.preferred_read_replica if version >= 11 else -1,
            diverging_epoch=p.diverging_epoch if flexible else NO_DIVERGING_EPOCH,
            current_leader=p.current_leader if flexible else UNKNOWN_LEADER,
            snapshot_id=p.snapshot_id if flexible else NO_SNAPSHOT_ID,
            records=None if records is None else ((memoryview(records),) if records else ()),
        )

    return attrs.evolve(
        response,
        responses=tuple(
            FetchableTopicResponse(
                tuple(partition(p) for p in t.partitions),
                topic=t.topic if version <= 12 else "",
                topic_id=t.topic_id if version >= 13 else ZERO_UUID,
            )
            for t in response.responses
        ),
        error_code=response.error_code if version >= 7 else 0,
        session_id=response.session_id if version >= 7 else 0,
        node_endpoints=response.node_endpoints if version >= 16 else (),
    )


@pytest.mark.parametrize("version", VERSIONS)
@settings(max_examples=25, deadline=None)
@given(response=fetch_responses)
def test_response_round_trip(version: int, response: FetchResponse) -> None:
    body = encode_fetch_response(response, version).to_bytes(read_fake)
    assert decode_fetch_response(body, version) == visible_response(response, version)


def test_diverging_epoch_reaches_the_follower() -> None:
    # KIP-320: the leader answers a follower whose log diverged with the end of its epoch.
    response = FetchResponse(
        (
            FetchableTopicResponse(
                (
                    PartitionData(
                        0,
                        high_watermark=90,
                        diverging_epoch=EpochEndOffset(4, 77),
                        current_leader=LeaderIdAndEpoch(2, 5),
                        snapshot_id=SnapshotId(10, 1),
                    ),
                ),
                topic_id=uuid.uuid4(),
            ),
        ),
        node_endpoints=(NodeEndpoint(2, "b2", 9092, None),),
    )
    body = encode_fetch_response(response, 16).to_bytes(read_fake)
    partition = decode_fetch_response(body, 16).responses[0].partitions[0]
    assert partition.diverging_epoch == EpochEndOffset(4, 77)
    assert partition.current_leader == LeaderIdAndEpoch(2, 5)
    assert partition.snapshot_id == SnapshotId(10, 1)
    assert decode_fetch_response(body, 16).node_endpoints == (NodeEndpoint(2, "b2", 9092, None),)


# A follower's usual answer (null aborted transactions, no tags) is read by a fast path; every
# other shape falls back to the field-by-field reader, with the reader where it was.
PARTITION_SHAPES = [
    PartitionData(0, high_watermark=5, log_start_offset=2, records=(b"batches",)),
    PartitionData(1, preferred_read_replica=3, records=(b"x" * 300,)),  # a 2-byte length
    PartitionData(2, records=()),
    PartitionData(3, records=None),
    PartitionData(4, aborted_transactions=(), records=(b"r",)),
    PartitionData(5, aborted_transactions=(AbortedTransaction(7, 9),), records=(b"r",)),
    PartitionData(6, diverging_epoch=EpochEndOffset(4, 77), records=(b"r",)),  # tags follow
    PartitionData(7, error_code=1, records=None, current_leader=LeaderIdAndEpoch(2, 5)),
]


@pytest.mark.parametrize("version", [12, 13, 16])
@pytest.mark.parametrize("first", PARTITION_SHAPES)
def test_each_partition_shape_decodes_as_sent(version: int, first: PartitionData) -> None:
    after = PartitionData(9, high_watermark=11, records=(b"next",))
    response = FetchResponse(
        (FetchableTopicResponse((first, after), "t", uuid.UUID(int=5)),), session_id=8
    )
    body = encode_fetch_response(response, version).to_bytes(read_fake)
    assert decode_fetch_response(body, version) == visible_response(response, version)


@pytest.mark.parametrize("version", [4, 11, 12, 16])
def test_every_truncated_response_is_rejected(version: int) -> None:
    response = FetchResponse(
        (
            FetchableTopicResponse(
                (
                    PartitionData(
                        0,
                        high_watermark=5,
                        diverging_epoch=EpochEndOffset(1, 2),
                        records=(b"record-bytes",),
                    ),
                ),
                "t",
                uuid.uuid4(),
            ),
        ),
        node_endpoints=(NodeEndpoint(1, "h", 1),),
    )
    body = encode_fetch_response(response, version).to_bytes(read_fake)
    for cut in range(len(body)):
        with pytest.raises(MalformedRequestError):
            decode_fetch_response(body[:cut], version)


@settings(max_examples=25, deadline=None)
@given(records=st.binary(min_size=1, max_size=50))
def test_decoded_records_are_a_view_of_the_response_frame(records: bytes) -> None:
    response = FetchResponse(
        (FetchableTopicResponse((PartitionData(0, records=(records,)),), "t"),)
    )
    frame = bytearray(encode_fetch_response(response, 12).to_bytes(read_fake))
    decoded = decode_fetch_response(frame, 12).responses[0].partitions[0].records
    assert decoded is not None
    [view] = decoded
    assert isinstance(view, memoryview) and view.obj is frame and bytes(view) == records
