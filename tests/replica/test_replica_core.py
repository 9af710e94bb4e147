"""ReplicaCore: a metadata change becomes its steps in Kafka's ``applyDelta`` order, the fetcher
hand-off starts at the log end, and ``tick`` / ``next_deadline_ms`` schedule the isr-expiration
task (every replica.lag.time.max.ms / 2) and the waiters' deadlines — no clock, no I/O."""

from __future__ import annotations

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges, local_changes
from pykraft.metadata.records import (
    NO_LEADER,
    MetadataRecord,
    PartitionChangeRecord,
    RemoveTopicRecord,
    TopicRecord,
)
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import InitialFetchState
from pykraft.replica.partition_core import LogView
from pykraft.replica.partition_state import FetchIsolation, LeaderAndIsr
from pykraft.replica.replica_core import PartitionTransition, ReplicaCore, TickReady
from pykraft.storage.topic_partition import TopicPartition
from tests.broker.replica_harness import (
    LOCAL,
    OTHER,
    PETS0,
    PETS1,
    PETS_ID,
    broker,
    endpoint,
    partition_record,
    replay,
)

LAG_MS = 30_000
START_MS = 50_000


def no_views(topic_partition: TopicPartition) -> LogView:
    raise AssertionError(f"no partition is led, yet {topic_partition}'s log was asked for")


def view_at(now_ms: int, log_end_offset: int = 10) -> LogView:
    return LogView(log_end_offset=log_end_offset, high_watermark=0, now_ms=now_ms)


class Metadata:
    """The image as the loader builds it, and the local changes of each step."""

    def __init__(self) -> None:
        self.image = MetadataImage.EMPTY

    def publish(self, *records: MetadataRecord) -> LocalReplicaChanges:
        delta = replay(self.image, records)
        self.image = delta.apply()
        return local_changes(delta, LOCAL)


def pets(leader0: int, leader1: int) -> tuple[MetadataRecord, ...]:
    return (
        TopicRecord(name="pets", topic_id=PETS_ID),
        partition_record(PETS_ID, 0, (leader0, 3 - leader0), leader=leader0),
        partition_record(PETS_ID, 1, (leader1, 3 - leader1), leader=leader1),
    )


def registered(leader: int, follower: int) -> LeaderAndIsr:
    return LeaderAndIsr(
        leader=leader,
        leader_epoch=0,
        partition_epoch=0,
        replicas=(leader, follower),
        isr=(leader, follower),
    )


def test_leaders_and_followers_come_sorted_with_their_leader_and_isr() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    changes = metadata.publish(broker(LOCAL), broker(OTHER), *pets(LOCAL, OTHER))
    ready = core.apply_metadata(changes, metadata.image, hosted={})
    assert ready.deletes == ()
    assert ready.leaders == (PartitionTransition(PETS0, PETS_ID, registered(LOCAL, OTHER)),)
    assert ready.followers == (
        PartitionTransition(
            PETS1, PETS_ID, registered(OTHER, LOCAL), leader_endpoint=endpoint(OTHER)
        ),
    )
    assert core.image is metadata.image


def test_a_deleted_topic_is_a_delete_step() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    metadata.publish(broker(LOCAL), broker(OTHER), *pets(LOCAL, OTHER))
    changes = metadata.publish(RemoveTopicRecord(topic_id=PETS_ID))
    ready = core.apply_metadata(changes, metadata.image, hosted={PETS0: PETS_ID, PETS1: PETS_ID})
    assert ready.deletes == (PETS0, PETS1)
    assert ready.leaders == ready.followers == ()


def test_a_hosted_partition_of_another_topic_id_replaces_its_log() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    changes = metadata.publish(broker(LOCAL), broker(OTHER), *pets(LOCAL, OTHER))
    ready = core.apply_metadata(changes, metadata.image, hosted={PETS0: "old-id", PETS1: PETS_ID})
    assert [leader.replaces_log for leader in ready.leaders] == [True]
    assert [follower.replaces_log for follower in ready.followers] == [False]


