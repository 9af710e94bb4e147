"""Every partition a broker hosts, as one synchronous, clock-free core (the replica-wide half of
Kafka's ``ReplicaManager``; each partition's own decisions are ``replica.partition_core``).

Theory of operation
-------------------
Modelled on etcd-io/raft's ``RawNode``: inputs come in with the time, a ``Ready``-like value
comes out, and the shell (``broker.replica_manager.ReplicaManager``) carries it out in the one
order written here, then asks ``next_deadline_ms`` when to call ``tick`` again (one timer, as
``coordinator.group.shell`` keeps one for ``GroupManager.next_deadline_ms``).

Metadata: ``apply_metadata(changes, image, hosted)`` turns ``local_changes(delta, broker_id)``
into a ``MetadataReady`` in Kafka's order (``ReplicaManager.applyDelta``), which the shell
carries out step by step:

1. ``deletes``: remove their fetchers, stop the partitions (their waiters answer), delete their
   logs;
2. ``leaders``: remove their fetchers, open or create each log (a ``replaces_log`` transition
   deletes the old log first: the topic was deleted and re-created under the same name while
   this broker was away), then ``make_leader`` (persist the epoch, apply, answer);
3. ``followers``: open or create each log, ``make_follower``; the partitions whose leader epoch
   moved go to ``fetcher_handoff`` with their log end offsets, whose answer is carried out last:
   remove their old fetchers (one may fetch with a fenced epoch), then add the new ones starting
   at the log end (Kafka's ``InitialFetchState``; without a leader nobody is fetched from).

Partitions: the core holds one ``replica.partition_core.PartitionCore`` for every partition it
hosts (``host`` when a transition opens one, ``forget`` when it is deleted or its log dir
fails). Each partition's own inputs come in here with the ``LogView`` its shell
(``broker.partition.Partition``) sampled — ``append``, ``on_fetch`` (a follower's fetch),
``on_alter_partition_result``, ``shrink_isr`` — and go out as that partition's ``Ready``, which
the shell carries out in the one order of ``replica.ready``.

Time: ``tick(now_ms)`` (monotonic milliseconds, passed in) says what is due, carried out in this
order: the high-watermark checkpoint (persist; Kafka's ``highwatermark-checkpoint`` task of
``ReplicaManager``, every ``replica.high.watermark.checkpoint.interval.ms`` from start-up on),
the ISR expiration (Kafka's isr-expiration task: every ``replica.lag.time.max.ms`` / 2 every led
partition drops followers that stayed behind: one ``Ready`` per partition that proposes a
shrink, from the ``LogView`` the shell's ``view_of`` samples for it), then the waiting fetches,
acks=all produces and DeleteRecords whose deadline passed answer (``replica.fetch_waiters``,
``replica.produce_waiters``, ``replica.delete_records_waiters``, held here so one deadline
covers them all). ``next_deadline_ms``
is the earliest of those deadlines.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import NamedTuple

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges, PartitionInfo
from pykraft.metadata.records import NO_LEADER, BrokerEndpoint
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import InitialFetchState
from pykraft.replica.delete_records_waiters import DeleteRecordsPurgatory, DeleteRecordsResult
from pykraft.replica.fetch_waiters import FetchPurgatory
from pykraft.replica.isr import AlterPartitionOutcome, AlterPartitionResult, PendingIsrChange
from pykraft.replica.partition_core import REPLICA_LAG_TIME_MAX_MS, LogView, PartitionCore
from pykraft.replica.partition_state import LeaderAndIsr, PartitionRole
from pykraft.replica.produce_waiters import ProducePurgatory
from pykraft.replica.ready import Ready
from pykraft.storage.topic_partition import TopicPartition


class PartitionTransition(NamedTuple):
    """One partition to lead or follow, as the new image has it."""

    topic_partition: TopicPartition
    topic_id: str
    leader_and_isr: LeaderAndIsr
    # The hosted partition belongs to another topic id: delete its log before opening one.
    replaces_log: bool = False
    # Followers: the leader's inter-broker endpoint (None: no leader, or not in the image).
    leader_endpoint: BrokerEndpoint | None = None


class MetadataReady(NamedTuple):
    """What one metadata change calls for, in the order it is carried out (module docstring)."""

    deletes: tuple[TopicPartition, ...] = ()
    leaders: tuple[PartitionTransition, ...] = ()
    followers: tuple[PartitionTransition, ...] = ()


class FetcherHandoff(NamedTuple):
    """The fetcher changes after followers moved: removals first, then additions."""

    removals: tuple[TopicPartition, ...] = ()
    additions: Mapping[TopicPartition, InitialFetchState] = {}


# The shell's sample of a hosted partition's log for one input (``Partition.log_view``).
ViewOf = Callable[[TopicPartition], LogView]


class TickReady(NamedTuple):
    """What is due at one ``tick``, in the order the shell carries it out."""

    # 1. persist: write every hosted partition's high watermark to its log dir's checkpoint.
    checkpoint_high_watermarks: bool = False
    # 2. apply: the ISR expiration ran; each led partition that drops followers has its Ready
    # (a shrink to propose), carried out by its shell in order.
    shrink_isr: bool = False
    isr_shrinks: tuple[tuple[TopicPartition, Ready], ...] = ()
    # 3. answer: waiting fetches whose deadline passed (removed from the purgatory).
    expired_fetches: tuple[int, ...] = ()
    # 3. answer: waiting produces whose deadline passed (removed), with their errors.
    expired_produces: Mapping[int, Mapping[TopicPartition, Errors]] = {}
    # 3. answer: waiting DeleteRecords whose deadline passed (removed), with their results.
    expired_delete_records: Mapping[int, Mapping[TopicPartition, DeleteRecordsResult]] = {}

    @property
    def is_empty(self) -> bool:
        return not (
            self.checkpoint_high_watermarks
            or self.shrink_isr
            or self.expired_fetches
            or self.expired_produces
            or self.expired_delete_records
        )


class ReplicaCore:
    def __init__(
        self,
        broker_id: int,
        *,
        now_ms: int,
        replica_lag_time_max_ms: int = REPLICA_LAG_TIME_MAX_MS,
        inter_broker_listener_name: str = "PLAINTEXT",
        high_watermark_checkpoint_interval_ms: int | None = None,
        fetch_waiters: FetchPurgatory | None = None,
        produce_waiters: ProducePurgatory | None = None,
        delete_records_waiters: DeleteRecordsPurgatory | None = None,
    ) -> None:
        assert replica_lag_time_max_ms > 1, "the ISR expiration needs a positive interval"
        self.broker_id = broker_id
        self.inter_broker_listener_name = inter_broker_listener_name
        self.replica_lag_time_max_ms = replica_lag_time_max_ms
        self.isr_expiration_interval_ms = replica_lag_time_max_ms // 2
        # Invariant: exactly the partitions whose shell serves them (hosted, log online).
        self.partitions: dict[TopicPartition, PartitionCore] = {}
        # (``is None``: an empty purgatory is falsy, having a length)
        self.fetch_waiters = FetchPurgatory() if fetch_waiters is None else fetch_waiters
        self.produce_waiters = ProducePurgatory() if produce_waiters is None else produce_waiters
        self.delete_records_waiters = (
            DeleteRecordsPurgatory() if delete_records_waiters is None else delete_records_waiters
        )
        self.image = MetadataImage.EMPTY
        # Invariant: the ISR expiration is always scheduled (Kafka runs it from start-up on).
        self._next_isr_expiration_ms = now_ms + self.isr_expiration_interval_ms
        # None: nobody asked this core to schedule checkpoints. Kafka's first one runs at
        # start-up (``scheduler.schedule("highwatermark-checkpoint", ..., 0L, interval)``).
        assert high_watermark_checkpoint_interval_ms is None or (
            high_watermark_checkpoint_interval_ms > 0
        )
        self.high_watermark_checkpoint_interval_ms = high_watermark_checkpoint_interval_ms
        self._next_checkpoint_ms = None if high_watermark_checkpoint_interval_ms is None else now_ms

    # ------------------------------------------------------------------ metadata

    def apply_metadata(
        self,
        changes: LocalReplicaChanges,
        image: MetadataImage,
        hosted: Mapping[TopicPartition, str],
    ) -> MetadataReady:
        """The steps of one metadata change; ``hosted`` maps each hosted partition to its
        topic id (a different one in the change means the old log goes first)."""
        self.image = image

        def transition(
            topic_partition: TopicPartition, info: PartitionInfo, *, follower: bool
        ) -> PartitionTransition:
            old_topic_id = hosted.get(topic_partition)
            return PartitionTransition(
                topic_partition,
                info.topic_id,
                LeaderAndIsr.from_registration(info.partition),
                replaces_log=old_topic_id is not None and old_topic_id != info.topic_id,
                leader_endpoint=self.leader_endpoint(info.leader) if follower else None,
            )

        leaders, followers = changes.leaders, changes.followers
        return MetadataReady(
            deletes=tuple(sorted(changes.deletes)),
            leaders=tuple(transition(tp, leaders[tp], follower=False) for tp in sorted(leaders)),
            followers=tuple(
                transition(tp, followers[tp], follower=True) for tp in sorted(followers)
            ),
        )

    def host(self, topic_partition: TopicPartition) -> PartitionCore:
        """The core of a partition this broker now hosts (a fresh one the first time)."""
        core = self.partitions.get(topic_partition)
        if core is None:
            core = PartitionCore(topic_partition, self.broker_id, self.replica_lag_time_max_ms)
            self.partitions[topic_partition] = core
        return core

    def forget(self, topic_partition: TopicPartition) -> None:
        """The partition is no longer hosted (deleted, moved away, or its log dir failed): a
        later ``host`` starts from a fresh core, as a re-created log starts afresh."""
        self.partitions.pop(topic_partition, None)

    def leader_endpoint(self, leader_id: int) -> BrokerEndpoint | None:
        if leader_id == NO_LEADER:
            return None
        broker = self.image.cluster.broker(leader_id)
        return None if broker is None else broker.endpoint(self.inter_broker_listener_name)

    def fetcher_handoff(
        self, restarted: Iterable[tuple[PartitionTransition, int]]
    ) -> FetcherHandoff:
        """Followers whose leader epoch moved, with their log end offsets: Kafka restarts the
        fetcher whenever the leader epoch moved, even for the same leader, and fetches from the
        log end; a partition without a leader is only removed."""
        removals, additions = [], {}
        for follower, log_end_offset in restarted:
            removals.append(follower.topic_partition)
            change = follower.leader_and_isr
            if change.leader == NO_LEADER:
                continue
            additions[follower.topic_partition] = InitialFetchState(
                topic_id=follower.topic_id,
                leader_id=change.leader,
                leader_endpoint=follower.leader_endpoint,
                current_leader_epoch=change.leader_epoch,
                init_offset=log_end_offset,
            )
        return FetcherHandoff(tuple(removals), additions)

    # ------------------------------------------------------------------ a partition's inputs

    def _core_of(self, topic_partition: TopicPartition) -> PartitionCore:
        core = self.partitions.get(topic_partition)
        assert core is not None, f"{topic_partition} is not hosted"
        return core

    def append(self, topic_partition: TopicPartition, view: LogView) -> Ready:
        """Records were appended as leader (or the log end moved): the high watermark the ISR
        now allows."""
        return self._core_of(topic_partition).maybe_increment_high_watermark(view)

    def on_fetch(
        self,
        topic_partition: TopicPartition,
        replica_id: int,
        *,
        fetch_offset: int,
        log_start_offset: int,
        leader_end_offset: int,
        broker_epoch: int,
        view: LogView,
    ) -> Ready:
        """A follower's fetch read ``topic_partition`` (Kafka ``updateFollowerFetchState``);
        raises ``PartitionError`` for a fetch from an older broker incarnation."""
        return self._core_of(topic_partition).on_follower_fetch(
            replica_id,
            fetch_offset=fetch_offset,
            log_start_offset=log_start_offset,
            leader_end_offset=leader_end_offset,
            broker_epoch=broker_epoch,
            view=view,
        )

    def on_alter_partition_result(
        self,
        topic_partition: TopicPartition,
        sent: PendingIsrChange,
        result: AlterPartitionResult,
        view: LogView,
    ) -> tuple[Ready, AlterPartitionOutcome]:
        """The controller's answer to the ISR change ``sent`` for ``topic_partition``."""
        return self._core_of(topic_partition).on_alter_partition_result(sent, result, view)

    def shrink_isr(self, topic_partition: TopicPartition, view: LogView) -> Ready:
        """Kafka ``maybeShrinkIsr`` for one partition: drop ISR followers that stayed behind."""
        return self._core_of(topic_partition).maybe_shrink_isr(view)

    def shrink_isrs(self, view_of: ViewOf) -> tuple[tuple[TopicPartition, Ready], ...]:
        """The ISR expiration over every led partition (followers have no ISR to shrink): the
        Ready of each that proposes a shrink, in hosting order."""
        shrinks = []
        for topic_partition, core in self.partitions.items():
            if core.state.role is not PartitionRole.LEADER:
                continue
            ready = core.maybe_shrink_isr(view_of(topic_partition))
            if not ready.is_empty:
                shrinks.append((topic_partition, ready))
        return tuple(shrinks)

    # ------------------------------------------------------------------ time

    def tick(self, now_ms: int, view_of: ViewOf) -> TickReady:
        """What is due at ``now_ms`` (monotonic); the expired waiters leave their purgatories.
        ``view_of`` is asked only for led partitions, and only when the ISR expiration is due."""
        shrink_isr = now_ms >= self._next_isr_expiration_ms
        isr_shrinks: tuple[tuple[TopicPartition, Ready], ...] = ()
        if shrink_isr:
            self._next_isr_expiration_ms = now_ms + self.isr_expiration_interval_ms
            isr_shrinks = self.shrink_isrs(view_of)
        checkpoint = self._next_checkpoint_ms is not None and now_ms >= self._next_checkpoint_ms
        if checkpoint:
            assert self.high_watermark_checkpoint_interval_ms is not None
            self._next_checkpoint_ms = now_ms + self.high_watermark_checkpoint_interval_ms
        return TickReady(
            checkpoint_high_watermarks=checkpoint,
            shrink_isr=shrink_isr,
            isr_shrinks=isr_shrinks,
            expired_fetches=tuple(self.fetch_waiters.expire(now_ms)),
            expired_produces=self.produce_waiters.expire(now_ms),
            expired_delete_records=self.delete_records_waiters.expire(now_ms),
        )

    def next_deadline_ms(self) -> int:
        """When ``tick`` next has something to do (asked at every parked fetch and waiting
        produce: no list, no generator)."""
        deadline: int = self._next_isr_expiration_ms
        for other in (
            self._next_checkpoint_ms,
            self.fetch_waiters.next_deadline_ms(),
            self.produce_waiters.next_deadline_ms(),
            self.delete_records_waiters.next_deadline_ms(),
        ):
            if other is not None and other < deadline:
                deadline = other
        return deadline
