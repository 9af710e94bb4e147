"""The follower's request and response codecs against the broker's own codecs (no sockets).

What a follower sends must decode with what the leader's handlers decode with
(``protocol.fetch.decode_fetch_request``, ``protocol.apis.decode_request``), and what a leader
encodes (``protocol.fetch.encode_fetch_response``, ``protocol.apis.encode_response``) must come
back as the values the fetcher core reads. The socket side (``KafkaLeaderEndpoint``) is tested
against a real listener in tests/integration/test_leader_endpoint.py.
"""

from __future__ import annotations

import uuid

import pytest

from pykraft.fetcher.broker_connection import decode_api_versions_response
from pykraft.fetcher.fetch_session import FetchSessionHandler
from pykraft.fetcher.leader_codecs import (
    FetchTarget,
    LeaderFeatures,
    LeaderProtocolError,
    ReplicaFetch,
    decode_fetch_response,
    decode_list_offsets_response,
    decode_offset_for_leader_epoch_response,
    encode_fetch_request,
    encode_list_offsets_request,
    encode_offset_for_leader_epoch_request,
    fetch_version_for,
    negotiate,
)
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import (
    SUPPORTED_API_VERSIONS,
    decode_request,
    encode_api_versions_response,
    encode_response,
    encode_unsupported_api_versions_response,
    response_class,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import (
    EpochEndOffset,
    FetchableTopicResponse,
    FetchPartition,
    FetchResponse,
    PartitionData,
    ReplicaState,
    decode_fetch_request,
    encode_fetch_response,
)
from pykraft.storage.topic_partition import TopicPartition

ORDERS, PAYMENTS = uuid.UUID(int=1), uuid.UUID(int=2)
O0, O1, P0 = TopicPartition("orders", 0), TopicPartition("orders", 1), TopicPartition("payments", 0)
FETCH = ReplicaFetch(
    (
        FetchTarget(O0, ORDERS, FetchPartition(0, 10, 1 << 20, 3, 2, 0)),
        FetchTarget(O1, ORDERS, FetchPartition(1, 0, 1 << 20, 3, -1, 0)),
        FetchTarget(P0, PAYMENTS, FetchPartition(0, 5, 1 << 20, 7, 7, 5)),
    ),
    max_wait_ms=500,
    min_bytes=1,
    max_bytes=10 << 20,
)
OURS: dict[int, tuple[int, int]] = {
    key: (r.min_version, r.max_version) for key, r in SUPPORTED_API_VERSIONS.items()
}


def flat(response: FetchResponse, version: int) -> bytes:
    return encode_fetch_response(response, version).to_bytes(lambda piece: b"")


# ------------------------------------------------------------------------------ negotiation


@pytest.mark.parametrize(
    ("leader", "expected"),
    [
        (OURS, LeaderFeatures(17, 9, 4)),  # pykraft against pykraft (Kafka 3.9's maxima)
        ({**OURS, ApiKey.FETCH: (0, 18)}, LeaderFeatures(17, 9, 4)),  # capped at ours
        ({**OURS, ApiKey.FETCH: (0, 11)}, LeaderFeatures(11, 9, 4)),  # before KIP-320
        ({**OURS, ApiKey.OFFSET_FOR_LEADER_EPOCH: (0, 1)}, LeaderFeatures(17, 9, None)),
        ({ApiKey.FETCH: (4, 12), ApiKey.LIST_OFFSETS: (1, 3)}, LeaderFeatures(12, 3, None)),
    ],
)
def test_negotiate_picks_the_highest_common_version(
    leader: dict[int, tuple[int, int]], expected: LeaderFeatures
) -> None:
    assert negotiate(leader) == expected


def test_negotiate_names_what_is_missing() -> None:
    with pytest.raises(LeaderProtocolError, match="Fetch v4"):
        negotiate({ApiKey.FETCH: (0, 3), ApiKey.LIST_OFFSETS: (0, 8)})
    with pytest.raises(LeaderProtocolError, match="ListOffsets"):
        negotiate({ApiKey.FETCH: (0, 16)})


def test_feature_flags_follow_the_versions() -> None:
    assert LeaderFeatures(12, 8, 4).truncation_on_fetch_supported
    assert not LeaderFeatures(11, 8, 4).truncation_on_fetch_supported
    assert not LeaderFeatures(16, 8, None).offsets_for_leader_epoch_supported


def test_api_versions_answers_decode_into_the_ranges_features_come_from() -> None:
    for version in (0, 3):
        body = encode_api_versions_response(version)
        error, ranges = decode_api_versions_response(body, version)
        assert error == Errors.NONE and ranges is not None
        assert negotiate(ranges) == negotiate(OURS)
    # KIP-511: a too-new ApiVersions request is answered in v0 with UNSUPPORTED_VERSION.
    unsupported = encode_unsupported_api_versions_response()
    assert decode_api_versions_response(unsupported, 3) == (Errors.UNSUPPORTED_VERSION, None)


# ------------------------------------------------------------------------------------ Fetch


@pytest.mark.parametrize("version", range(4, 17))
def test_fetch_request_decodes_on_the_leader(version: int) -> None:
    request = decode_fetch_request(encode_fetch_request(FETCH, version, 2, 42), version)
    assert request.replica_id == 2  # Kafka's FetchRequest.replicaId(), body or ReplicaState
    expected_state = ReplicaState(2, 42) if version >= 15 else ReplicaState()
    assert request.replica_state == expected_state
    assert (request.max_wait_ms, request.min_bytes) == (500, 1)
    assert (request.session_id, request.isolation_level) == (0, 0)
    if version >= 7:
        assert (request.max_bytes, request.session_epoch) == (10 << 20, -1)
    names = [(t.topic_id if version >= 13 else t.topic) for t in request.topics]
    assert names == ([ORDERS, PAYMENTS] if version >= 13 else ["orders", "payments"])
    sent = [p for t in request.topics for p in t.partitions]
    expected = [t.partition for t in FETCH.targets]
    if version < 12:
        expected = [_without_last_fetched_epoch(p) for p in expected]
    if version < 9:
        expected = [_without_current_leader_epoch(p) for p in expected]
    if version < 5:
        expected = [_without_log_start_offset(p) for p in expected]
    assert sent == expected


@pytest.mark.parametrize("version", [7, 12, 13, 16])
def test_an_incremental_fetch_forgets_what_the_follower_stopped_fetching(version: int) -> None:
    # KIP-227: partitions the follower no longer fetches go out as forgotten_topics_data.
    session = FetchSessionHandler()
    session.build(FETCH.targets)
    assert session.handle_response(Errors.NONE, 9)
    kept = ReplicaFetch(FETCH.targets[:1], 500, 1, 10 << 20)
    body = encode_fetch_request(kept, version, 2, 42, session.build(kept.targets))
    request = decode_fetch_request(body, version)
    assert (request.session_id, request.session_epoch) == (9, 1)
    assert [p for t in request.topics for p in t.partitions] == []  # O0 unchanged since
    forgotten = {
        (t.topic_id if version >= 13 else t.topic, p)
        for t in request.forgotten_topics_data
        for p in t.partitions
    }
    names = (ORDERS, PAYMENTS) if version >= 13 else ("orders", "payments")
    assert forgotten == {(names[0], 1), (names[1], 0)}
    again = encode_fetch_request(kept, version, 2, 42, session.build(kept.targets))
    assert decode_fetch_request(again, version).forgotten_topics_data == ()


def _without_last_fetched_epoch(p: FetchPartition) -> FetchPartition:
    return FetchPartition(
        p.partition,
        p.fetch_offset,
        p.partition_max_bytes,
        p.current_leader_epoch,
        -1,
        p.log_start_offset,
    )


def _without_current_leader_epoch(p: FetchPartition) -> FetchPartition:
    return FetchPartition(
        p.partition,
        p.fetch_offset,
        p.partition_max_bytes,
        -1,
        p.last_fetched_epoch,
        p.log_start_offset,
    )


def _without_log_start_offset(p: FetchPartition) -> FetchPartition:
    return FetchPartition(
        p.partition,
        p.fetch_offset,
        p.partition_max_bytes,
        p.current_leader_epoch,
        p.last_fetched_epoch,
        -1,
    )


def test_fetch_names_topics_while_a_topic_id_is_missing() -> None:
    partial = ReplicaFetch((FetchTarget(O0, None, FETCH.targets[0].partition),), 500, 1, 1 << 20)
    assert fetch_version_for(partial, LeaderFeatures(16, 8, 4)) == 12
    assert fetch_version_for(FETCH, LeaderFeatures(16, 8, 4)) == 16
    assert fetch_version_for(FETCH, LeaderFeatures(11, 8, 4)) == 11


@pytest.mark.parametrize("version", [4, 5, 11, 12, 13, 16])
def test_fetch_response_from_the_leader_decodes_into_partition_data(version: int) -> None:
    records = b"\x00" * 70
    diverged = EpochEndOffset(2, 8) if version >= 12 else EpochEndOffset()
    orders = FetchableTopicResponse(
        (
            PartitionData(
                0, high_watermark=12, log_start_offset=3, records=(records[:30], records[30:])
            ),
            PartitionData(1, high_watermark=4, diverging_epoch=diverged, records=()),
            PartitionData(9, high_watermark=1),  # not asked for: dropped
        ),
        topic="orders",
        topic_id=ORDERS,
    )
    payments = FetchableTopicResponse(
        (PartitionData(0, error_code=Errors.FENCED_LEADER_EPOCH),),
        topic="payments",
        topic_id=PAYMENTS,
    )
    body = flat(FetchResponse((orders, payments)), version)
    answers = decode_fetch_response(body, version, FETCH)
    log_start = 3 if version >= 5 else -1
    assert answers == {
        O0: PartitionData(
            0,
            high_watermark=12,
            last_stable_offset=-1,
            log_start_offset=log_start,
            records=(records,),
        ),
        O1: PartitionData(
            1, high_watermark=4, diverging_epoch=diverged, records=(), log_start_offset=-1
        ),
        P0: PartitionData(0, error_code=Errors.FENCED_LEADER_EPOCH, records=()),
    }


def test_a_top_level_fetch_error_fails_the_whole_request() -> None:
    body = flat(FetchResponse((), error_code=Errors.FETCH_SESSION_ID_NOT_FOUND), 16)
    with pytest.raises(LeaderProtocolError, match="top-level error 70"):
        decode_fetch_response(body, 16, FETCH)


# ---------------------------------------------------------------------- OffsetForLeaderEpoch

EPOCH_REQUESTS = {O0: LeaderEpochRequest(5, 4), P0: LeaderEpochRequest(7, 6)}


@pytest.mark.parametrize("version", [2, 3, 4])
def test_offset_for_leader_epoch_round_trip(version: int) -> None:
    body = encode_offset_for_leader_epoch_request(EPOCH_REQUESTS, version, 2)
    request = decode_request(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
    # v2 has no replica_id: the schema default, -2 (DEBUGGING_REPLICA_ID), is what decodes.
    assert request.replica_id == (2 if version >= 3 else -2)
    sent = {
        (t.topic, p.partition): (p.current_leader_epoch, p.leader_epoch)
        for t in request.topics
        for p in t.partitions
    }
    assert sent == {("orders", 0): (5, 4), ("payments", 0): (7, 6)}
    cls = response_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    topic = cls.OffsetForLeaderTopicResult
    response = cls(
        version=version,
        throttle_time_ms=0,
        topics=[
            topic(
                topic="orders",
                partitions=[
                    topic.EpochEndOffset(error_code=0, partition=0, leader_epoch=3, end_offset=17),
                ],
            )
        ],
    )
    encoded = encode_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, response)
    assert decode_offset_for_leader_epoch_response(encoded, version, EPOCH_REQUESTS) == {
        O0: LeaderEpochEndOffset(Errors.NONE, 3, 17),
        # Left out by the leader: backs off like any error.
        P0: LeaderEpochEndOffset(Errors.UNKNOWN_SERVER_ERROR),
    }


# ------------------------------------------------------------------------------ ListOffsets


@pytest.mark.parametrize("version", range(1, 9))
def test_list_offsets_round_trip(version: int) -> None:
    body = encode_list_offsets_request(P0, 7, -2, version, 2)
    request = decode_request(ApiKey.LIST_OFFSETS, version, body)
    assert request.replica_id == 2  # a replica: "latest" is the log end, not the HW
    (topic,) = request.topics
    (partition,) = topic.partitions
    assert (topic.name, partition.partition_index, partition.timestamp) == ("payments", 0, -2)
    assert partition.current_leader_epoch == (7 if version >= 4 else -1)
    cls = response_class(ApiKey.LIST_OFFSETS)
    topic_cls = cls.ListOffsetsTopicResponse
    answer = topic_cls.ListOffsetsPartitionResponse(
        partition_index=0, error_code=0, timestamp=-1, offset=41, leader_epoch=7
    )
    response = cls(
        version=version,
        throttle_time_ms=0,
        topics=[topic_cls(name="payments", partitions=[answer])],
    )
    encoded = encode_response(ApiKey.LIST_OFFSETS, version, response)
    assert decode_list_offsets_response(encoded, version, P0) == (Errors.NONE, 41)
    assert decode_list_offsets_response(encoded, version, O0) == (
        Errors.UNKNOWN_TOPIC_OR_PARTITION,
        -1,
    )
