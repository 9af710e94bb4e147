"""The server-side partition assignors of the consumer group protocol (KIP-848): ``uniform``
and ``range``, pure functions from the group's subscriptions to a target assignment.

Kafka's ``PartitionAssignor`` interface (``group-coordinator/.../assignor``) takes a
``GroupSpec`` (each member's subscribed topic ids and current target assignment) and a
``SubscribedTopicDescriber`` (each topic's partition count); here that is ``AssignmentSpec``
with ``partition_counts``. The result maps every member id to its partitions, topic id ->
partition set; every partition of a subscribed topic goes to exactly one subscriber.

``UniformAssignor`` (the default, ``group.consumer.assignors`` = uniform,range) spreads the
partitions of all subscribed topics as evenly as possible while moving as few as possible.
Kafka has two builders: ``OptimizedUniformAssignmentBuilder`` when every member subscribes to the
same topics (each member ends with ⌊P/M⌋ or ⌈P/M⌉ partitions) and
``GeneralUniformAssignmentBuilder`` otherwise. pykraft runs one sticky procedure for both:
keep each member's current partitions up to its quota, hand out the free partitions to the least
loaded subscriber, then move partitions from the most to the least loaded subscriber while that
narrows the gap by two or more. With homogeneous subscriptions that ends exactly at Kafka's
⌊P/M⌋/⌈P/M⌉ spread; with heterogeneous ones it is balanced per subscriber set, though not always
the very partition choice Kafka's general builder makes.

``RangeAssignor`` (Kafka 3.9's server-side ``RangeAssignor``) assigns each topic on its own:
its subscribers sorted by member id get ⌊P/N⌋ partitions, the first P mod N one more, so members
subscribed to co-partitioned topics get the same partition numbers; within those quotas a
member keeps the partitions it has (Kafka's sticky range, KIP-848).
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs

UNIFORM_ASSIGNOR = "uniform"
RANGE_ASSIGNOR = "range"

# topic id -> partitions
Assignment = Mapping[str, frozenset[int]]
# Invariant: a balancing pass moves at most one partition per partition of the group.
_MAX_BALANCE_MOVES_PER_PARTITION = 1


class PartitionAssignorError(ValueError):
    """Kafka's ``PartitionAssignorException``: the assignor cannot assign this group."""


@attrs.frozen
class MemberSubscription:
    """Kafka's ``MemberSubscriptionAndAssignment``: what one member subscribes to, and the
    partitions the current target assignment gives it."""

    subscribed_topic_ids: frozenset[str]
    assignment: Assignment = attrs.field(factory=dict)


@attrs.frozen
class AssignmentSpec:
    members: Mapping[str, MemberSubscription]
    # topic id -> number of partitions, for every topic some member subscribes to that exists.
    partition_counts: Mapping[str, int]


def assign(assignor: str, spec: AssignmentSpec) -> dict[str, dict[str, frozenset[int]]]:
    """The target assignment ``assignor`` computes: member id -> topic id -> partitions."""
    if assignor == UNIFORM_ASSIGNOR:
        return uniform_assign(spec)
    if assignor == RANGE_ASSIGNOR:
        return range_assign(spec)
    raise PartitionAssignorError(f"unknown assignor {assignor!r}")


def _subscribers(spec: AssignmentSpec, topic_id: str) -> list[str]:
    return sorted(
        member_id
        for member_id, member in spec.members.items()
        if topic_id in member.subscribed_topic_ids
    )


def _as_assignment(
    owned: Mapping[str, set[tuple[str, int]]],
) -> dict[str, dict[str, frozenset[int]]]:
    result: dict[str, dict[str, frozenset[int]]] = {}
    for member_id, partitions in owned.items():
        by_topic: dict[str, set[int]] = {}
        for topic_id, partition in partitions:
            by_topic.setdefault(topic_id, set()).add(partition)
        result[member_id] = {topic: frozenset(ps) for topic, ps in sorted(by_topic.items())}
    return result


# ------------------------------------------------------------------ uniform


