"""Planning a ``pykraft-log`` scan: which segments of which partitions, and which offsets.

Theory of operation: a broker's ``log.dirs`` hold one directory per partition replica
(``topic-partition``) with segments ``<base offset, 20 digits>.log``; each log dir also holds
``replication-offset-checkpoint`` (high watermarks) and ``log-start-offset-checkpoint``
(DESIGN.md §3.3). ``discover_partitions`` finds the partitions and their readable range
``[log_start_offset, high_watermark)``; ``plan_splits`` turns them, a ``LogFilter`` and optional
per-partition offset ranges into one ``SegmentSplit`` per segment that can hold wanted offsets.

Given every broker's log dirs, a partition is found once per replica and one replica is read:
the one with the highest high watermark (``export.replica_choice`` has the rule and why it is
safe; ``export.log_dirs`` tells brokers apart by their ``meta.properties``).

By default nothing at or above the checkpointed high watermark is read: those records are not
committed (Kafka consumers never see them) and may still be truncated. A partition with no
checkpoint entry has a high watermark of 0 (Kafka initialises it so, ``Log.highWatermark``),
so nothing is read. ``ignore_high_watermark`` reads to the end of the log (of the replica with
the largest log end offset, when there are several). Records below the log start offset
(after DeleteRecords) are never read, as Kafka never serves them.

Isolation (``export.isolation``): ``read_committed``, the default, also stops each partition
at its last stable offset and hands every split the aborted transactions overlapping it, which
the reader drops (``export.txn_scan`` reads both from the partition's files);
``read_uncommitted`` reads to the high watermark. With ``ignore_high_watermark`` the last
stable offset is taken at the log end: every transaction with a marker in the log is decided.

``LogFilter.push`` is the pushdown decision: a predicate on ``topic``, ``partition`` or
``offset`` that can be applied exactly while planning and reading is absorbed (returns the
narrowed filter); anything else returns None and Spark evaluates it. Pure: no pyspark here.
"""

from __future__ import annotations

import enum
import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from pykraft.export.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_NAMES,
    ISOLATION_LEVEL_OPTION,
    KAFKA_ISOLATION_LEVEL_OPTION,
    IsolationLevel,
    overlapping,
    parse_isolation_level,
)
from pykraft.export.log_dirs import (
    LogScanError,
    check_log_dirs,
    list_segments,
    measure_log_end_offset,
    partition_dir,
)
from pykraft.export.replica_choice import ReplicaCandidate, choose_replica, same_broker_duplicate
from pykraft.export.segment_reader import SegmentSplit
from pykraft.export.txn_scan import aborted_txns, read_txn_state
from pykraft.storage.aborted_txn import AbortedTxn
from pykraft.storage.checkpoints import (
    LOG_START_OFFSET_CHECKPOINT,
    REPLICATION_CHECKPOINT,
    read_offset_checkpoint,
)
from pykraft.storage.topic_partition import TopicPartition


@attrs.frozen(order=True)
class PartitionLocation:
    """A partition replica found in a log dir and the offsets a scan may read from it."""

    topic_partition: TopicPartition
    directory: Path
    log_start_offset: int
    high_watermark: int


class Op(enum.Enum):
    EQ = "="
    IN = "in"
    GT = ">"
    GE = ">="
    LT = "<"
    LE = "<="


@attrs.frozen
class Predicate:
    """``column op values`` (one value except for IN), as Spark hands filters down."""

    column: str
    op: Op
    values: tuple[Any, ...]


