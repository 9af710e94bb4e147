"""The follower's side of the replication requests: version choice, bodies out, answers in.

Pure ``bytes <-> values`` functions for ``fetcher.leader_endpoint`` (STYLE.md §8): which
version of each API to use with a leader (``negotiate``), and the Fetch, OffsetForLeaderEpoch,
ListOffsets and ApiVersions bodies a follower sends and receives, through kafka-python's
classes generated from Kafka's JSON schemas — except Fetch, sent every round trip and carrying
the bulk of replication's bytes, which the hand-written ``protocol.fetch_client`` encodes and
decodes, the records left uncopied (issue 18). Answers come back as the values the fetcher
core reads (``protocol.fetch.PartitionData``, ``fetcher.truncation.LeaderEpochEndOffset``).

Version choice follows Kafka's ``ReplicaFetcherThread`` for a current metadata version: Fetch
v13+ names topics by id (v12 when a partition has no topic id yet), v12+ is needed for
DivergingEpoch (KIP-320, ``truncation_on_fetch_supported``), v15+ carries the follower in
``ReplicaState`` with its broker epoch (KIP-903); OffsetForLeaderEpoch v2+ carries
``current_leader_epoch`` (KIP-320), v3+ the ``replica_id``; ListOffsets v4+ carries
``current_leader_epoch``. Each API is capped at the highest version pykraft itself serves
(``protocol.apis.SUPPORTED_API_VERSIONS``): the codecs are only tested that far.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterable, Mapping
from typing import Any

import attrs

from pykraft.fetcher.fetch_session import (
    FINAL_EPOCH,
    INVALID_SESSION_ID,
    SessionFetch,
    SessionTarget,
)
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS, decode_response, request_class
from pykraft.protocol.errors import Errors, ProtocolError
from pykraft.protocol.fetch import (
    NO_REPLICA_STATE,
    FetchPartition,
    FetchRequest,
    FetchTopic,
    ForgottenTopic,
    PartitionData,
    ReplicaState,
)
from pykraft.protocol.fetch_client import decode_fetch_response as decode_response_body
from pykraft.protocol.fetch_client import encode_fetch_request as encode_request_body
from pykraft.protocol.wire import ZERO_UUID
from pykraft.storage.topic_partition import TopicPartition

FIRST_TRUNCATION_ON_FETCH_VERSION = 12
FIRST_TOPIC_ID_FETCH_VERSION = 13
FIRST_REPLICA_STATE_FETCH_VERSION = 15
# Fetch v0-3 carry message formats v0/v1 (advertised, never served: protocol.legacy_fetch).
MIN_FETCH_VERSION = 4
MIN_OFFSET_FOR_LEADER_EPOCH_VERSION = 2
# ListOffsets v0 answers a list of segment offsets (OldStyleOffsets), not one offset.
MIN_LIST_OFFSETS_VERSION = 1


class LeaderProtocolError(ProtocolError):
    """The leader cannot serve a follower (a required API or version is missing)."""


@attrs.frozen
class LeaderFeatures:
    """The versions a follower uses with one leader, from its ApiVersions answer."""

    fetch_version: int
    list_offsets_version: int
    offset_for_leader_epoch_version: int | None  # None: the leader does not serve v2+

    @property
    def truncation_on_fetch_supported(self) -> bool:
        """KIP-320's DivergingEpoch path (Kafka ``isTruncationOnFetchSupported``)."""
        return self.fetch_version >= FIRST_TRUNCATION_ON_FETCH_VERSION

    @property
    def offsets_for_leader_epoch_supported(self) -> bool:
        return self.offset_for_leader_epoch_version is not None


@attrs.frozen
class FetchTarget:
    """One partition of a replica Fetch: where its topic is named and what is asked."""

    topic_partition: TopicPartition
    topic_id: uuid.UUID | None
    partition: FetchPartition


@attrs.frozen
class ReplicaFetch:
    """A follower's Fetch (Kafka's ``buildFetch``): ``replica.fetch.*`` settings and targets."""

    targets: tuple[FetchTarget, ...]
    max_wait_ms: int
    min_bytes: int
    max_bytes: int


def _highest_common(api_key: ApiKey, leader: tuple[int, int] | None, floor: int) -> int | None:
    ours = SUPPORTED_API_VERSIONS[api_key]
    if leader is None:
        return None
    high = min(leader[1], ours.max_version)
    low = max(leader[0], floor)
    return high if high >= low else None


