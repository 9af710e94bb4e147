"""The asyncio ReplicaFetcher against an in-memory leader, replicating into real PartitionLogs.

Each round is Kafka's ``AbstractFetcherThread.doWork``; scenarios follow Kafka's
AbstractFetcherThreadTest (AFTT) and ReplicaFetcherThreadTest (RFTT), on both truncation paths
where the path matters: ``MODERN`` (Fetch v16, KIP-320 DivergingEpoch) and ``PRE_KIP_320``
(Fetch v11, OffsetsForLeaderEpoch first). Time is a ``FakeClock``; nothing sleeps.
"""

from __future__ import annotations

import asyncio
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import attrs
import pytest
from hypothesis import given, settings

from pykraft.fetcher.fetcher_config import FetcherConfig, FetcherConfigError, PartitionStart
from pykraft.fetcher.follower_log import ReplicaLog
from pykraft.fetcher.leader_codecs import LeaderFeatures
from pykraft.fetcher.replica_fetcher import ReplicaFetcher
from pykraft.fetcher.responses import FailureReason
from pykraft.fetcher.state import FetchState
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.topic_partition import TopicPartition
from tests.fake_clock import FakeClock
from tests.fetcher.fake_leader import (
    MODERN,
    PRE_KIP_320,
    FailingLog,
    FakeLeaderEndpoint,
    batch,
    leader_of,
    open_log,
    records_of,
)
from tests.fetcher.harness import MockLeader, MockLog
from tests.fetcher.test_random_histories import History, common_prefix, histories, leader_log

BACKOFF_MS = 1000
T0, T1 = TopicPartition("t", 0), TopicPartition("t", 1)
PATHS = [pytest.param(MODERN, id="diverging_epoch"), pytest.param(PRE_KIP_320, id="epoch_query")]
both_paths = pytest.mark.parametrize("features", PATHS)


@dataclass
class Rig:
    fetcher: ReplicaFetcher
    endpoint: FakeLeaderEndpoint
    logs: dict[TopicPartition, Any]
    clock: FakeClock
    failed: list[tuple[TopicPartition, FailureReason]] = field(default_factory=list)
    # What the fetcher reported as ReplicationBytesIn, one entry per append.
    bytes_in: list[int] = field(default_factory=list)

    def log(self, topic_partition: TopicPartition = T0) -> PartitionLog:
        log = self.logs[topic_partition]
        return cast(PartitionLog, log.log if isinstance(log, FailingLog) else log)

    def state(self, topic_partition: TopicPartition = T0) -> FetchState | None:
        state = self.fetcher.partition_states.get(topic_partition)
        return None if state is None else state.state

    def add(self, epoch: int, *partitions: TopicPartition) -> None:
        self.fetcher.add_partitions({tp: PartitionStart(None, epoch) for tp in partitions or (T0,)})

    async def rounds(self, count: int) -> None:
        for _ in range(count):
            await self.fetcher.do_work()
            self.clock.now_ms += BACKOFF_MS

    async def until_in_sync(self, max_rounds: int = 30) -> int:
        for done in range(1, max_rounds + 1):
            await self.rounds(1)
            if all(
                records_of(self.log(tp)) == leader.log.records
                for tp, leader in self.endpoint.leaders.items()
            ):
                return done
        raise AssertionError(f"not in sync after {max_rounds} rounds")


def rig(
    tmp_path: Path,
    leaders: dict[TopicPartition, MockLeader],
    followers: dict[TopicPartition, list[int]],
    *,
    epoch: int,
    hw: int = 0,
    features: LeaderFeatures = MODERN,
    failing: bool = False,
) -> Rig:
    clock = FakeClock()
    endpoint = FakeLeaderEndpoint(1, leaders, features)
    logs: dict[TopicPartition, Any] = {}
    for tp, epochs in followers.items():
        log = open_log(tmp_path / tp.dir_name(), epochs, high_watermark=hw)
        logs[tp] = FailingLog(log) if failing else log
    failed: list[tuple[TopicPartition, FailureReason]] = []
    bytes_in: list[int] = []
    fetcher = ReplicaFetcher(
        0,
        endpoint,
        lambda tp: cast(ReplicaLog | None, logs.get(tp)),
        FetcherConfig(replica_id=2, fetch_backoff_ms=BACKOFF_MS),
        on_partition_failed=lambda tp, reason: failed.append((tp, reason)),
        clock=clock,
        on_replication_bytes_in=bytes_in.append,
    )
    result = Rig(fetcher, endpoint, logs, clock, failed, bytes_in)
    result.add(epoch, *followers)
    return result


