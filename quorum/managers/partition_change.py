"""Leader election and ISR changes for one partition (Kafka's ``PartitionChangeBuilder``).

Theory of operation. ``build_partition_change`` takes a partition as the image has it, the ISR
the caller wants (``target_isr``), an election type and a predicate saying which brokers may lead,
and returns the ``PartitionChangeRecord`` that gets there — or ``None`` when nothing changes.

* A valid leader is in the target ISR and acceptable (registered, unfenced, not shutting down).
* ``ONLINE``: keep the current leader if valid, else the first valid replica in replica order,
  else no leader (-1).
* ``PREFERRED``: the first replica if valid, else as ``ONLINE`` (current leader, then the rest).
* ``UNCLEAN``: as ``ONLINE``, then — only if no ISR member can lead — the first acceptable
  replica outside the ISR; the ISR becomes just that leader and the leader recovery state
  ``RECOVERING`` (KIP-704), because the new leader may lack acknowledged data.
* A reassignment (KIP-455) completes in the same build when the target ISR holds every target
  replica (Kafka's ``completeReassignmentIfNeeded``, ``reassignment_replicas.py``): replicas
  become the target, the ISR loses the removing replicas, and the election runs over the new
  replicas — so a leader being removed hands leadership to the first valid target replica. A
  change that drops a replica from the replicas bumps the leader epoch even when the leader
  stays (``triggerLeaderEpochBumpForReplicaReassignmentIfNeeded``), fencing the removed one.
* KIP-966 eligible leader replicas (ELR), when ``elr`` is given (the
  ``eligible.leader.replicas.version`` feature is on; ``quorum/managers/elr.py``): a target ISR
  of at least the effective min ISR clears ELR and LastKnownElr; a smaller one moves the members
  that leave the ISR (and keeps the ELR members) into the ELR, except brokers that shut down
  uncleanly, which go to LastKnownElr (``maybePopulateTargetElr``). While the ISR is empty an
  unfenced ELR member may be elected: a clean election (it holds every acknowledged record,
  because the high watermark only advances while the ISR is at least min ISR); the ISR becomes
  that leader and it leaves the ELR. An unclean election clears both fields. Without ``elr``
  both fields are cleared (Kafka's downgrade) and the ISR never shrinks to empty: Kafka keeps
  the last ISR member when the target ISR is empty, and the partition goes leaderless (-1)
  until that replica comes back; with ``elr`` the ISR may become empty.
* Kafka's builder also elects the *last known leader* when ISR and ELR are both empty
  (``useLastKnownLeaderInBalancedRecovery``, on in Kafka 4.x): an unclean election that does not
  ask ``unclean.leader.election.enable``. pykraft does not (Kafka's builder with that switch off,
  as its own tests run it): with unclean election off no replica that may lack acknowledged data
  is ever elected; LastKnownElr holds the real last known ELR members, as KIP-966 specifies.

Epochs are not set here: replaying the record bumps the partition epoch, and the leader epoch
whenever ``leader`` is set (``PartitionRegistration.merge``). Since metadata version 3.6 an ISR
shrink no longer bumps the leader epoch (KAFKA-15021), so only leader changes do.

``partitions_with_broker_in_isr`` / ``partitions_without_leader`` / ``leads_any`` scan the image;
``generate_leader_and_isr_updates`` is Kafka's ``ReplicationControlManager`` helper of the same
name: remove a broker from every ISR it is in and move its leaderships (fencing, controlled
shutdown, unregistration), or let a newly unfenced broker lead leaderless partitions.
"""

from __future__ import annotations

import enum
import functools
from collections.abc import Callable, Iterable, Iterator

import attrs

from pykraft.metadata.image import MetadataImage, PartitionRegistration, TopicImage
from pykraft.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    NO_LEADER_RECOVERY_STATE_CHANGE,
    LeaderRecoveryState,
    PartitionChangeRecord,
)
from pykraft.quorum.managers.elr import ElectionPolicy, ElrSettings
from pykraft.quorum.managers.reassignment_replicas import ReassignmentReplicas