@attrs.frozen
class LogFilter:
    """The conjunction of absorbed predicates: topics, partitions, offsets in [min, max)."""

    topics: frozenset[str] | None = None
    partitions: frozenset[int] | None = None
    min_offset: int = 0
    max_offset: int | None = None  # exclusive

    def push(self, predicate: Predicate) -> LogFilter | None:
        """The filter narrowed by ``predicate``, or None when it cannot be applied exactly."""
        if predicate.column in ("topic", "partition") and predicate.op in (Op.EQ, Op.IN):
            return self._push_set(predicate)
        if predicate.column == "offset" and len(predicate.values) == 1:
            value = predicate.values[0]
            if type(value) is not int:
                return None
            return self._push_offset(predicate.op, value)
        return None

    def _push_set(self, predicate: Predicate) -> LogFilter | None:
        kind = str if predicate.column == "topic" else int
        if not all(type(value) is kind for value in predicate.values):
            return None
        wanted = frozenset(predicate.values)
        if predicate.column == "topic":
            topics = wanted if self.topics is None else self.topics & wanted
            return attrs.evolve(self, topics=topics)
        partitions = wanted if self.partitions is None else self.partitions & wanted
        return attrs.evolve(self, partitions=partitions)

    def _push_offset(self, op: Op, value: int) -> LogFilter | None:
        low, high = {
            Op.EQ: (value, value + 1),
            Op.GT: (value + 1, None),
            Op.GE: (value, None),
            Op.LT: (None, value),
            Op.LE: (None, value + 1),
        }.get(op, (None, None))
        if low is None and high is None:
            return None
        min_offset = self.min_offset if low is None else max(self.min_offset, low)
        max_offset = self.max_offset
        if high is not None:
            max_offset = high if max_offset is None else min(max_offset, high)
        return attrs.evolve(self, min_offset=min_offset, max_offset=max_offset)

    def admits(self, tp: TopicPartition) -> bool:
        return (self.topics is None or tp.topic in self.topics) and (
            self.partitions is None or tp.partition in self.partitions
        )


def discover_partitions(
    log_dirs: Sequence[Path], *, ignore_high_watermark: bool = False
) -> list[PartitionLocation]:
    """Every live partition under ``log_dirs``, one replica each, with its readable range.

    ``-delete`` and ``-future`` directories are skipped (being deleted / a replica being moved:
    the live directory is authoritative) and so are names that are not ``topic-partition``, as
    Kafka's LogManager does. A partition found in several log dirs (every broker's log dirs
    given: replication factor > 1) is read from one replica, chosen by
    ``export.replica_choice`` (highest high watermark, or largest log end offset when
    ``ignore_high_watermark``); found twice on one broker (same ``node.id``), it is an error,
    as in Kafka. So are a log dir given twice and log dirs of different clusters.
    """
    identities = check_log_dirs(log_dirs)
    found: dict[TopicPartition, list[_Replica]] = {}
    for index, log_dir in enumerate(log_dirs):
        for replica in _scan_log_dir(log_dir, index, identities[index].node_id):
            found.setdefault(replica.topic_partition, []).append(replica)
    return sorted(_choose(replicas, ignore_high_watermark) for replicas in found.values())


@attrs.frozen
class _Replica:
    """A partition directory found in a log dir, before the log end offset is measured."""

    topic_partition: TopicPartition
    directory: Path
    log_dir_index: int
    node_id: int | None
    log_start_offset: int
    high_watermark: int


def _scan_log_dir(log_dir: Path, index: int, node_id: int | None) -> Iterator[_Replica]:
    high_watermarks = read_offset_checkpoint(log_dir / REPLICATION_CHECKPOINT)
    log_starts = read_offset_checkpoint(log_dir / LOG_START_OFFSET_CHECKPOINT)
    for path in sorted(log_dir.iterdir()):
        tp = partition_dir(path)
        if tp is not None:
            yield _Replica(
                tp, path, index, node_id, log_starts.get(tp, 0), high_watermarks.get(tp, 0)
            )


