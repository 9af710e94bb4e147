"""The decisions of ``pykraft reassign-partitions``, as pure functions (Kafka's
``ReassignPartitionsCommand``): its JSON files, the proposed assignment of ``--generate``, the
throttle configs of ``--execute --throttle``, and the lines ``--verify`` and ``--list`` print.

JSON formats (kafka-reassign-partitions.sh's):

    topics to move:  {"topics": [{"topic": "foo"}], "version": 1}
    reassignment:    {"version": 1, "partitions": [{"topic": "foo", "partition": 0,
                      "replicas": [1, 2], "log_dirs": ["any", "any"]}]}

``log_dirs`` other than "any" would move replicas between a broker's log dirs
(AlterReplicaLogDirs), which pykraft does not serve: they are refused.

Throttles (KIP-73, ``ReassignPartitionsCommand.calculateProposedMoveMap``): the leader side
throttles every source replica of a moving partition ("partition:broker" in the topic's
``leader.replication.throttled.replicas``), the follower side every replica being added
(``follower.replication.throttled.replicas``), and each broker of a move gets
``leader.replication.throttled.rate`` and ``follower.replication.throttled.rate``. Moves
already running count too (``calculateCurrentMoveMap``).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import attrs

from pykraft.fetcher.replication_quota import (
    FOLLOWER_THROTTLED_RATE,
    FOLLOWER_THROTTLED_REPLICAS,
    LEADER_THROTTLED_RATE,
    LEADER_THROTTLED_REPLICAS,
)
from pykraft.quorum.placement import RandomSource
from pykraft.storage.topic_partition import TopicPartition

BROKER_THROTTLE_CONFIGS = (LEADER_THROTTLED_RATE, FOLLOWER_THROTTLED_RATE)
TOPIC_THROTTLE_CONFIGS = (LEADER_THROTTLED_REPLICAS, FOLLOWER_THROTTLED_REPLICAS)
ANY_LOG_DIR = "any"

Assignment = dict[TopicPartition, tuple[int, ...]]


class ReassignPlanError(ValueError):
    """A bad file or option: printed, exit status 1."""


def _load(text: str, what: str) -> Mapping[str, Any]:
    try:
        value = json.loads(text)
    except json.JSONDecodeError as error:
        raise ReassignPlanError(f"Unable to parse the {what}: {error}") from None
    if not isinstance(value, dict):
        raise ReassignPlanError(f"The {what} must be a JSON object.")
    return value


def _ints(value: Any, what: str) -> tuple[int, ...]:
    if not isinstance(value, list) or not all(type(v) is int for v in value):
        raise ReassignPlanError(f"{what} must be a list of integers.")
    return tuple(value)


def parse_topics_to_move(text: str) -> list[str]:
    """``--topics-to-move-json-file``: the topic names, each once (Kafka's
    ``parseTopicsData``: "Duplicate topic names are not allowed")."""
    entries = _load(text, "topics-to-move JSON").get("topics")
    if not isinstance(entries, list) or not all(
        isinstance(e, dict) and isinstance(e.get("topic"), str) for e in entries
    ):
        raise ReassignPlanError('The topics-to-move JSON needs "topics": [{"topic": "..."}].')
    names = [e["topic"] for e in entries]
    duplicates = sorted({n for n in names if names.count(n) > 1})
    if duplicates:
        raise ReassignPlanError(
            f"List of topics to reassign contains duplicate entries: {duplicates}"
        )
    return names


def parse_broker_list(text: str) -> tuple[int, ...]:
    try:
        brokers = tuple(int(part) for part in text.split(","))
    except ValueError:
        raise ReassignPlanError(f"Invalid broker list: {text}") from None
    duplicates = sorted({b for b in brokers if brokers.count(b) > 1})
    if duplicates:
        raise ReassignPlanError(
            "Broker list contains duplicate entries: " + ",".join(map(str, duplicates))
        )
    return brokers


def parse_reassignment(text: str) -> Assignment:
    """``--reassignment-json-file`` (Kafka's ``parsePartitionReassignmentData`` and its
    checks: not empty, no partition twice, no replica twice, no empty replica list)."""
    entries = _load(text, "reassignment JSON").get("partitions")
    if not isinstance(entries, list):
        raise ReassignPlanError('The reassignment JSON needs "partitions": [...].')
    if not entries:
        raise ReassignPlanError("Partition reassignment list cannot be empty")
    plan: Assignment = {}
    for entry in entries:
        if not isinstance(entry, dict) or not isinstance(entry.get("topic"), str):
            raise ReassignPlanError('Each partition needs a "topic" name.')
        index = entry.get("partition")
        if type(index) is not int:
            raise ReassignPlanError('Each partition needs an integer "partition".')
        tp = TopicPartition(entry["topic"], index)
        replicas = _ints(entry.get("replicas"), f"The replicas of {tp}")
        if tp in plan:
            raise ReassignPlanError(f"Reassignment data contains duplicate partitions: {tp}")
        if not replicas:
            raise ReassignPlanError(f"Partition replica list cannot be empty: {tp}")
        if len(set(replicas)) != len(replicas):
            raise ReassignPlanError(
                f"Replica assignment has duplicate replicas for partition: {tp}"
            )
        log_dirs = entry.get("log_dirs", [ANY_LOG_DIR] * len(replicas))
        if not isinstance(log_dirs, list) or len(log_dirs) != len(replicas):
            raise ReassignPlanError(f"Size of replicas list and log dirs list differ for {tp}")
        if any(d != ANY_LOG_DIR for d in log_dirs):
            raise ReassignPlanError(
                f"Moving {tp} between log dirs (AlterReplicaLogDirs) is not supported."
            )
        plan[tp] = replicas
    return plan


def format_assignment(assignment: Mapping[TopicPartition, Sequence[int]]) -> str:
    """The reassignment JSON Kafka prints (``formatAsReassignmentJson``), sorted by partition."""
    ordered = sorted(assignment, key=lambda tp: (tp.topic, tp.partition))
    return json.dumps(
        {
            "version": 1,
            "partitions": [
                {
                    "topic": tp.topic,
                    "partition": tp.partition,
                    "replicas": list(assignment[tp]),
                    "log_dirs": [ANY_LOG_DIR] * len(assignment[tp]),
                }
                for tp in ordered
            ],
        },
        separators=(",", ":"),
    )


def _replica_index(first: int, shift: int, index: int, brokers: int) -> int:
    return (first + 1 + (shift + index) % (brokers - 1)) % brokers


def assign_replicas_to_brokers(
    partitions: int, replication_factor: int, brokers: Sequence[int], rng: RandomSource
) -> list[tuple[int, ...]]:
    """Kafka's rack-unaware ``AdminUtils.assignReplicasToBrokers``: the first replica round-robin
    from a random start, the others shifted by a random amount that grows per broker-count of
    partitions."""
    if replication_factor > len(brokers):
        raise ReassignPlanError(
            f"Replication factor: {replication_factor} larger than available brokers: "
            f"{len(brokers)}."
        )
    ordered = sorted(brokers)
    count = len(ordered)
    start = rng.randrange(count)
    shift = rng.randrange(count)
    placed: list[tuple[int, ...]] = []
    for partition in range(partitions):
        if partition > 0 and partition % count == 0:
            shift += 1
        first = (partition + start) % count
        replicas = [ordered[first]]
        replicas += [
            ordered[_replica_index(first, shift, j, count)] for j in range(replication_factor - 1)
        ]
        placed.append(tuple(replicas))
    return placed


def propose_assignment(
    current: Assignment, brokers: Sequence[int], rng: RandomSource
) -> Assignment:
    """``--generate``: each topic's partitions re-placed over ``brokers`` at the replication
    factor of its partition 0 (Kafka's ``calculateAssignment``)."""
    proposed: Assignment = {}
    for topic in sorted({tp.topic for tp in current}):
        parts = sorted(tp.partition for tp in current if tp.topic == topic)
        rf = len(current[TopicPartition(topic, parts[0])])
        placed = assign_replicas_to_brokers(len(parts), rf, brokers, rng)
        for index, replicas in zip(parts, placed, strict=True):
            proposed[TopicPartition(topic, index)] = replicas
    return proposed


# ---------------------------------------------------------------------------- throttles


@attrs.frozen
class Throttles:
    # topic -> (leader throttled replicas, follower throttled replicas), "p:b,..." strings.
    topics: Mapping[str, tuple[str, str]]
    brokers: tuple[int, ...]


def _replica_list(entries: Iterable[tuple[int, int]]) -> str:
    return ",".join(f"{partition}:{broker}" for partition, broker in sorted(set(entries)))


def throttles_for(
    current: Mapping[TopicPartition, Sequence[int]],
    proposed: Mapping[TopicPartition, Sequence[int]],
    in_progress: Mapping[TopicPartition, tuple[Sequence[int], Sequence[int]]] | None = None,
) -> Throttles:
    """KIP-73 throttles for moving ``current`` to ``proposed`` while the reassignments
    ``in_progress`` (partition -> its replicas and adding replicas) still run.

    Kafka's ``calculateProposedMoveMap`` starts from ``calculateCurrentMoveMap``: a running move's
    sources are its replicas minus the adding ones, its destinations the adding ones. A
    re-targeted partition keeps the running move's sources; the new targets outside them are
    destinations. The topics' throttled-replica lists cover both, so ``--additional`` does not
    overwrite a running move's throttles with only the new one's."""
    moves: dict[TopicPartition, tuple[frozenset[int], frozenset[int]]] = {}
    for tp, (replicas, adding) in (in_progress or {}).items():
        moves[tp] = (frozenset(replicas) - frozenset(adding), frozenset(adding))
    for tp, target in proposed.items():
        now = current.get(tp, ())
        if tp not in moves and tuple(now) == tuple(target):
            continue  # does not move: throttled nowhere
        sources = moves[tp][0] if tp in moves else frozenset(now)
        moves[tp] = (sources, frozenset(target) - sources)
    leaders: dict[str, list[tuple[int, int]]] = {}
    followers: dict[str, list[tuple[int, int]]] = {}
    brokers: set[int] = set()
    for tp, (sources, destinations) in moves.items():
        leaders.setdefault(tp.topic, []).extend((tp.partition, b) for b in sources)
        followers.setdefault(tp.topic, []).extend((tp.partition, b) for b in destinations)
        brokers.update(sources | destinations)
    return Throttles(
        topics={
            topic: (_replica_list(leaders[topic]), _replica_list(followers[topic]))
            for topic in sorted(leaders)
        },
        brokers=tuple(sorted(brokers)),
    )


# ---------------------------------------------------------------------------- --verify, --list


def _ids(replicas: Sequence[int]) -> str:
    return ",".join(map(str, replicas))


def verify_lines(
    targets: Assignment, current: Assignment, in_progress: Iterable[TopicPartition]
) -> tuple[list[str], bool]:
    """The status lines of ``--verify`` and whether every reassignment is done (Kafka's
    ``partitionReassignmentStatesToString``)."""
    moving = set(in_progress)
    lines = ["Status of partition reassignment:"]
    done = True
    for tp in sorted(targets, key=lambda tp: (tp.topic, tp.partition)):
        if tp in moving:
            done = False
            lines.append(f"Reassignment of partition {tp} is still in progress.")
        elif tuple(current.get(tp, ())) == tuple(targets[tp]):
            lines.append(f"Reassignment of partition {tp} is completed.")
        else:
            lines.append(
                f"There is no active reassignment of partition {tp}, but replica set is "
                f"{_ids(current.get(tp, ()))} rather than {_ids(targets[tp])}."
            )
    return lines, done


def list_lines(reassignments: Mapping[TopicPartition, tuple[Sequence[int], ...]]) -> list[str]:
    """``--list``: (replicas, adding, removing) per partition in progress."""
    if not reassignments:
        return ["No partition reassignments found."]
    lines = ["Current partition reassignments:"]
    for tp in sorted(reassignments, key=lambda tp: (tp.topic, tp.partition)):
        replicas, adding, removing = reassignments[tp]
        lines.append(
            f"{tp}: replicas: {_ids(replicas)}. adding: {_ids(adding)}. removing: {_ids(removing)}."
        )
    return lines