@both_paths
def test_replicates_a_log_from_scratch(tmp_path: Path, features: LeaderFeatures) -> None:
    # AFTT testSimpleFetch, over several epochs and rounds; the follower's high watermark
    # follows the leader's (clamped to what it holds) and its epoch cache matches the leader's.
    leader = leader_of([0, 0, 1, 1, 1, 3], 3, hw=4, max_records=2)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=3, features=features)
    asyncio.run(r.until_in_sync())
    log = r.log()
    assert records_of(log) == leader.log.records
    assert (log.log_end_offset, log.high_watermark) == (6, 4)
    assert log.leader_epoch_cache.entries == leader.log.entries
    assert r.state() is FetchState.FETCHING
    assert r.fetcher.partition_states[T0].last_fetched_epoch == 3
    # ReplicaFetcherThread.processPartitionData: ReplicationBytesIn counts every appended batch
    # once; answers without records count nothing.
    epochs = [0, 0, 1, 1, 1, 3]
    assert sum(r.bytes_in) == sum(len(batch(o, e)) for o, e in enumerate(epochs))
    assert 0 not in r.bytes_in


@both_paths
def test_truncates_interleaved_epochs(tmp_path: Path, features: LeaderFeatures) -> None:
    # AFTT testTruncation (DESIGN.md §5): follower epochs 0,2,4 against leader 1,3,5 — cut one
    # epoch per round trip (KIP-279), then copy the leader's records.
    leader = leader_of([1, 3, 5], 5, hw=2)
    r = rig(tmp_path, {T0: leader}, {T0: [0, 2, 4]}, epoch=5, features=features)
    asyncio.run(r.until_in_sync())
    assert records_of(r.log()) == [(0, 1), (1, 3), (2, 5)]
    assert (r.log().log_end_offset, r.log().high_watermark) == (3, 2)
    queried = "OffsetForLeaderEpoch" in r.endpoint.requests
    assert queried is (features is PRE_KIP_320)


@both_paths
def test_truncating_answer_never_advances_the_high_watermark(
    tmp_path: Path, features: LeaderFeatures
) -> None:
    # RFTT testTruncateOnFetchDoesNotUpdateHighWatermark: leader HW 4, ours 1, divergence at 3.
    leader = leader_of([0, 0, 2, 5, 5], 5, hw=4)
    r = rig(tmp_path, {T0: leader}, {T0: [0, 0, 2, 4, 4, 4]}, epoch=5, hw=1, features=features)
    asyncio.run(r.rounds(1))
    log = r.log()
    if features is MODERN:
        # The whole round was the DivergingEpoch answer: cut to 3, high watermark untouched.
        assert (log.log_end_offset, log.high_watermark) == (3, 1)
    else:
        # OffsetsForLeaderEpoch cut to 3 (no high watermark in that answer); the fetch in the
        # same round then appended offset 3 and brought the leader's high watermark.
        assert (log.log_end_offset, log.high_watermark) == (4, 4)
    asyncio.run(r.until_in_sync())
    assert (log.log_end_offset, log.high_watermark) == (5, 4)


@both_paths
def test_out_of_range_high_truncates_to_the_leader_end(
    tmp_path: Path, features: LeaderFeatures
) -> None:
    # AFTT testFollowerFetchOutOfRangeHigh: the leader's log shrank below ours (unclean
    # election); ListOffsets tells us its end and we truncate to it.
    leader = leader_of([0, 2, 4], 4, hw=2)
    r = rig(tmp_path, {T0: leader}, {T0: [0, 2, 4]}, epoch=4, features=features)
    asyncio.run(r.rounds(1))
    leader.log = MockLog([])
    asyncio.run(r.rounds(1))
    log = r.log()
    assert "ListOffsets" in r.endpoint.requests
    assert (log.log_end_offset, log.log_start_offset, log.high_watermark) == (0, 0, 0)
    assert r.state() is FetchState.FETCHING


@both_paths
def test_out_of_range_low_restarts_at_the_leader_start(
    tmp_path: Path, features: LeaderFeatures
) -> None:
    # AFTT testFollowerFetchOutOfRangeLow: the leader deleted everything we have.
    leader = MockLeader(MockLog.of([4], start=2, high_watermark=2), 4)
    r = rig(tmp_path, {T0: leader}, {T0: [0]}, epoch=4, features=features)
    asyncio.run(r.until_in_sync())
    log = r.log()
    assert (log.log_start_offset, log.log_end_offset, log.high_watermark) == (2, 3, 2)
    assert records_of(log) == [(2, 4)]


