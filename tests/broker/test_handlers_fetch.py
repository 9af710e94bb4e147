"""The Fetch handler: kafka-python-encoded requests, responses decoded by kafka-python, records
served as FileSlices of the real segment files (Kafka's KafkaApis.handleFetchRequest)."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.consumer import FetchRequest, FetchResponse

from pykraft.broker.handlers.fetch import fetch_handler
from pykraft.broker.handlers.services import topic_uuid
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.segments import Segments
from pykraft.storage.file_slice import FileSlice
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.handler_support import by_topic, pets_and_birds, started_cluster
from tests.broker.replica_harness import (
    BIRDS_ID,
    LOCAL,
    OTHER,
    PETS0,
    PETS_ID,
    Cluster,
    batch,
    call,
    call_async,
    encode,
    request_context,
    services,
)

_Topic = FetchRequest.FetchTopic
_Partition = _Topic.FetchPartition


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    yield from started_cluster(Cluster(tmp_path), *pets_and_birds(pets0_leader_epoch=3))


def fetch_request(
    version: int,
    partitions: dict[tuple[str, int], int],
    *,
    replica_id: int = -1,
    max_wait_ms: int = 0,
    min_bytes: int = 1,
    max_bytes: int = 1 << 20,
    partition_max_bytes: int = 1 << 20,
    isolation_level: int = 0,
    session_id: int = 0,
    session_epoch: int = -1,
    current_leader_epoch: int = -1,
    last_fetched_epoch: int = -1,
    forgotten: dict[str, list[int]] | None = None,
) -> bytes:
    topics = by_topic(
        (
            topic,
            _Partition(
                partition=index,
                current_leader_epoch=current_leader_epoch,
                fetch_offset=offset,
                last_fetched_epoch=last_fetched_epoch,
                log_start_offset=-1,
                partition_max_bytes=partition_max_bytes,
            ),
        )
        for (topic, index), offset in partitions.items()
    )
    by_id = version >= 13
    message = FetchRequest(
        version=version,
        replica_id=replica_id,
        replica_state=FetchRequest.ReplicaState(replica_id=replica_id, replica_epoch=-1)
        if version >= 15 and replica_id >= 0
        else None,
        max_wait_ms=max_wait_ms,
        min_bytes=min_bytes,
        max_bytes=max_bytes,
        isolation_level=isolation_level,
        session_id=session_id,
        session_epoch=session_epoch,
        topics=[
            _Topic(
                topic="" if by_id else name,
                topic_id=_id_of(name) if by_id else None,
                partitions=parts,
            )
            for name, parts in topics.items()
        ],
        forgotten_topics_data=[
            FetchRequest.ForgottenTopic(
                topic="" if by_id else name,
                topic_id=_id_of(name) if by_id else None,
                partitions=indexes,
            )
            for name, indexes in (forgotten or {}).items()
        ],
        rack_id="",
    )
    return encode(message, version)


def _id_of(name: str) -> uuid.UUID:
    known = {"pets": PETS_ID, "birds": BIRDS_ID}
    return topic_uuid(known[name]) if name in known else uuid.UUID(int=99)


def fetch(
    cluster: Cluster, version: int, partitions: dict[tuple[str, int], int], **options: Any
) -> Any:
    body = call(
        fetch_handler(services(cluster)),
        ApiKey.FETCH,
        version,
        fetch_request(version, partitions, **options),
    )
    assert body is not None
    return FetchResponse.decode(body, version=version)


def partition_of(response: Any, topic_index: int = 0, index: int = 0) -> Any:
    return response.responses[topic_index].partitions[index]


def stored_bytes(cluster: Cluster) -> bytes:
    log = cluster.replica_manager.get_partition(PETS0).log  # type: ignore[union-attr]
    return log.read(0, 1 << 20, log.log_end_offset).read_bytes()


@pytest.mark.parametrize("version", range(4, 17))
def test_every_version_returns_the_stored_batches(cluster: Cluster, version: int) -> None:
    cluster.produce(PETS0, batch(b"a", b"b"))
    cluster.produce(PETS0, batch(b"c"))
    response = fetch(cluster, version, {("pets", 0): 0})
    if version >= 13:
        assert response.responses[0].topic_id == topic_uuid(PETS_ID)
    else:
        assert response.responses[0].topic == "pets"
    partition = partition_of(response)
    assert partition.error_code == Errors.NONE
    assert partition.high_watermark == partition.last_stable_offset == 3
    if version >= 5:
        assert partition.log_start_offset == 0
    assert partition.aborted_transactions is None  # READ_UNCOMMITTED
    assert partition.records == stored_bytes(cluster)
    if version >= 7:
        assert (response.error_code, response.session_id) == (Errors.NONE, 0)


def test_records_go_out_as_file_slices_of_the_segment(cluster: Cluster) -> None:
    cluster.produce(PETS0, batch(b"a"))
    handler = fetch_handler(services(cluster))

    async def run() -> Segments:
        body = fetch_request(12, {("pets", 0): 0})
        result = await handler(request_context(ApiKey.FETCH, 12), memoryview(bytearray(body)))
        assert isinstance(result, Segments)
        return result

    segments = asyncio.run(run())
    slices = [part for part in segments.parts if isinstance(part, FileSlice)]
    assert [(s.path.name, s.position) for s in slices] == [("00000000000000000000.log", 0)]
    assert slices[0].read_bytes() == stored_bytes(cluster)


def test_consumers_stop_at_the_high_watermark_followers_at_the_log_end(cluster: Cluster) -> None:
    pets1 = ("pets", 1)
    cluster.produce(TopicPartition("pets", 1), batch(b"a"))
    # Follower OTHER has not fetched yet: the high watermark is 0.
    consumer = partition_of(fetch(cluster, 12, {pets1: 0}))
    assert (consumer.high_watermark, consumer.records) == (0, b"")
    for version in (12, 15):  # v15 carries the replica id in ReplicaState
        follower = partition_of(fetch(cluster, version, {pets1: 0}, replica_id=OTHER))
        assert follower.error_code == Errors.NONE and len(follower.records) > 0
    # The follower's next fetch at offset 1 reports its log end: the high watermark moves.
    fetch(cluster, 12, {pets1: 1}, replica_id=OTHER)
    consumer = partition_of(fetch(cluster, 12, {pets1: 0}))
    assert consumer.high_watermark == 1 and len(consumer.records) > 0


def test_max_bytes_and_partition_max_bytes(cluster: Cluster) -> None:
    first = batch(b"x" * 200)
    cluster.produce(PETS0, first)
    cluster.produce(PETS0, batch(b"y" * 200))
    cluster.produce(TopicPartition("pets", 1), batch(b"z"))
    # partition_max_bytes below one batch: still the first whole batch (KIP-74).
    response = fetch(cluster, 12, {("pets", 0): 0}, partition_max_bytes=10)
    assert len(partition_of(response).records) == len(first)
    # max_bytes spent on pets-0: pets-1 gets nothing this time.
    response = fetch(cluster, 12, {("pets", 0): 0, ("pets", 1): 0}, max_bytes=len(first) + 10)
    assert len(partition_of(response, 0, 0).records) == len(first)
    assert partition_of(response, 0, 1).records == b""


def test_errors_and_leader_hints(cluster: Cluster) -> None:
    def error(version: int, topic: str, offset: int = 0, **options: Any) -> Any:
        return partition_of(fetch(cluster, version, {(topic, 0): offset}, **options))

    assert error(12, "nope").error_code == Errors.UNKNOWN_TOPIC_OR_PARTITION
    assert error(13, "nope").error_code == Errors.UNKNOWN_TOPIC_ID
    assert error(12, "pets", offset=5).error_code == Errors.OFFSET_OUT_OF_RANGE
    fenced = error(12, "pets", current_leader_epoch=2)
    assert fenced.error_code == Errors.FENCED_LEADER_EPOCH
    assert (fenced.current_leader.leader_id, fenced.current_leader.leader_epoch) == (LOCAL, 3)
    assert error(12, "pets", current_leader_epoch=4).error_code == Errors.UNKNOWN_LEADER_EPOCH
    not_leader = fetch(cluster, 16, {("birds", 0): 0})
    birds = partition_of(not_leader)
    assert birds.error_code == Errors.NOT_LEADER_OR_FOLLOWER
    assert (birds.current_leader.leader_id, birds.current_leader.leader_epoch) == (OTHER, 6)
    assert [(n.node_id, n.host, n.port) for n in not_leader.node_endpoints] == [
        (OTHER, "broker2.local", 9092)
    ]
    assert (birds.high_watermark, birds.log_start_offset) == (-1, -1)


def test_diverging_epoch_for_a_follower(cluster: Cluster) -> None:
    pets1 = TopicPartition("pets", 1)
    cluster.produce(pets1, batch(b"a", b"b"))  # epoch 1: offsets 0-1
    cluster.publish(PartitionChangeRecord(topic_id=PETS_ID, partition_id=1, leader=LOCAL))
    cluster.produce(pets1, batch(b"c"))  # epoch 2 from offset 2
    partition = partition_of(
        fetch(cluster, 12, {("pets", 1): 3}, replica_id=OTHER, last_fetched_epoch=1)
    )
    assert (partition.diverging_epoch.epoch, partition.diverging_epoch.end_offset) == (1, 2)
    assert partition.records == b""


def test_an_incremental_session_answers_what_changed_and_forgets_partitions(
    cluster: Cluster,
) -> None:
    """KIP-227 through the handler: a full fetch opens a session, incremental fetches name only
    what changed, answer only partitions with news, and the session moves epoch by epoch."""
    handler = fetch_handler(services(cluster))
    cluster.produce(PETS0, batch(b"a"))

    def send(version: int, partitions: dict[tuple[str, int], int], **options: Any) -> Any:
        body = call(handler, ApiKey.FETCH, version, fetch_request(version, partitions, **options))
        assert body is not None
        return FetchResponse.decode(body, version=version)

    def answered(response: Any) -> list[tuple[int, bytes]]:
        return [(p.partition_index, p.records) for t in response.responses for p in t.partitions]

    full = send(13, {("pets", 0): 0, ("pets", 1): 0}, session_epoch=0)
    session = full.session_id
    assert session != 0 and answered(full) == [(0, stored_bytes(cluster)), (1, b"")]
    # The client read pets-0 up to 1 and says so; nothing new: no partition answered.
    nothing = send(13, {("pets", 0): 1}, session_id=session, session_epoch=1)
    assert (nothing.error_code, nothing.session_id, answered(nothing)) == (0, session, [])
    # pets-0 gets a record: only pets-0 is answered, though the request named no partition.
    cluster.produce(PETS0, batch(b"b"))
    news = send(13, {}, session_id=session, session_epoch=2)
    assert [index for index, _ in answered(news)] == [0]
    # The client read pets-0 up to 2 and forgets pets-1; a repeated epoch is then refused.
    forgot = send(
        13, {("pets", 0): 2}, session_id=session, session_epoch=3, forgotten={"pets": [1]}
    )
    assert answered(forgot) == []
    repeated = send(13, {}, session_id=session, session_epoch=3)
    assert (repeated.error_code, repeated.responses) == (Errors.INVALID_FETCH_SESSION_EPOCH, [])
    # Fetch v12 names topics, the session topic ids: FETCH_SESSION_TOPIC_ID_ERROR.
    by_name = send(12, {}, session_id=session, session_epoch=4)
    assert by_name.error_code == Errors.FETCH_SESSION_TOPIC_ID_ERROR
    # Forgetting the last partition closes the session: answered sessionless.
    closing = send(13, {}, session_id=session, session_epoch=4, forgotten={"pets": [0]})
    assert (closing.error_code, closing.session_id) == (Errors.NONE, 0)
    gone = send(13, {}, session_id=session, session_epoch=5)
    assert (gone.error_code, gone.responses) == (Errors.FETCH_SESSION_ID_NOT_FOUND, [])


def test_full_fetches_with_the_final_epoch_open_no_session(cluster: Cluster) -> None:
    response = fetch(cluster, 12, {("pets", 0): 0}, session_epoch=-1)
    assert (response.error_code, response.session_id) == (Errors.NONE, 0)
    # An incremental fetch names a session this broker never handed out.
    response = fetch(cluster, 12, {("pets", 0): 0}, session_id=1234, session_epoch=5)
    assert (response.error_code, response.responses) == (Errors.FETCH_SESSION_ID_NOT_FOUND, [])


def test_read_committed_gets_an_empty_aborted_list(cluster: Cluster) -> None:
    cluster.produce(PETS0, batch(b"a"))
    partition = partition_of(fetch(cluster, 12, {("pets", 0): 0}, isolation_level=1))
    assert partition.aborted_transactions == []
    assert partition.last_stable_offset == 1


def test_a_waiting_fetch_is_answered_by_the_next_append(cluster: Cluster) -> None:
    handler = fetch_handler(services(cluster))
    body = fetch_request(12, {("pets", 0): 0}, max_wait_ms=30_000, min_bytes=1)

    async def run() -> bytes | None:
        task = asyncio.ensure_future(call_async(handler, ApiKey.FETCH, 12, body))
        for _ in range(3):
            await asyncio.sleep(0)
        assert not task.done()  # min_bytes=1 and an empty log: it waits
        cluster.produce(PETS0, batch(b"late"))
        return await task

    body_bytes = asyncio.run(run())
    assert body_bytes is not None
    partition = partition_of(FetchResponse.decode(body_bytes, version=12))
    assert partition.records == stored_bytes(cluster)