def negotiate(leader_ranges: Mapping[int, tuple[int, int]]) -> LeaderFeatures:
    """Pick versions from the leader's ``{api_key: (min, max)}``; raises
    ``LeaderProtocolError`` when Fetch or ListOffsets has no usable version."""
    fetch = _highest_common(ApiKey.FETCH, leader_ranges.get(ApiKey.FETCH), MIN_FETCH_VERSION)
    list_offsets = _highest_common(
        ApiKey.LIST_OFFSETS, leader_ranges.get(ApiKey.LIST_OFFSETS), MIN_LIST_OFFSETS_VERSION
    )
    offset_for_leader_epoch = _highest_common(
        ApiKey.OFFSET_FOR_LEADER_EPOCH,
        leader_ranges.get(ApiKey.OFFSET_FOR_LEADER_EPOCH),
        MIN_OFFSET_FOR_LEADER_EPOCH_VERSION,
    )
    if fetch is None or list_offsets is None:
        raise LeaderProtocolError(
            f"the leader serves no Fetch v{MIN_FETCH_VERSION}+ or ListOffsets "
            f"v{MIN_LIST_OFFSETS_VERSION}+ that this follower speaks: {dict(leader_ranges)}"
        )
    return LeaderFeatures(fetch, list_offsets, offset_for_leader_epoch)


# ------------------------------------------------------------------------------------ Fetch


def fetch_version_for(request: ReplicaFetch, features: LeaderFeatures) -> int:
    """The negotiated Fetch version, at most v12 while a partition has no topic id."""
    if any(target.topic_id is None for target in request.targets):
        return min(features.fetch_version, FIRST_TOPIC_ID_FETCH_VERSION - 1)
    return features.fetch_version


def _grouped(targets: Iterable[SessionTarget], by_id: bool) -> dict[Any, list[SessionTarget]]:
    topics: dict[Any, list[SessionTarget]] = {}
    for target in targets:
        key = target.topic_id if by_id else target.topic_partition.topic
        topics.setdefault(key, []).append(target)
    return topics


def encode_fetch_request(
    request: ReplicaFetch,
    version: int,
    replica_id: int,
    broker_epoch: int,
    session: SessionFetch | None = None,
) -> bytes:
    """The Fetch body: the follower's id (body field to v14, ``ReplicaState`` from v15), and
    with ``session`` (``fetcher.fetch_session``) its session fields, the partitions it sends
    and the ones it forgets; without, a sessionless full fetch of every target.

    Hand-written (``protocol.fetch_client``, whose bytes equal kafka-python's): the generated
    encoder took ~5 us per partition, each fetch (issue 18)."""
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    if session is None:
        session = SessionFetch(INVALID_SESSION_ID, FINAL_EPOCH, request.targets)
    topics = tuple(
        FetchTopic(
            tuple(target.partition for target in group),
            topic="" if by_id else key,
            topic_id=key if by_id else ZERO_UUID,
        )
        for key, group in _grouped(session.to_send, by_id).items()
    )
    # Nothing to forget in every round but one after a partition left: no grouping then.
    forgotten = (
        tuple(
            ForgottenTopic(
                tuple(target.partition.partition for target in group),
                topic="" if by_id else key,
                topic_id=key if by_id else ZERO_UUID,
            )
            for key, group in _grouped(session.to_forget, by_id).items()
        )
        if session.to_forget
        else ()
    )
    message = FetchRequest(
        replica_id=replica_id,
        max_wait_ms=request.max_wait_ms,
        min_bytes=request.min_bytes,
        topics=topics,
        max_bytes=request.max_bytes,
        isolation_level=0,
        session_id=session.session_id,
        session_epoch=session.epoch,
        forgotten_topics_data=forgotten,
        replica_state=ReplicaState(replica_id, broker_epoch)
        if version >= FIRST_REPLICA_STATE_FETCH_VERSION
        else NO_REPLICA_STATE,
    )
    return encode_request_body(message, version)


def decode_fetch_response(
    body: memoryview | bytes, version: int, request: ReplicaFetch
) -> dict[TopicPartition, PartitionData]:
    """Each requested partition's answer (``decode_fetch_answer``); a top-level error (v7+,
    e.g. FETCH_SESSION_ID_NOT_FOUND) fails the whole request, as in Kafka's
    ``ReplicaFetcherThread``."""
    answer = decode_fetch_answer(body, version, request)
    if answer.error_code != Errors.NONE:
        raise LeaderProtocolError(f"Fetch answered top-level error {answer.error_code}")
    return answer.partitions


@attrs.frozen
class FetchAnswer:
    error_code: int
    session_id: int
    partitions: dict[TopicPartition, PartitionData]