@both_paths
def test_a_failed_partition_is_isolated(tmp_path: Path, features: LeaderFeatures) -> None:
    # AFTT testFetcherThreadHandlingPartitionFailureDuringAppending: a dead disk under one
    # partition removes that partition; the other keeps replicating in the same fetcher.
    leaders = {T0: leader_of([0, 0, 0], 0, hw=3), T1: leader_of([0, 0, 0], 0, hw=3)}
    r = rig(tmp_path, leaders, {T0: [], T1: []}, epoch=0, features=features, failing=True)
    r.logs[T0].failing = frozenset({"append_as_follower"})
    asyncio.run(r.rounds(5))
    assert r.failed == [(T0, FailureReason.STORAGE_ERROR)]
    assert T0 not in r.fetcher.partition_states
    assert records_of(r.log(T1)) == [(0, 0), (1, 0), (2, 0)]
    # A leader change adds it back; with the disk replaced it catches up.
    r.logs[T0].failing = frozenset()
    r.add(0, T0)
    asyncio.run(r.until_in_sync())
    assert records_of(r.log(T0)) == [(0, 0), (1, 0), (2, 0)]


def test_corrupt_data_backs_off_and_is_retried(tmp_path: Path) -> None:
    # AFTT testCorruptMessage: a CRC failure is not fatal; the next fetch succeeds.
    leader = leader_of([0, 0], 0, hw=2, max_records=2, corrupt_next_fetch=True)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=0)
    asyncio.run(r.fetcher.do_work())
    assert (r.log().log_end_offset, r.state()) == (0, FetchState.DELAYED)
    asyncio.run(r.fetcher.do_work())  # still backing off: no request
    assert r.endpoint.requests.count("Fetch") == 1
    r.clock.now_ms += BACKOFF_MS
    asyncio.run(r.fetcher.do_work())
    assert r.log().log_end_offset == 2


def test_a_failed_request_backs_off_every_partition_in_it(tmp_path: Path) -> None:
    # A lost connection fails the whole request: every partition waits replica.fetch.backoff.ms
    # and then resumes where it was.
    leaders = {T0: leader_of([0], 0, hw=1), T1: leader_of([0], 0, hw=1)}
    r = rig(tmp_path, leaders, {T0: [], T1: []}, epoch=0)
    r.endpoint.failures = 2  # the leader is unreachable for two attempts
    asyncio.run(r.fetcher.do_work())
    assert (r.state(T0), r.state(T1)) == (FetchState.DELAYED, FetchState.DELAYED)
    deadline = r.fetcher.partition_states[T0].delay_deadline_ms
    assert deadline == BACKOFF_MS
    r.clock.now_ms = BACKOFF_MS
    asyncio.run(r.fetcher.do_work())  # the second failure
    r.clock.now_ms += BACKOFF_MS
    asyncio.run(r.fetcher.do_work())
    assert records_of(r.log(T0)) == records_of(r.log(T1)) == [(0, 0)]


def test_fenced_leader_epoch_removes_the_partition(tmp_path: Path) -> None:
    # AFTT testFencedFetch: the leader moved to a newer epoch; wait for metadata to re-add us.
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=0)
    asyncio.run(r.rounds(1))
    leader.leader_epoch = 1
    asyncio.run(r.rounds(1))
    assert r.failed == [(T0, FailureReason.FENCED_LEADER_EPOCH)]
    assert r.fetcher.partition_count == 0


def test_unknown_leader_epoch_backs_off_until_the_leader_catches_up(tmp_path: Path) -> None:
    # AFTT testUnknownLeaderEpochInTruncation: we know epoch 1, the leader still says 0.
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    r = rig(tmp_path, {T0: leader}, {T0: [0]}, epoch=1)
    asyncio.run(r.fetcher.do_work())
    assert (r.state(), r.log().log_end_offset) == (FetchState.DELAYED, 1)
    leader.leader_epoch = 1
    leader.log.become_leader(1)
    r.clock.now_ms += BACKOFF_MS
    asyncio.run(r.fetcher.do_work())
    assert r.log().log_end_offset == 2


def test_an_answer_for_a_removed_partition_is_dropped(tmp_path: Path) -> None:
    # The broker took the partition away (it became leader) while the fetch was in flight:
    # the answer must not touch the log (Kafka re-checks the state under its lock).
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=0)

    def become_leader() -> None:
        r.fetcher.remove_partitions([T0])

    r.endpoint.during_fetch = become_leader
    asyncio.run(r.fetcher.do_work())
    assert r.log().log_end_offset == 0 and r.fetcher.partition_count == 0