def test_a_follower_without_a_leader_has_no_endpoint_and_is_only_removed_from_fetching() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    metadata.publish(broker(LOCAL), broker(OTHER), *pets(OTHER, OTHER))
    changes = metadata.publish(
        PartitionChangeRecord(topic_id=PETS_ID, partition_id=0, leader=NO_LEADER)
    )
    [follower] = core.apply_metadata(changes, metadata.image, hosted={}).followers
    assert follower.leader_endpoint is None
    handoff = core.fetcher_handoff([(follower, 7)])
    assert handoff.removals == (PETS0,) and dict(handoff.additions) == {}


def test_the_fetcher_hand_off_starts_at_the_log_end_with_the_new_epoch() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    changes = metadata.publish(broker(LOCAL), broker(OTHER), *pets(LOCAL, OTHER))
    [follower] = core.apply_metadata(changes, metadata.image, hosted={}).followers
    handoff = core.fetcher_handoff([(follower, 42)])
    assert handoff.removals == (PETS1,)
    assert dict(handoff.additions) == {
        PETS1: InitialFetchState(
            topic_id=PETS_ID,
            leader_id=OTHER,
            leader_endpoint=endpoint(OTHER),
            current_leader_epoch=0,
            init_offset=42,
        )
    }


def test_the_isr_expiration_is_due_every_half_replica_lag_time() -> None:
    core = ReplicaCore(LOCAL, now_ms=START_MS, replica_lag_time_max_ms=LAG_MS)
    assert core.next_deadline_ms() == START_MS + LAG_MS // 2
    assert core.tick(START_MS + LAG_MS // 2 - 1, no_views) == TickReady()
    assert core.tick(START_MS + LAG_MS // 2, no_views).shrink_isr
    assert core.next_deadline_ms() == START_MS + LAG_MS
    # A late tick (a paused process) schedules the next run an interval after it ran.
    assert core.tick(START_MS + LAG_MS + 100, no_views).shrink_isr
    assert core.next_deadline_ms() == START_MS + LAG_MS + 100 + LAG_MS // 2
    assert not core.tick(START_MS + LAG_MS + 101, no_views).shrink_isr


def test_waiters_expire_at_their_deadlines_which_lead_the_next_deadline() -> None:
    core = ReplicaCore(LOCAL, now_ms=START_MS, replica_lag_time_max_ms=LAG_MS)
    fetch = core.fetch_waiters.try_watch(
        [PETS0],
        min_bytes=1,
        accumulated_bytes=0,
        deadline_ms=START_MS + 500,
        isolation=FetchIsolation.HIGH_WATERMARK,
    )
    produce = core.produce_waiters.try_watch({PETS1: 3}, START_MS + 700)
    assert fetch is not None and produce is not None
    assert core.next_deadline_ms() == START_MS + 500
    assert core.tick(START_MS + 499, no_views).is_empty
    assert core.tick(START_MS + 500, no_views) == TickReady(expired_fetches=(fetch,))
    assert core.next_deadline_ms() == START_MS + 700
    assert core.tick(START_MS + 700, no_views) == TickReady(
        expired_produces={produce: {PETS1: Errors.REQUEST_TIMED_OUT}}
    )
    assert core.next_deadline_ms() == START_MS + LAG_MS // 2
    assert len(core.fetch_waiters) == len(core.produce_waiters) == 0


def test_leaders_never_carry_an_endpoint() -> None:
    metadata, core = Metadata(), ReplicaCore(LOCAL, now_ms=START_MS)
    changes = metadata.publish(broker(LOCAL), broker(OTHER), *pets(LOCAL, LOCAL))
    ready = core.apply_metadata(changes, metadata.image, hosted={})
    assert [leader.topic_partition for leader in ready.leaders] == [PETS0, PETS1]
    assert all(leader.leader_endpoint is None for leader in ready.leaders)
    assert TopicPartition("pets", 2) not in {leader.topic_partition for leader in ready.leaders}


def test_the_high_watermark_checkpoint_is_due_at_start_up_then_every_interval() -> None:
    core = ReplicaCore(
        LOCAL,
        now_ms=START_MS,
        replica_lag_time_max_ms=LAG_MS,
        high_watermark_checkpoint_interval_ms=5_000,
    )
    assert core.next_deadline_ms() == START_MS
    assert core.tick(START_MS, no_views) == TickReady(checkpoint_high_watermarks=True)
    assert core.next_deadline_ms() == START_MS + 5_000
    assert core.tick(START_MS + 4_999, no_views).is_empty
    assert core.tick(START_MS + 5_000, no_views) == TickReady(checkpoint_high_watermarks=True)
    # Without an interval the core never asks for one.
    unscheduled = ReplicaCore(LOCAL, now_ms=START_MS, replica_lag_time_max_ms=LAG_MS)
    assert not unscheduled.tick(START_MS + 10 * LAG_MS, no_views).checkpoint_high_watermarks


def test_one_core_per_hosted_partition_and_a_fresh_one_after_forgetting() -> None:
    core = ReplicaCore(LOCAL, now_ms=START_MS, replica_lag_time_max_ms=LAG_MS)
    pets0 = core.host(PETS0)
    assert core.host(PETS0) is pets0 and set(core.partitions) == {PETS0}
    assert pets0.replica_lag_time_max_ms == LAG_MS and pets0.local_broker_id == LOCAL
    core.forget(PETS0)
    assert core.partitions == {}
    assert core.host(PETS0) is not pets0


def test_the_isr_expiration_asks_each_led_partition_and_answers_the_shrinks() -> None:
    """Kafka's isr-expiration task (``maybeShrinkIsr`` of every partition), from ``tick``: a
    follower that never fetched drops out after replica.lag.time.max.ms; the core asks for the
    log of led partitions only, and a partition with nothing to drop has no Ready."""
    core = ReplicaCore(LOCAL, now_ms=START_MS, replica_lag_time_max_ms=LAG_MS)
    led = LeaderAndIsr(
        leader=LOCAL, leader_epoch=1, partition_epoch=1, replicas=(LOCAL, OTHER), isr=(LOCAL, OTHER)
    )
    alone = LeaderAndIsr(
        leader=LOCAL, leader_epoch=1, partition_epoch=1, replicas=(LOCAL,), isr=(LOCAL,)
    )
    followed = LeaderAndIsr(
        leader=OTHER, leader_epoch=1, partition_epoch=1, replicas=(LOCAL, OTHER), isr=(LOCAL, OTHER)
    )
    pets2 = TopicPartition("pets", 2)
    for topic_partition, change in ((PETS0, led), (PETS1, alone)):
        partition = core.host(topic_partition)
        ready = partition.make_leader(change, view_at(START_MS))
        assert ready is not None
        partition.advance(ready)
    follower = core.host(pets2)
    ready = follower.make_follower(followed)
    assert ready is not None
    follower.advance(ready)
    asked: list[TopicPartition] = []

    def view_of(topic_partition: TopicPartition) -> LogView:
        asked.append(topic_partition)
        return view_at(START_MS + LAG_MS + 1)

    assert core.tick(START_MS + LAG_MS // 2 - 1, view_of).isr_shrinks == ()
    assert asked == []  # not due: no log is sampled
    tick = core.tick(START_MS + LAG_MS + 1, view_of)
    assert tick.shrink_isr and asked == [PETS0, PETS1]
    [(topic_partition, shrink)] = tick.isr_shrinks
    assert topic_partition == PETS0 and shrink.alter_partition is not None
    assert shrink.alter_partition.new_isr_ids == (LOCAL,)
    assert core.partitions[PETS0].state is shrink.base  # nothing changes until the shell advances