LeaderAcceptor = Callable[[int], bool]
# (broker id, topic id, partition id) -> the broker reported that replica on an offline log dir.
ReplicaOffline = Callable[[int, str, int], bool]


def no_offline_replicas(broker_id: int, topic_id: str, partition_id: int) -> bool:
    return False


class Election(enum.Enum):
    """Kafka's ``PartitionChangeBuilder.Election``."""

    # Elect the preferred (first) replica if it is in the ISR and acceptable.
    PREFERRED = "PREFERRED"
    # Keep the partition online with a leader from the ISR.
    ONLINE = "ONLINE"
    # Prefer the ISR, but pick any acceptable replica rather than stay offline.
    UNCLEAN = "UNCLEAN"


@attrs.frozen
class ElectionResult:
    node: int
    unclean: bool


@attrs.frozen
class TopicPartitionRef:
    """A partition found in the image, with the topic it belongs to."""

    topic: TopicImage
    partition_id: int
    partition: PartitionRegistration


def is_active(image: MetadataImage, broker_id: int) -> bool:
    """Kafka's ``ClusterControlManager.isActive``: registered, unfenced, not shutting down."""
    registration = image.cluster.brokers.get(broker_id)
    return (
        registration is not None
        and not registration.fenced
        and not registration.in_controlled_shutdown
    )


def elect_leader(
    partition: PartitionRegistration,
    target_isr: tuple[int, ...],
    election: Election,
    acceptable: LeaderAcceptor,
    replicas: tuple[int, ...] | None = None,
    target_elr: tuple[int, ...] = (),
) -> ElectionResult:
    """Pick the leader ``election`` asks for among ``replicas`` (default: the partition's);
    ``NO_LEADER`` when there is none. An ELR member is valid while the target ISR is empty
    (Kafka's ``isValidNewLeader``)."""

    def valid(replica: int) -> bool:
        in_sync = replica in target_isr or (not target_isr and replica in target_elr)
        return in_sync and acceptable(replica)

    replicas = partition.replicas if replicas is None else replicas
    if election is Election.PREFERRED:
        if replicas and valid(replicas[0]):
            return ElectionResult(replicas[0], unclean=False)
        if valid(partition.leader):
            return ElectionResult(partition.leader, unclean=False)
        candidates: Iterable[int] = replicas[1:]
    else:
        if valid(partition.leader):
            return ElectionResult(partition.leader, unclean=False)
        candidates = replicas
    for replica in candidates:
        if valid(replica):
            return ElectionResult(replica, unclean=False)
    if election is Election.UNCLEAN:
        for replica in replicas:
            if acceptable(replica):
                return ElectionResult(replica, unclean=True)
    return ElectionResult(NO_LEADER, unclean=False)


@attrs.frozen
class _Assignment:
    """The replica fields a change aims at (Kafka's builder's targetReplicas/Adding/Removing)."""

    replicas: tuple[int, ...]
    adding: tuple[int, ...]
    removing: tuple[int, ...]
    isr: tuple[int, ...]


def _target_assignment(
    partition: PartitionRegistration,
    isr_goal: tuple[int, ...],
    replicas: tuple[int, ...] | None,
    adding: tuple[int, ...] | None,
    removing: tuple[int, ...] | None,
) -> _Assignment:
    ongoing = ReassignmentReplicas(
        partition.replicas if replicas is None else replicas,
        partition.adding_replicas if adding is None else adding,
        partition.removing_replicas if removing is None else removing,
    )
    completed = ongoing.maybe_complete_reassignment(isr_goal)
    if completed is not None:
        return _Assignment(completed.replicas, (), (), completed.isr)
    return _Assignment(ongoing.replicas, ongoing.adding, ongoing.removing, isr_goal)


def _target_elr(
    partition: PartitionRegistration, isr_goal: tuple[int, ...], elr: ElrSettings
) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """Kafka's ``maybePopulateTargetElr``: the ELR and LastKnownElr before the election.
    Sorted (Kafka collects them from a HashSet, so its order is unspecified)."""
    if len(isr_goal) >= elr.min_isr:
        return (), ()
    candidates = set(partition.elr) | set(partition.isr)
    target_elr = tuple(
        sorted(
            replica
            for replica in candidates
            if replica not in isr_goal and replica not in elr.unclean_shutdown_replicas
        )
    )
    last_known = tuple(
        sorted(
            replica
            for replica in candidates | set(partition.last_known_elr)
            if replica not in isr_goal and replica not in target_elr
        )
    )
    return target_elr, last_known