def test_an_answer_for_an_older_epoch_is_dropped(tmp_path: Path) -> None:
    # Removed and re-added under a new epoch mid-request: the old answer is stale.
    leader = leader_of([0, 0], 0, hw=2, max_records=2)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=0)

    def re_add() -> None:
        r.fetcher.remove_partitions([T0])
        r.add(1)

    r.endpoint.during_fetch = re_add
    asyncio.run(r.fetcher.do_work())
    assert r.log().log_end_offset == 0
    assert r.fetcher.partition_states[T0].current_leader_epoch == 1


def test_follows_the_leader_log_start_offset(tmp_path: Path) -> None:
    # Kafka processPartitionData: maybeIncrementLogStartOffset(leader's log start) — never
    # past the follower's high watermark.
    leader = leader_of([0, 0, 0, 0], 0, hw=4, max_records=4)
    r = rig(tmp_path, {T0: leader}, {T0: []}, epoch=0)
    asyncio.run(r.rounds(1))
    leader.log.log_start_offset = 3  # DeleteRecords on the leader
    leader.log.records = leader.log.records[3:]
    asyncio.run(r.rounds(1))
    assert (r.log().log_start_offset, r.log().high_watermark) == (3, 4)


def test_restarts_an_empty_log_at_a_batch_straddling_the_leader_start(tmp_path: Path) -> None:
    # Kafka Partition.appendRecordsToFollowerOrFutureReplica: the leader's log start (5) lies
    # inside its first batch (3-7) after DeleteRecords; our empty log restarts at 3, takes the
    # batch whole, then moves its log start up to the leader's.
    data = build_batch([SimpleRecord(value=b"v")] * 5, base_offset=3, partition_leader_epoch=0)
    r = rig(tmp_path, {}, {T0: []}, epoch=0)
    r.fetcher.remove_partitions([T0])
    r.log().truncate_fully_and_start_at(5)
    r.add(0)

    async def answer(request: Any) -> dict[TopicPartition, PartitionData]:
        return {T0: PartitionData(0, high_watermark=8, log_start_offset=5, records=(data,))}

    r.endpoint.fetch = answer  # type: ignore[method-assign]
    asyncio.run(r.fetcher.do_work())
    assert (r.log().log_start_offset, r.log().log_end_offset) == (5, 8)
    assert r.log().segments[0].base_offset == 3
    assert r.fetcher.partition_states[T0].fetch_offset == 8


def test_a_leader_without_diverging_epoch_restarts_the_states(tmp_path: Path) -> None:
    # Added while DivergingEpoch was assumed (FETCHING from the log end with an epoch); the
    # leader turns out to speak Fetch v11: the partition restarts TRUNCATING from its high
    # watermark and asks OffsetsForLeaderEpoch (KIP-101).
    leader = leader_of([0, 2, 5], 5, hw=2)
    r = rig(tmp_path, {T0: leader}, {T0: [0, 2, 4]}, epoch=5, features=PRE_KIP_320)
    assert r.fetcher.partition_states[T0].state is FetchState.FETCHING
    asyncio.run(r.fetcher.do_work())
    assert r.endpoint.requests[:2] == ["ApiVersions", "OffsetForLeaderEpoch"]
    asyncio.run(r.until_in_sync())
    assert records_of(r.log()) == [(0, 0), (1, 2), (2, 5)]


def test_the_request_carries_kafkas_replica_fetch_settings(tmp_path: Path) -> None:
    # ReplicaFetcherThread.buildFetch: replica.fetch.{wait.max.ms, min.bytes, max.bytes,
    # response.max.bytes}, current_leader_epoch, last_fetched_epoch and log_start_offset.
    leader = leader_of([0, 3], 3, hw=0)
    r = rig(tmp_path, {T0: leader}, {T0: [0, 3]}, epoch=3)
    asyncio.run(r.fetcher.do_work())
    request = r.endpoint.fetched[0]
    assert (request.max_wait_ms, request.min_bytes, request.max_bytes) == (500, 1, 10_485_760)
    partition = request.targets[0].partition
    assert attrs.astuple(partition) == (0, 2, 1_048_576, 3, 3, 0)