def _choose(replicas: list[_Replica], ignore_high_watermark: bool) -> PartitionLocation:
    """The one replica of a partition to read; measures log end offsets only when there is
    a choice to make (it walks the last segment's batch headers)."""
    if len(replicas) > 1:
        candidates = [
            ReplicaCandidate(
                r.topic_partition,
                r.directory,
                r.log_dir_index,
                r.node_id,
                r.log_start_offset,
                r.high_watermark,
                measure_log_end_offset(r.directory, r.log_start_offset),
            )
            for r in replicas
        ]
        duplicate = same_broker_duplicate(candidates)
        if duplicate is not None:
            first, second = duplicate
            raise LogScanError(
                f"partition {first.topic_partition} is in two log dirs of broker "
                f"{first.node_id}: {first.directory} and {second.directory} (Kafka refuses to "
                "start so; remove the copy in the log dir that failed)"
            )
        chosen = choose_replica(candidates, ignore_high_watermark=ignore_high_watermark)
        return PartitionLocation(
            chosen.topic_partition, chosen.directory, chosen.log_start_offset, chosen.high_watermark
        )
    (only,) = replicas
    return PartitionLocation(
        only.topic_partition, only.directory, only.log_start_offset, only.high_watermark
    )


def plan_splits(
    partitions: Iterable[PartitionLocation],
    log_filter: LogFilter,
    *,
    ignore_high_watermark: bool = False,
    offset_ranges: Mapping[TopicPartition, tuple[int, int | None]] | None = None,
    isolation_level: IsolationLevel = DEFAULT_ISOLATION_LEVEL,
) -> list[SegmentSplit]:
    """One split per segment that may hold offsets the scan wants, in partition/offset order.

    ``offset_ranges`` (Kafka source's startingOffsets/endingOffsets) narrows each partition to
    ``[start, end)``; partitions missing from a given mapping are not read. Under
    ``read_committed`` the end is at most the last stable offset, and each split carries the
    aborted transactions overlapping it.
    """
    splits: list[SegmentSplit] = []
    for location in partitions:
        tp = location.topic_partition
        if not log_filter.admits(tp):
            continue
        bounds = _partition_bounds(location, log_filter, ignore_high_watermark, offset_ranges)
        if bounds is None:
            continue
        start, end = bounds
        aborted: tuple[AbortedTxn, ...] = ()
        if isolation_level is IsolationLevel.READ_COMMITTED:
            bound = None if ignore_high_watermark else location.high_watermark
            state = read_txn_state(location.directory, location.log_start_offset, bound)
            end = state.last_stable_offset if end is None else min(end, state.last_stable_offset)
            if start >= end:
                continue
            aborted = aborted_txns(location.directory, state, start, end)
        splits.extend(_segment_splits(location, start, end, aborted))
    return splits


def _partition_bounds(
    location: PartitionLocation,
    log_filter: LogFilter,
    ignore_high_watermark: bool,
    offset_ranges: Mapping[TopicPartition, tuple[int, int | None]] | None,
) -> tuple[int, int | None] | None:
    """The ``[start, end)`` to read from a partition, or None when it is empty."""
    start = max(location.log_start_offset, log_filter.min_offset)
    ends = [log_filter.max_offset]
    if not ignore_high_watermark:
        ends.append(location.high_watermark)
    if offset_ranges is not None:
        if location.topic_partition not in offset_ranges:
            return None
        range_start, range_end = offset_ranges[location.topic_partition]
        start = max(start, range_start)
        ends.append(range_end)
    bounded = [end for end in ends if end is not None]
    end = min(bounded) if bounded else None
    if end is not None and start >= end:
        return None
    return start, end