def build_partition_change(
    partition: PartitionRegistration,
    *,
    topic_id: str,
    partition_id: int,
    acceptable: LeaderAcceptor,
    target_isr: tuple[int, ...] | None = None,
    election: Election = Election.ONLINE,
    target_leader_recovery_state: LeaderRecoveryState | None = None,
    target_replicas: tuple[int, ...] | None = None,
    target_adding: tuple[int, ...] | None = None,
    target_removing: tuple[int, ...] | None = None,
    elr: ElrSettings | None = None,
) -> PartitionChangeRecord | None:
    """The record moving ``partition`` to ``target_isr`` (and, for a reassignment, to the
    target replica fields) with a fresh election, or None (Kafka's ``PartitionChangeBuilder``;
    ``elr`` None is its ``eligibleLeaderReplicasEnabled`` false)."""
    goal = _target_assignment(
        partition,
        partition.isr if target_isr is None else target_isr,
        target_replicas,
        target_adding,
        target_removing,
    )
    isr_goal = goal.isr
    target_elr, last_known = (
        (partition.elr, partition.last_known_elr)
        if elr is None
        else _target_elr(partition, isr_goal, elr)
    )
    # With ELR off, ELR entries a partition still carries (from before a downgrade) elect no one
    # (Kafka's isValidNewLeader asks whether the feature is on).
    electable_elr = () if elr is None else target_elr
    result = elect_leader(partition, isr_goal, election, acceptable, goal.replicas, electable_elr)
    leader = NO_LEADER_CHANGE
    isr: tuple[int, ...] | None = None
    recovery = NO_LEADER_RECOVERY_STATE_CHANGE
    if result.node != partition.leader:
        leader = result.node
        if result.node in electable_elr:
            # A clean election from the ELR (KIP-966): the new leader alone is in sync.
            isr_goal = (result.node,)
            target_elr = tuple(r for r in target_elr if r != result.node)
        elif result.unclean:
            # The new leader is outside the ISR: it alone is in sync now, and it must recover.
            isr = (result.node,)
            if partition.leader_recovery_state is not LeaderRecoveryState.RECOVERING:
                recovery = LeaderRecoveryState.RECOVERING.value
    elif not set(goal.replicas) >= set(partition.replicas):
        leader = partition.leader  # a replica leaves: bump the leader epoch to fence it
    if isr is not None or elr is None:
        target_elr, last_known = (), ()  # maybeUpdateRecordElr: unclean, or ELR off
    elr_change = target_elr if target_elr != partition.elr else None
    last_known_change = last_known if last_known != partition.last_known_elr else None
    if isr is None and (isr_goal or elr is not None) and isr_goal != partition.isr:
        isr = isr_goal  # with ELR on the ISR may become empty
    if (
        target_leader_recovery_state is not None
        and target_leader_recovery_state is not partition.leader_recovery_state
    ):
        recovery = target_leader_recovery_state.value
    replicas = goal.replicas if goal.replicas and goal.replicas != partition.replicas else None
    adding = goal.adding if goal.adding != partition.adding_replicas else None
    removing = goal.removing if goal.removing != partition.removing_replicas else None
    if (
        leader == NO_LEADER_CHANGE
        and isr is None
        and recovery == NO_LEADER_RECOVERY_STATE_CHANGE
        and replicas is None
        and adding is None
        and removing is None
        and elr_change is None
        and last_known_change is None
    ):
        return None
    return PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=isr,
        leader=leader,
        replicas=replicas,
        adding_replicas=adding,
        removing_replicas=removing,
        leader_recovery_state=recovery,
        eligible_leader_replicas=elr_change,
        last_known_elr=last_known_change,
    )


