"""``pykraft get-offsets``' choices (pure): Kafka 3.9's ``GetOffsetShell`` filters, time and
output.

* ``--time``: ``-1``/``latest`` (the default), ``-2``/``earliest``, ``-3``/``max-timestamp``
  (KIP-734), ``-4``/``earliest-local`` and ``-5``/``latest-tiered`` (KIP-405: without tiered
  storage the first is the log start and the second answers no offset), or a timestamp in ms
  (``parseOffsetSpec``);
* ``--topic REGEX`` and ``--partitions 0,1`` (``TopicFilterAndPartitionFilter``: the regex must
  match the whole name, as ``IncludeList``; no ``--partitions`` takes every partition);
* ``--topic-partitions`` ``t:1,u:0-3,v,w:5-,:-3``: a list of rules, each a topic regex (empty:
  any topic) and a partition, a range lower-inclusive upper-exclusive, or open at either end
  (``parseRuleSpec``);
* output ``topic:partition:offset``, sorted by ``TopicPartition.toString`` (``topic-partition``
  as text, so ``t-10`` sorts before ``t-2``, as Kafka's ``TreeMap``), partitions with no offset
  left out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

import attrs

from pykraft.storage.topic_partition import TopicPartition

EARLIEST, LATEST, MAX_TIMESTAMP, EARLIEST_LOCAL, LATEST_TIERED = -2, -1, -3, -4, -5
TIME_NAMES = {
    "earliest": EARLIEST,
    "latest": LATEST,
    "max-timestamp": MAX_TIMESTAMP,
    "earliest-local": EARLIEST_LOCAL,
    "latest-tiered": LATEST_TIERED,
}
# Kafka's Topic.isInternal: the topics listed only with ListTopicsOptions.listInternal.
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state"})
_RULE = re.compile(r"([^:,]*)(?::(?:([0-9]*)|(?:([0-9]*)-([0-9]*))))?")
_MAX_PARTITION = 2**31 - 1


class GetOffsetsError(ValueError):
    """Printed as Kafka's ``TerseException``: "Error occurred: <message>", exit status 1."""


def parse_time(text: str) -> int:
    """``--time`` as Kafka's ListOffsets timestamp (negative values name a spec)."""
    if text in TIME_NAMES:
        return TIME_NAMES[text]
    try:
        return int(text)
    except ValueError:
        raise GetOffsetsError(
            f"Malformed time argument {text}. Please use -1 or latest / -2 or earliest / -3 or "
            "max-timestamp / -4 or earliest-local / -5 or latest-tiered, or a specified long "
            "format timestamp"
        ) from None


def _topic_pattern(regex: str) -> re.Pattern[str]:
    """Kafka's ``IncludeList``: commas mean "or", spaces and surrounding quotes are dropped."""
    cleaned = regex.strip().replace(",", "|").replace(" ", "")
    cleaned = re.sub(r"""^["']+|["']+$""", "", cleaned)
    try:
        return re.compile(cleaned)
    except re.error as error:
        raise GetOffsetsError(f"Invalid topic regex {regex}: {error}") from None


@attrs.frozen
class Rule:
    """One topic regex with a partition set or range (``[low, high)``)."""

    topic: re.Pattern[str]
    partitions: frozenset[int] | None = None  # None: the range
    low: int = 0
    high: int = _MAX_PARTITION

    def topic_allowed(self, topic: str) -> bool:
        return self.topic.fullmatch(topic) is not None

    def allows(self, partition: TopicPartition) -> bool:
        if not self.topic_allowed(partition.topic):
            return False
        if self.partitions is not None:
            return not self.partitions or partition.partition in self.partitions
        return self.low <= partition.partition < self.high


def rules_of_topic_and_partitions(topic: str | None, partitions: str | None) -> list[Rule]:
    """``--topic`` / ``--partitions`` (Kafka's
    ``createTopicPartitionFilterWithTopicAndPartitionPattern``)."""
    chosen: frozenset[int] = frozenset()
    if partitions:
        try:
            chosen = frozenset(int(p) for p in partitions.split(","))
        except ValueError:
            raise GetOffsetsError(
                "--partitions expects a comma separated list of numeric partition ids, but "
                f"received: {partitions}"
            ) from None
    return [Rule(_topic_pattern(topic if topic is not None else ".*"), chosen)]


def rules_of_topic_partitions(spec: str) -> list[Rule]:
    """``--topic-partitions`` (``createTopicPartitionFilterWithPatternList``)."""
    rules = []
    for rule in spec.split(","):
        match = _RULE.fullmatch(rule)
        if match is None:
            raise GetOffsetsError(f"Invalid rule specification: {rule}")
        topic, single, low, high = (g or None for g in match.groups())
        pattern = _topic_pattern(topic or ".*")
        if single is not None:
            rules.append(Rule(pattern, frozenset({int(single)})))
        else:
            rules.append(Rule(pattern, None, int(low or 0), int(high) if high else _MAX_PARTITION))
    return rules


def matching_partitions(
    partition_counts: Mapping[str, int], rules: Sequence[Rule], exclude_internal: bool
) -> list[TopicPartition]:
    """The partitions some rule allows, of the topics listed (``listPartitionInfos``)."""
    found = []
    for topic, count in partition_counts.items():
        if exclude_internal and topic in INTERNAL_TOPICS:
            continue
        for partition in range(count):
            candidate = TopicPartition(topic, partition)
            if any(rule.allows(candidate) for rule in rules):
                found.append(candidate)
    if not found:
        raise GetOffsetsError("Could not match any topic-partitions with the specified filters")
    return found


def output_lines(offsets: Mapping[TopicPartition, int]) -> list[str]:
    """``topic:partition:offset`` in Kafka's order; UNKNOWN_OFFSET (-1) answers are left out."""
    known = [(str(p), p, o) for p, o in offsets.items() if o != -1]
    return [f"{p.topic}:{p.partition}:{o}" for _, p, o in sorted(known, key=lambda i: i[0])]