def uniform_assign(spec: AssignmentSpec) -> dict[str, dict[str, frozenset[int]]]:
    """Kafka's ``UniformAssignor.assign``: balanced and sticky (see the module docstring)."""
    members = sorted(spec.members)
    owned: dict[str, set[tuple[str, int]]] = {member_id: set() for member_id in members}
    topics = sorted(t for t in spec.partition_counts if _subscribers(spec, t))
    all_partitions = [(t, p) for t in topics for p in range(spec.partition_counts[t])]
    if not members:
        return {}
    quota = _uniform_quotas(spec, members, len(all_partitions))
    # 1. Stickiness: a member keeps what it has (still subscribed, still existing) up to quota.
    taken: set[tuple[str, int]] = set()
    for member_id in members:
        member = spec.members[member_id]
        current = sorted(
            (topic_id, partition)
            for topic_id, partitions in member.assignment.items()
            if topic_id in member.subscribed_topic_ids
            for partition in partitions
            if partition < spec.partition_counts.get(topic_id, 0)
        )
        for topic_partition in current[: quota[member_id]]:
            if topic_partition not in taken:
                owned[member_id].add(topic_partition)
                taken.add(topic_partition)
    # 2. Every free partition to its least loaded subscriber (ties: member id order).
    subscribers = {t: _subscribers(spec, t) for t in topics}
    for topic_partition in all_partitions:
        if topic_partition in taken:
            continue
        candidates = subscribers[topic_partition[0]]
        target = min(candidates, key=lambda m: (len(owned[m]), m))
        owned[target].add(topic_partition)
        taken.add(topic_partition)
    # 3. Balance: move from the most to the least loaded subscriber while the gap is >= 2.
    _balance(owned, subscribers, len(all_partitions) * _MAX_BALANCE_MOVES_PER_PARTITION)
    return _as_assignment(owned)


def _uniform_quotas(spec: AssignmentSpec, members: list[str], total: int) -> dict[str, int]:
    """⌈P/M⌉ for everyone when subscriptions are homogeneous (step 3 trims the rest);
    a member subscribed to fewer topics cannot hold more than those topics' partitions."""
    ceiling = -(-total // len(members)) if members else 0
    quotas = {}
    for member_id in members:
        subscribed = spec.members[member_id].subscribed_topic_ids
        reachable = sum(spec.partition_counts.get(t, 0) for t in subscribed)
        quotas[member_id] = min(ceiling, reachable)
    return quotas


def _balance(
    owned: dict[str, set[tuple[str, int]]], subscribers: Mapping[str, list[str]], max_moves: int
) -> None:
    for _ in range(max_moves):
        move = _best_move(owned, subscribers)
        if move is None:
            return
        source, target, topic_partition = move
        owned[source].remove(topic_partition)
        owned[target].add(topic_partition)


def _best_move(
    owned: Mapping[str, set[tuple[str, int]]], subscribers: Mapping[str, list[str]]
) -> tuple[str, str, tuple[str, int]] | None:
    """A partition of the most loaded member that a member with two fewer may take (its
    highest-numbered one, so low partitions stay put), or None when balanced."""
    for source in sorted(owned, key=lambda m: (-len(owned[m]), m)):
        for topic_partition in sorted(owned[source], reverse=True):
            candidates = [
                m
                for m in subscribers[topic_partition[0]]
                if len(owned[m]) <= len(owned[source]) - 2
            ]
            if candidates:
                target = min(candidates, key=lambda m: (len(owned[m]), m))
                return source, target, topic_partition
    return None


# ------------------------------------------------------------------ range


def range_assign(spec: AssignmentSpec) -> dict[str, dict[str, frozenset[int]]]:
    """Kafka's server-side ``RangeAssignor``: per topic, ⌊P/N⌋ to each subscriber in member id
    order and one more to the first P mod N; current partitions kept within those quotas."""
    owned: dict[str, set[tuple[str, int]]] = {member_id: set() for member_id in spec.members}
    for topic_id in sorted(spec.partition_counts):
        members = _subscribers(spec, topic_id)
        if not members:
            continue
        count = spec.partition_counts[topic_id]
        base, extra = divmod(count, len(members))
        quota = {m: base + (1 if index < extra else 0) for index, m in enumerate(members)}
        taken: set[int] = set()
        for member_id in members:
            current = sorted(
                p
                for p in spec.members[member_id].assignment.get(topic_id, frozenset())
                if p < count
            )
            keep = current[: quota[member_id]]
            taken.update(keep)
            owned[member_id].update((topic_id, p) for p in keep)
            quota[member_id] -= len(keep)
        free = iter(p for p in range(count) if p not in taken)
        for member_id in members:
            for _ in range(quota[member_id]):
                owned[member_id].add((topic_id, next(free)))
    return _as_assignment(owned)
