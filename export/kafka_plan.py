"""Offset ranges for the ``pykraft-kafka`` source: resolve, split, rate-limit (pure).

The driver asks the brokers for each partition's earliest and latest offsets (ListOffsets, at the
source's isolation level: ``latest`` is the last stable offset under ``read_committed``) and hands
them here with the options. What comes back is a list of ``KafkaRange``s, ``[from, until)`` each,
which executors read with a consumer. Names and rules follow Spark's Kafka connector:

* ``resolve_offsets``: ``KafkaRelation.buildScan`` with ``KafkaOffsetReaderAdmin``'s
  checks (specific offsets must name every assigned partition; -2/-1 resolve to earliest/latest;
  a start below the log start offset is data loss); timestamps resolve through ListOffsets by
  timestamp (``fetchSpecificTimestampBasedOffsets`` / ``fetchGlobalTimestampBasedOffsets``,
  ``readTimestampOffsets`` for a timestamp no offset matches), asked through the lookup given;
* ``split_ranges``: ``KafkaOffsetRangeCalculator.getRanges`` (``minPartitions``), preceded by the
  ``maxRecordsPerPartition`` cut Spark 4 documents ("divvy up partitions based on
  maxRecordsPerPartition and if the final partition count is less than minPartitions it will
  divvy up partitions again based on minPartitions");
* ``rate_limit``: ``KafkaMicroBatchStream.rateLimit`` (``maxOffsetsPerTrigger`` shared in
  proportion to what each partition has, at least one offset to a partition with any);
* streaming offsets as Spark's ``KafkaSourceOffset`` JSON, ``{"topic": {"0": 23}}``.

Data loss (``failOnDataLoss``): Spark fails the query when offsets it planned to read are gone, or
logs and goes on when the option is false. ``DataLossError`` is that failure; with the option false
the range is clamped or dropped instead.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Iterable, Mapping, Sequence

import attrs

from pykraft.export.kafka_options import (
    EARLIEST,
    LATEST,
    Assign,
    Bound,
    GlobalTimestamp,
    NoMatch,
    OffsetLimit,
    SpecificOffsets,
    SpecificTimestamps,
    Strategy,
    Subscribe,
)
from pykraft.storage.topic_partition import TopicPartition

Offsets = Mapping[TopicPartition, int]
# ListOffsets by timestamp: per partition, the first offset whose timestamp is at or after the
# one asked for, or None where there is none (the client's offsets_for_times).
TimestampLookup = Callable[[Offsets], Mapping[TopicPartition, int | None]]
# Kafka's Topic.isInternal; a pattern never matches them (the Java consumer's
# exclude.internal.topics=true, which Spark leaves on).
INTERNAL_TOPICS = frozenset({"__consumer_offsets", "__transaction_state", "__share_group_state"})


class DataLossError(RuntimeError):
    """Offsets the query planned to read are no longer in Kafka (``failOnDataLoss=true``)."""


class PlanError(ValueError):
    """Options that do not fit the topics found (Spark's assertion failures)."""


@attrs.frozen
class DescribedTopic:
    """A topic as the brokers describe it (Metadata of that one topic): its id and partitions."""

    topic_id: str
    partitions: int


@attrs.frozen(order=True)
class KafkaRange:
    """Spark's ``KafkaOffsetRange``: offsets ``[from_offset, until_offset)`` of one partition."""

    topic: str
    partition: int
    from_offset: int
    until_offset: int

    @property
    def topic_partition(self) -> TopicPartition:
        return TopicPartition(self.topic, self.partition)

    @property
    def size(self) -> int:
        """Offsets in the range; more than its records under compaction or transactions."""
        return self.until_offset - self.from_offset


def select_partitions(
    strategy: Strategy, partition_counts: Mapping[str, int]
) -> list[TopicPartition]:
    """The partitions a strategy reads, given every topic's partition count from Metadata.

    ``subscribe`` names topics (missing ones read nothing, as a subscription to a topic not
    yet created); ``subscribePattern`` matches whole names; ``assign`` takes its partitions
    as given and refuses ones that do not exist.
    """
    if isinstance(strategy, Assign):
        missing = [
            tp for tp in strategy.partitions if tp.partition >= partition_counts.get(tp.topic, 0)
        ]
        if missing:
            raise PlanError(f"assign names partitions that do not exist: {_names(missing)}")
        return sorted(strategy.partitions)
    if isinstance(strategy, Subscribe):
        topics = [t for t in strategy.topics if t in partition_counts]
    else:
        pattern = re.compile(strategy.pattern)
        topics = [t for t in partition_counts if t not in INTERNAL_TOPICS and pattern.fullmatch(t)]
    return sorted(
        TopicPartition(topic, p) for topic in set(topics) for p in range(partition_counts[topic])
    )


def resolve_offsets(
    limit: OffsetLimit,
    partitions: Sequence[TopicPartition],
    earliest: Offsets,
    latest: Offsets,
    *,
    name: str,
    fail_on_data_loss: bool,
    by_timestamp: TimestampLookup | None = None,
) -> dict[TopicPartition, int]:
    """A limit as an offset per partition (``KafkaOffsetReaderAdmin.fetchPartitionOffsets``);
    ``name`` is the option (``startingOffsets``/``endingOffsets``); timestamp limits ask
    ``by_timestamp``."""
    if limit == Bound.EARLIEST:
        return {tp: earliest[tp] for tp in partitions}
    if limit == Bound.LATEST:
        return {tp: latest[tp] for tp in partitions}
    if isinstance(limit, SpecificTimestamps | GlobalTimestamp):
        assert by_timestamp is not None, "a timestamp limit needs a ListOffsets lookup"
        return _resolve_timestamps(limit, partitions, latest, name, by_timestamp)
    assert isinstance(limit, SpecificOffsets)
    if set(limit.offsets) != set(partitions):
        raise PlanError(
            f"If {name} contains specific offsets, you must specify all TopicPartitions. "
            f"Use -1 for latest, -2 for earliest. Specified: {_names(limit.offsets)} "
            f"Assigned: {_names(partitions)}"
        )
    resolved = {}
    for tp in partitions:
        offset = limit.offsets[tp]
        if offset == EARLIEST:
            offset = earliest[tp]
        elif offset == LATEST:
            offset = latest[tp]
        elif offset < earliest[tp]:
            _data_loss(
                f"{name} for {tp} is {offset}, but the log starts at {earliest[tp]}: "
                "some data may have been lost because it is not available in Kafka any more",
                fail_on_data_loss,
            )
            offset = earliest[tp]
        resolved[tp] = offset
    return resolved


def _resolve_timestamps(
    limit: SpecificTimestamps | GlobalTimestamp,
    partitions: Sequence[TopicPartition],
    latest: Offsets,
    name: str,
    by_timestamp: TimestampLookup,
) -> dict[TopicPartition, int]:
    if isinstance(limit, SpecificTimestamps):
        if set(limit.timestamps) != set(partitions):
            raise PlanError(
                f"If {name.removesuffix('Offsets')}OffsetsByTimestamp contains specific "
                f"offsets, you must specify all topics. Specified: {_names(limit.timestamps)} "
                f"Assigned: {_names(partitions)}"
            )
        timestamps = dict(limit.timestamps)
    else:
        timestamps = {tp: limit.timestamp for tp in partitions}
    found = by_timestamp(timestamps) if timestamps else {}
    starting = name.startswith("starting")
    resolved = {}
    for tp in partitions:
        offset = found.get(tp)
        if offset is None:
            if starting and limit.no_match is NoMatch.ERROR:
                raise PlanError(
                    f"No offset matched from request of topic-partition {tp} and timestamp "
                    f"{timestamps[tp]}."
                )
            offset = latest[tp]
        resolved[tp] = offset
    return resolved


def delay_batch(
    min_offsets: int, starts: Offsets, latest: Offsets, waited_ms: int, max_delay_ms: int
) -> bool:
    """``minOffsetsPerTrigger``: skip this trigger while fewer offsets than ``min_offsets``
    are new and the last batch ran less than ``max_delay_ms`` ago (``maxTriggerDelay``);
    Spark's ``KafkaMicroBatchStream.delayBatch``."""
    if waited_ms >= max_delay_ms:
        return False
    return sum(end - starts.get(tp, 0) for tp, end in latest.items()) < min_offsets


def offset_ranges(starts: Offsets, ends: Offsets, *, fail_on_data_loss: bool) -> list[KafkaRange]:
    """One range per partition ending in ``ends``; a partition that moved backwards (its
    start past its end: the topic was recreated or the log truncated) is data loss."""
    ranges = []
    for tp in sorted(ends):
        start = starts[tp]
        if ends[tp] < start:
            _data_loss(
                f"Partition {tp}'s offset was changed from {start} to {ends[tp]}, "
                "some data may have been missed",
                fail_on_data_loss,
            )
            continue
        ranges.append(KafkaRange(tp.topic, tp.partition, start, ends[tp]))
    return ranges


def batch_ranges(starts: Offsets, ends: Offsets) -> list[KafkaRange]:
    """A batch query's ranges: a start after its end is the options' fault (or a damaged
    topic), whatever failOnDataLoss says, as Spark's ``KafkaSourceRDD`` asserts."""
    for tp in sorted(ends):
        if starts[tp] > ends[tp]:
            raise PlanError(
                f"Beginning offset {starts[tp]} is after the ending offset {ends[tp]} for "
                f"topic {tp.topic} partition {tp.partition}. You either provided an invalid "
                "fromOffset, or the Kafka topic has been damaged"
            )
    return offset_ranges(starts, ends, fail_on_data_loss=True)


def split_ranges(
    ranges: Iterable[KafkaRange],
    min_partitions: int | None = None,
    max_records_per_partition: int | None = None,
) -> list[KafkaRange]:
    """Spark tasks for these ranges: empty ones dropped, big ones cut (see the module doc)."""
    pieces = [r for r in ranges if r.size > 0]
    if max_records_per_partition is not None:
        pieces = [
            part
            for r in pieces
            for part in _divide(r, math.ceil(r.size / max_records_per_partition))
        ]
    if min_partitions is None or len(pieces) >= min_partitions:
        return pieces
    total = sum(r.size for r in pieces)
    unsplit = [r for r in pieces if _part_count(r.size, total, min_partitions) == 1]
    split_total = total - sum(r.size for r in unsplit)
    split_min = max(min_partitions - len(unsplit), 1)
    result = []
    for r in pieces:
        parts = 1 if r in unsplit else _part_count(r.size, split_total, split_min)
        result.extend(_divide(r, parts))
    return result


def _part_count(size: int, total: int, min_parts: int) -> int:
    # Scala's math.round: half up.
    return max(math.floor(size / total * min_parts + 0.5), 1)


def _divide(r: KafkaRange, parts: int) -> list[KafkaRange]:
    """``parts`` near-equal consecutive ranges; the last takes the rounding."""
    result = []
    remaining, start = r.size, r.from_offset
    for part in range(parts):
        this = remaining // (parts - part)
        remaining -= this
        end = min(start + this, r.until_offset)
        if end > start:
            result.append(KafkaRange(r.topic, r.partition, start, end))
        start = end
    return result


def rate_limit(limit: int, starts: Offsets, latest: Offsets) -> dict[TopicPartition, int]:
    """End offsets reading at most about ``limit`` offsets past ``starts``."""
    sizes = {tp: end - starts[tp] for tp, end in latest.items() if end - starts[tp] > 0}
    total = sum(sizes.values())
    if total < 1:
        return dict(latest)
    ends = {}
    for tp, end in latest.items():
        if tp not in sizes:
            ends[tp] = end
            continue
        prorate = limit * (sizes[tp] / total)
        # Don't completely starve small partitions (Spark's comment, and rule).
        step = math.ceil(prorate) if prorate < 1 else math.floor(prorate)
        ends[tp] = min(end, starts[tp] + step)
    return ends


def stream_starts(
    previous: Offsets, earliest: Offsets, *, fail_on_data_loss: bool
) -> dict[TopicPartition, int]:
    """Where a micro-batch starts in each partition it will read: the previous end, or the
    earliest offset of a partition found since (Spark starts new partitions from earliest).
    A partition of the previous end that is gone is data loss."""
    gone = sorted(set(previous) - set(earliest))
    if gone:
        _data_loss(f"{_names(gone)} are gone. Some data may have been missed", fail_on_data_loss)
    return {tp: previous.get(tp, earliest[tp]) for tp in earliest}


def offsets_to_json(offsets: Offsets) -> dict[str, dict[str, int]]:
    """Spark's ``JsonUtils.partitionOffsets`` shape, topics and partitions in order."""
    document: dict[str, dict[str, int]] = {}
    for tp in sorted(offsets):
        document.setdefault(tp.topic, {})[str(tp.partition)] = offsets[tp]
    return document


def offsets_from_json(document: Mapping[str, Mapping[str, int]]) -> dict[TopicPartition, int]:
    offsets = {}
    for topic, partitions in document.items():
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or type(offset) is not int:
                raise PlanError(f"not a Kafka source offset: {dict(document)!r:.200}")
            offsets[TopicPartition(topic, int(partition))] = offset
    return offsets


def _data_loss(message: str, fail_on_data_loss: bool) -> None:
    if fail_on_data_loss:
        raise DataLossError(
            f"{message}. If you want your query to go on, set the source option "
            "failOnDataLoss to false."
        )


def _names(partitions: Iterable[TopicPartition]) -> str:
    return "[" + ", ".join(str(tp) for tp in sorted(partitions)) + "]"