def decode_fetch_answer(
    body: memoryview | bytes, version: int, request: ReplicaFetch
) -> FetchAnswer:
    """Each requested partition's answer; partitions the request did not name are dropped.

    Hand-written (``protocol.fetch_client``, the inverse of the leader's encoder): each
    partition's records stay one zero-copy slice of ``body`` for ``append_as_follower``, where
    kafka-python's generated decoder copied the frame and then every partition's records. Bytes
    that end early, lie about a length or run past the response raise ``MalformedRequestError``
    naming the field. With the top-level error and session id (v7+), for the fetch session.
    """
    response = decode_response_body(body, version)
    by_id = version >= FIRST_TOPIC_ID_FETCH_VERSION
    wanted = {
        (
            t.topic_id if by_id else t.topic_partition.topic,
            t.topic_partition.partition,
        ): t.topic_partition
        for t in request.targets
    }
    answers: dict[TopicPartition, PartitionData] = {}
    for topic in response.responses:
        key = topic.topic_id if by_id else topic.topic
        for partition in topic.partitions:
            topic_partition = wanted.get((key, partition.partition_index))
            if topic_partition is not None:
                answers[topic_partition] = (
                    partition
                    if partition.records is not None
                    else attrs.evolve(partition, records=())
                )
    return FetchAnswer(response.error_code, response.session_id, answers)


# ---------------------------------------------------------------------- OffsetForLeaderEpoch


def encode_offset_for_leader_epoch_request(
    requests: Mapping[TopicPartition, LeaderEpochRequest], version: int, replica_id: int
) -> bytes:
    request_cls = request_class(ApiKey.OFFSET_FOR_LEADER_EPOCH)
    topic_cls = request_cls.OffsetForLeaderTopic
    by_topic: dict[str, list[Any]] = {}
    for topic_partition, request in requests.items():
        by_topic.setdefault(topic_partition.topic, []).append(
            topic_cls.OffsetForLeaderPartition(
                partition=topic_partition.partition,
                current_leader_epoch=request.current_leader_epoch,
                leader_epoch=request.leader_epoch,
            )
        )
    message = request_cls(
        version=version,
        replica_id=replica_id,
        topics=[topic_cls(topic=name, partitions=parts) for name, parts in by_topic.items()],
    )
    return bytes(message.encode(version=version))


def decode_offset_for_leader_epoch_response(
    body: memoryview | bytes, version: int, requests: Mapping[TopicPartition, LeaderEpochRequest]
) -> dict[TopicPartition, LeaderEpochEndOffset]:
    """Every requested partition's answer; one the leader left out is UNKNOWN_SERVER_ERROR,
    which backs that partition off."""
    response = decode_response(ApiKey.OFFSET_FOR_LEADER_EPOCH, version, body)
    answers = {
        topic_partition: LeaderEpochEndOffset(Errors.UNKNOWN_SERVER_ERROR)
        for topic_partition in requests
    }
    for topic in response.topics:
        for partition in topic.partitions:
            topic_partition = TopicPartition(topic.topic, partition.partition)
            if topic_partition in answers:
                answers[topic_partition] = LeaderEpochEndOffset(
                    partition.error_code, partition.leader_epoch, partition.end_offset
                )
    return answers


# ------------------------------------------------------------------------------ ListOffsets


def encode_list_offsets_request(
    topic_partition: TopicPartition,
    current_leader_epoch: int,
    timestamp: int,
    version: int,
    replica_id: int,
) -> bytes:
    """One partition at one timestamp; as a replica, so "latest" is the leader's log end."""
    request_cls = request_class(ApiKey.LIST_OFFSETS)
    topic_cls = request_cls.ListOffsetsTopic
    message = request_cls(
        version=version,
        replica_id=replica_id,
        isolation_level=0,
        topics=[
            topic_cls(
                name=topic_partition.topic,
                partitions=[
                    topic_cls.ListOffsetsPartition(
                        partition_index=topic_partition.partition,
                        current_leader_epoch=current_leader_epoch,
                        timestamp=timestamp,
                    )
                ],
            )
        ],
    )
    return bytes(message.encode(version=version))


def decode_list_offsets_response(
    body: memoryview | bytes, version: int, topic_partition: TopicPartition
) -> tuple[int, int]:
    """``(error_code, offset)`` for the one partition asked about."""
    response = decode_response(ApiKey.LIST_OFFSETS, version, body)
    for topic in response.topics:
        for partition in topic.partitions:
            if (topic.name, partition.partition_index) == (
                topic_partition.topic,
                topic_partition.partition,
            ):
                return partition.error_code, partition.offset
    return Errors.UNKNOWN_TOPIC_OR_PARTITION, -1