def test_config_rejects_what_kafka_rejects() -> None:
    with pytest.raises(FetcherConfigError, match=r"num\.replica\.fetchers"):
        FetcherConfig(replica_id=1, num_replica_fetchers=0)
    with pytest.raises(FetcherConfigError, match=r"replica\.socket\.timeout\.ms"):
        FetcherConfig(replica_id=1, fetch_wait_max_ms=600, socket_timeout_ms=500)


class RecordingLog:
    """A real log that remembers every offset it was truncated to."""

    def __init__(self, log: PartitionLog) -> None:
        self.log = log
        self.truncated_to: list[int] = []

    def truncate_to(self, offset: int) -> bool:
        self.truncated_to.append(offset)
        return self.log.truncate_to(offset)

    def truncate_fully_and_start_at(self, offset: int, now_ms: int | None = None) -> None:
        self.truncated_to.append(offset)
        self.log.truncate_fully_and_start_at(offset, now_ms)

    def __getattr__(self, name: str) -> object:
        return getattr(self.log, name)


@pytest.mark.parametrize("features", PATHS)
@settings(max_examples=60, deadline=None)
@given(history=histories())
def test_a_real_log_converges_to_any_leader(features: LeaderFeatures, history: History) -> None:
    # tests/fetcher/test_random_histories.py's leadership histories, through the asyncio shell
    # into a real PartitionLog: the follower reaches the leader's log exactly and never cuts
    # below what the two logs agreed on.
    leader_records, epoch, follower_records, high_watermark = history
    leader = MockLeader(leader_log(leader_records, epoch), epoch, max_records=3)
    with tempfile.TemporaryDirectory() as directory:
        log = RecordingLog(
            open_log(Path(directory), [e for _, e in follower_records], high_watermark)
        )
        clock = FakeClock()
        fetcher = ReplicaFetcher(
            0,
            FakeLeaderEndpoint(1, {T0: leader}, features),
            lambda tp: cast(ReplicaLog, log),
            FetcherConfig(replica_id=2),
            clock=clock,
        )
        fetcher.add_partitions({T0: PartitionStart(None, epoch)})

        async def converge() -> None:
            for _ in range(60):
                await fetcher.do_work()
                clock.now_ms += BACKOFF_MS
                if records_of(log.log) == leader_records:
                    return
            raise AssertionError(f"not in sync: {records_of(log.log)} vs {leader_records}")

        asyncio.run(converge())
        agreed = common_prefix(follower_records, leader_records)
        assert all(offset >= agreed for offset in log.truncated_to), log.truncated_to
        assert fetcher.partition_count == 1
        log.log.close()


def test_the_follower_throttle_leaves_lagging_throttled_partitions_out(tmp_path: Path) -> None:
    # KIP-73, Kafka's ReplicaFetcherThread.shouldFollowerThrottle / processPartitionData: a
    # throttled partition not caught up is left out of the Fetch while the follower quota is
    # exceeded, and its fetched bytes are recorded; an unthrottled partition keeps going, and
    # a round that sends nothing waits (up to replica.fetch.backoff.ms) instead of spinning.
    from pykraft.fetcher.replication_quota import ReplicationQuota, ThrottleSettings

    slow = leader_of([0] * 8, 0, hw=8, max_records=2)
    free = leader_of([0] * 8, 0, hw=8, max_records=2)
    r = rig(tmp_path, {T0: slow, T1: free}, {T0: [], T1: []}, epoch=0)
    quota = ReplicationQuota(window_num=2, window_size_ms=1000)
    quota.update(ThrottleSettings(rate=10, topics={"t": frozenset({0})}))
    r.fetcher.quota = quota

    async def one_round() -> list[set[TopicPartition]]:
        before = len(r.endpoint.fetched)
        await r.fetcher.do_work()
        return [{t.topic_partition for t in f.targets} for f in r.endpoint.fetched[before:]]

    async def scenario() -> None:
        assert await one_round() == [{T0, T1}]
        assert quota.rate(r.clock.now_ms) > 10  # T0's two records were recorded
        assert await one_round() == [{T1}]  # T0 held back; T1 goes on
        while r.log(T1).log_end_offset < 8:
            await one_round()
        r.fetcher.remove_partitions([T1])
        r.fetcher._wakeup.clear()  # as ``run`` does before each round
        start = r.clock.now_ms
        assert await one_round() == []  # nothing to send: it waited instead of spinning
        assert 0 < r.clock.now_ms - start <= BACKOFF_MS
        while r.log(T0).log_end_offset < 8:
            await one_round()
            r.clock.now_ms += 1000

    asyncio.run(scenario())
    assert records_of(r.log(T0)) == slow.log.records