def elr_for(
    policy: Callable[[str], bool] | None, topic_name: str, partition: PartitionRegistration
) -> ElrSettings | None:
    """The ELR settings of a build for this topic, or None (ELR off, or no ``ElectionPolicy``)."""
    if not isinstance(policy, ElectionPolicy):
        return None
    return policy.elr(topic_name, len(partition.replicas))


def all_partitions(image: MetadataImage) -> Iterator[TopicPartitionRef]:
    # Sorted by topic name, then partition id, so the records of one request come out in a
    # deterministic order whatever the HAMT iteration order is.
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        for partition_id in sorted(topic.partitions):
            yield TopicPartitionRef(topic, partition_id, topic.partitions[partition_id])


def partitions_with_broker_in_isr(
    image: MetadataImage, broker_id: int
) -> Iterator[TopicPartitionRef]:
    return (ref for ref in all_partitions(image) if broker_id in ref.partition.isr)


def partitions_with_broker_in_elr(
    image: MetadataImage, broker_id: int
) -> Iterator[TopicPartitionRef]:
    """Kafka's ``BrokersToElrs.partitionsWithBrokerInElr``."""
    return (ref for ref in all_partitions(image) if broker_id in ref.partition.elr)


def partitions_without_leader(image: MetadataImage) -> Iterator[TopicPartitionRef]:
    return (ref for ref in all_partitions(image) if ref.partition.leader == NO_LEADER)


def leads_any(image: MetadataImage, broker_id: int) -> bool:
    """Kafka's ``BrokersToIsrs.hasLeaderships``."""
    return any(ref.partition.leader == broker_id for ref in all_partitions(image))


def generate_leader_and_isr_updates(
    image: MetadataImage,
    partitions: Iterable[TopicPartitionRef],
    *,
    unclean_enabled: Callable[[str], bool],
    broker_to_remove: int = NO_LEADER,
    broker_to_add: int = NO_LEADER,
    broker_with_unclean_shutdown: int = NO_LEADER,
    replica_offline: ReplicaOffline = no_offline_replicas,
) -> list[PartitionChangeRecord]:
    """Remove ``broker_to_remove`` from ISRs and leadership; let ``broker_to_add`` lead.

    ``broker_to_add`` counts as acceptable even though the image still shows it fenced (the
    unfencing record is in the same batch); ``broker_to_remove`` never does, even for an unclean
    election, although the image still shows it active. Nor does a replica its broker reported
    on an offline log dir (``replica_offline``; Kafka's ``isActive(brokerId, directoryId)``).
    ``broker_with_unclean_shutdown`` (KIP-966) leaves the ISR, the ELR and leadership.
    ``unclean_enabled`` is an ``ElectionPolicy`` when ELR may be on; a plain predicate means
    ELR off.
    """
    gone = (broker_to_remove, broker_with_unclean_shutdown)
    unclean_shutdown = (
        () if broker_with_unclean_shutdown == NO_LEADER else (broker_with_unclean_shutdown,)
    )

    def acceptable(replica: int, ref: TopicPartitionRef) -> bool:
        return (
            replica not in gone
            and (replica == broker_to_add or is_active(image, replica))
            and not replica_offline(replica, ref.topic.topic_id, ref.partition_id)
        )

    records: list[PartitionChangeRecord] = []
    seen: set[tuple[str, int]] = set()
    for ref in partitions:
        if (ref.topic.topic_id, ref.partition_id) in seen:
            continue  # a partition with the broker in both ISR and ELR lists (never both)
        seen.add((ref.topic.topic_id, ref.partition_id))
        election = Election.UNCLEAN if unclean_enabled(ref.topic.name) else Election.ONLINE
        target_isr = tuple(r for r in ref.partition.isr if r not in gone)
        elr = (
            unclean_enabled.elr(ref.topic.name, len(ref.partition.replicas), unclean_shutdown)
            if isinstance(unclean_enabled, ElectionPolicy)
            else None
        )
        record = build_partition_change(
            ref.partition,
            topic_id=ref.topic.topic_id,
            partition_id=ref.partition_id,
            acceptable=functools.partial(acceptable, ref=ref),
            target_isr=target_isr,
            election=election,
            elr=elr,
        )
        if record is not None:
            records.append(record)
    return records
