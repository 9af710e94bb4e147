"""Automatic preferred-leader balancing: ``auto.leader.rebalance.enable`` on the controller.

Theory of operation. A partition is *imbalanced* when its leader is not its preferred replica,
the first of its replicas (Kafka's ``PartitionRegistration.hasPreferredLeader``; a leaderless
partition is imbalanced too). After a full restart the first broker to come back leads every
partition it hosts; once the others are back in the ISRs, balancing moves each leadership home.

``maybe_balance_partition_leaders`` is Kafka's ``ReplicationControlManager
.maybeBalancePartitionLeaders``: a PREFERRED election (``partition_change``) on each imbalanced
partition, at most ``max_elections`` records per run. The election moves leadership only to a
preferred replica that is in the ISR and acceptable (registered, unfenced, not shutting down);
otherwise it changes nothing. The response says whether partitions were left for another run.

``LeaderBalanceSchedule`` is when it runs, as Kafka 3.9's ``QuorumController
.maybeScheduleNextBalancePartitionLeaders`` schedules it. Its states (Kafka's
``ImbalanceSchedule``) and transitions:

* DEFERRED (initial) → SCHEDULED, due ``leader.imbalance.check.interval.seconds`` after a write;
* IMMEDIATELY → SCHEDULED, due ``IMMEDIATE_DELAY_MS`` after a write;
* SCHEDULED → IMMEDIATELY when a run stopped at its bound or its write failed, → DEFERRED when
  it committed everything. Computing a run does not move the schedule: the shell reports the
  write's outcome (``committed`` / ``failed``), so a write retried over a newer image runs it
  again; a committed run is a write event itself and schedules the next at once.

Kafka schedules after every controller write event, but only while some partition is
imbalanced: its ``imbalancedPartitions`` set is kept current on every replay. The image has no
such index here, so a schedule is made after every write and the imbalance is looked for when
it is due: one scan of the partitions per interval at most, and no records when there is none.

Kafka's KRaft controller balances whenever a partition is imbalanced:
``leader.imbalance.per.broker.percentage`` is read only by the ZooKeeper controller
(``KafkaController.checkAndTriggerAutoLeaderRebalance``), so it is accepted and ignored, as in
KRaft.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Iterator

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import NO_LEADER, MetadataRecord
from pykraft.quorum.managers.partition_change import (
    Election,
    TopicPartitionRef,
    build_partition_change,
    elr_for,
    is_active,
)
from pykraft.quorum.managers.result import ControllerResult

# Kafka's QuorumController.Builder default (maxElectionsPerImbalance).
MAX_ELECTIONS_PER_IMBALANCE = 1000
# QuorumController delays an immediate re-run by 10 ms, so other events are not starved.
IMMEDIATE_DELAY_MS = 10


def preferred_leader(replicas: tuple[int, ...]) -> int:
    """``PartitionRegistration.preferredReplica``: the first replica, or no leader."""
    return replicas[0] if replicas else NO_LEADER


def imbalanced_partitions(image: MetadataImage) -> Iterator[TopicPartitionRef]:
    """Partitions whose leader is not their preferred replica, in topic id and partition
    order (Kafka's ``ReplicationControlManager.imbalancedPartitions``)."""
    for topic_id in sorted(image.topics.by_id):
        topic = image.topics.by_id[topic_id]
        for partition_id in sorted(topic.partitions):
            partition = topic.partitions[partition_id]
            if partition.leader != preferred_leader(partition.replicas):
                yield TopicPartitionRef(topic, partition_id, partition)


def maybe_balance_partition_leaders(
    image: MetadataImage,
    max_elections: int = MAX_ELECTIONS_PER_IMBALANCE,
    policy: Callable[[str], bool] | None = None,
) -> ControllerResult[bool]:
    """PREFERRED elections on imbalanced partitions, at most ``max_elections``; the response
    is True when imbalanced partitions were left unvisited (run again soon)."""
    assert max_elections > 0, max_elections
    records: list[MetadataRecord] = []
    for ref in imbalanced_partitions(image):
        if len(records) >= max_elections:
            return ControllerResult(tuple(records), True)
        record = build_partition_change(
            ref.partition,
            topic_id=ref.topic.topic_id,
            partition_id=ref.partition_id,
            election=Election.PREFERRED,
            acceptable=lambda replica: is_active(image, replica),
            elr=elr_for(policy, ref.topic.name, ref.partition),
        )
        if record is not None:
            records.append(record)
    return ControllerResult(tuple(records), False)


class ImbalanceSchedule(enum.Enum):
    """Kafka's ``QuorumController.ImbalanceSchedule``."""

    # Balancing is due at a known time.
    SCHEDULED = "SCHEDULED"
    # Nothing due: the next write schedules it an interval later.
    DEFERRED = "DEFERRED"
    # The last run stopped at its bound: the next write schedules it at once.
    IMMEDIATELY = "IMMEDIATELY"


class LeaderBalanceSchedule:
    """When the active controller balances leaders next; see the module docstring."""

    def __init__(self, check_interval_ms: int | None) -> None:
        # None: auto.leader.rebalance.enable=false, never scheduled.
        assert check_interval_ms is None or check_interval_ms > 0, check_interval_ms
        self._check_interval_ms = check_interval_ms
        self.state = ImbalanceSchedule.DEFERRED
        # Invariant: set exactly when state is SCHEDULED.
        self.due_ms: int | None = None

    def on_write(self, now_ms: int) -> None:
        """After every write event (``maybeScheduleNextBalancePartitionLeaders``)."""
        if self._check_interval_ms is None or self.state is ImbalanceSchedule.SCHEDULED:
            return
        delay_ms = (
            self._check_interval_ms
            if self.state is ImbalanceSchedule.DEFERRED
            else IMMEDIATE_DELAY_MS
        )
        self._become(ImbalanceSchedule.SCHEDULED, due_ms=now_ms + delay_ms)

    def is_due(self, now_ms: int) -> bool:
        return self.due_ms is not None and now_ms >= self.due_ms

    def ran(self, more_left: bool) -> None:
        """A due run is over; ``more_left``: it stopped at its bound."""
        self._become(ImbalanceSchedule.IMMEDIATELY if more_left else ImbalanceSchedule.DEFERRED)

    def committed(self, more_left: bool, now_ms: int) -> None:
        """The write of the run computed at ``now_ms`` committed (or had no records). The run
        is a write event itself, so the next is scheduled from it at once, as Kafka schedules
        after every write event. Until this is said the run stays due, and a write retried over
        a newer image computes it again."""
        self.ran(more_left)
        self.on_write(now_ms)

    def failed(self) -> None:
        """The run's write failed (not the controller any more, timed out, rejected): it comes
        again right after the next write (IMMEDIATELY), not a whole interval later."""
        self.ran(more_left=True)

    def _become(self, state: ImbalanceSchedule, due_ms: int | None = None) -> None:
        legal = (
            state is ImbalanceSchedule.SCHEDULED
            if self.state is not ImbalanceSchedule.SCHEDULED
            else state is not ImbalanceSchedule.SCHEDULED
        )
        if not legal:
            raise AssertionError(f"leader balance schedule: {self.state.name} -> {state.name}")
        assert (state is ImbalanceSchedule.SCHEDULED) == (due_ms is not None)
        self.state = state
        self.due_ms = due_ms