def _segment_splits(
    location: PartitionLocation, start: int, end: int | None, aborted: tuple[AbortedTxn, ...]
) -> Iterator[SegmentSplit]:
    segments = list_segments(location.directory)
    tp = location.topic_partition
    for index, (base_offset, path) in enumerate(segments):
        next_base = segments[index + 1][0] if index + 1 < len(segments) else None
        if next_base is not None and next_base <= start:
            continue  # every offset of this segment is below the range
        if end is not None and base_offset >= end:
            break
        # A split ends at the next segment's base offset, so splits never overlap: the
        # cleaner may merge this segment with the next into one file named after this one
        # (storage/cleaner.py, Kafka's LogCleaner.groupSegmentsBySize) between two tasks'
        # reads, and the next segment's records belong to the next split only.
        high = end if next_base is None else next_base if end is None else min(end, next_base)
        aborted_here = aborted
        if aborted and high is not None:  # those with records in this segment's part
            aborted_here = overlapping(aborted, max(start, base_offset), high)
        yield SegmentSplit(
            str(path), tp.topic, tp.partition, base_offset, start, high, aborted_here
        )


def parse_offset_ranges(
    starting: str | None, ending: str | None
) -> dict[TopicPartition, tuple[int, int | None]] | None:
    """Kafka Spark source's ``startingOffsets``/``endingOffsets`` JSON, per partition.

    ``{"topic": {"0": 23, "1": -2}}``: -2 means earliest, -1 latest (here: no bound). Only
    partitions named in ``startingOffsets`` are read when it is given; ``endingOffsets``
    bounds those it names. None when neither option is given.
    """
    if starting is None and ending is None:
        return None
    starts = _offsets_json("startingOffsets", starting) if starting is not None else None
    ends = _offsets_json("endingOffsets", ending) if ending is not None else {}
    keys = starts.keys() if starts is not None else ends.keys()
    ranges: dict[TopicPartition, tuple[int, int | None]] = {}
    for tp in keys:
        start = starts[tp] if starts is not None else -2
        end = ends.get(tp, -1)
        ranges[tp] = (0 if start == -2 else start, None if end == -1 else end)
        if start == -1:
            raise LogScanError(f"startingOffsets for {tp}: -1 (latest) reads nothing in a batch")
    return ranges


def isolation_level_option(options: Mapping[str, str]) -> IsolationLevel:
    """The scan's isolation from its (lower-cased) options: ``isolation.level``, or
    ``kafka.isolation.level`` as Spark's Kafka source spells consumer properties; both given
    must agree. Default ``read_committed``."""
    given = {
        name: options[name]
        for name in (ISOLATION_LEVEL_OPTION, KAFKA_ISOLATION_LEVEL_OPTION)
        if name in options
    }
    if len(set(given.values())) > 1:
        raise LogScanError(
            f"{ISOLATION_LEVEL_OPTION}={given[ISOLATION_LEVEL_OPTION]!r} and "
            f"{KAFKA_ISOLATION_LEVEL_OPTION}={given[KAFKA_ISOLATION_LEVEL_OPTION]!r} disagree"
        )
    if not given:
        return DEFAULT_ISOLATION_LEVEL
    name, text = next(iter(given.items()))
    level = parse_isolation_level(text)
    if level is None:
        raise LogScanError(
            f"{name} must be one of {', '.join(ISOLATION_LEVEL_NAMES)}, got {text!r}"
        )
    return level


def _offsets_json(option: str, text: str) -> dict[TopicPartition, int]:
    try:
        document = json.loads(text)
    except ValueError:
        raise LogScanError(f"{option} is not JSON: {text!r:.80}") from None
    if type(document) is not dict:
        raise LogScanError(
            f'{option} must be {{"topic": {{"partition": offset}}}}, got {text!r:.80}'
        )
    offsets: dict[TopicPartition, int] = {}
    for topic, partitions in document.items():
        if type(partitions) is not dict:
            raise LogScanError(f"{option}: topic {topic!r} must map partitions to offsets")
        for partition, offset in partitions.items():
            if not str(partition).isdigit() or type(offset) is not int or offset < -2:
                raise LogScanError(
                    f"{option}: {topic}/{partition} needs a partition number and an offset "
                    f">= -2, got {offset!r}"
                )
            offsets[TopicPartition(topic, int(partition))] = offset
    return offsets
