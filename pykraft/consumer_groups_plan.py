"""``pykraft consumer-groups --reset-offsets``: where each partition's offset goes (pure).

Kafka 3.9's ``GroupOffsetsResetter`` and ``ConsumerGroupCommand.prepareOffsetsToReset``, as
values: the shell asks the cluster for the log start and end offsets (and the offsets for a
timestamp) of the partitions to reset, and ``plan_reset`` turns them, the group's committed
offsets and the scenario into the new offsets plus Kafka's warnings. One scenario per run:

* ``--to-offset N``, ``--shift-by N`` and ``--from-file``: the asked offset clamped into
  [log start, log end] (``checkOffsetsRange``: "New offset (N) is higher than latest offset
  for topic partition t-0. Value will be set to M."); ``--shift-by`` needs a committed offset;
* ``--to-earliest`` / ``--to-latest``: the log start / end offset;
* ``--to-current``: the committed offset, else the log end;
* ``--to-datetime`` / ``--by-duration``: the first offset at or after the time, else (an empty
  partition or nothing that late) the log end, with Kafka's "Warn: Partition p from topic t is
  empty. Falling back to latest known offset.".

The CSV of ``--export`` / ``--from-file`` is Kafka's ``CsvUtils``: ``topic,partition,offset``
for one group, ``group,topic,partition,offset`` for several. Times parse as Kafka's
``Utils.getDateTime`` (ISO-8601 with milliseconds; no zone means UTC) and ``java.time.Duration``
(``PnDTnHnMn.nS``).
"""

from __future__ import annotations

import enum
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from decimal import Decimal

import attrs

from pykraft.storage.topic_partition import TopicPartition

# Kafka's ListOffsetsResponse.UNKNOWN_OFFSET: no offset for the timestamp.
UNKNOWN_OFFSET = -1


class GroupCommandError(ValueError):
    """A bad option, file or value: printed as Kafka prints it, exit status 1."""


class Scenario(enum.Enum):
    """The reset scenarios, in the order ``prepareOffsetsToReset`` tries them."""

    TO_OFFSET = "to-offset"
    TO_EARLIEST = "to-earliest"
    TO_LATEST = "to-latest"
    SHIFT_BY = "shift-by"
    TO_DATETIME = "to-datetime"
    BY_DURATION = "by-duration"
    FROM_FILE = "from-file"
    TO_CURRENT = "to-current"


@attrs.frozen
class LogOffsets:
    """What the shell read for the partitions to reset (absent: the broker gave none)."""

    log_start: Mapping[TopicPartition, int] = attrs.field(factory=dict)
    log_end: Mapping[TopicPartition, int] = attrs.field(factory=dict)
    # ListOffsets for the scenario's timestamp; UNKNOWN_OFFSET where nothing is that late.
    for_timestamp: Mapping[TopicPartition, int] = attrs.field(factory=dict)


@attrs.frozen
class ResetPlan:
    offsets: dict[TopicPartition, int]
    warnings: tuple[str, ...] = ()


def parse_topic_arg(arg: str) -> tuple[str, tuple[int, ...] | None]:
    """``--topic t`` (every partition) or ``--topic t:0,1`` (Kafka's
    ``parseTopicsWithPartitions``)."""
    if ":" not in arg:
        return arg, None
    parts = arg.split(":")
    if len(parts) != 2 or not parts[0] or not parts[1]:
        raise GroupCommandError(f"Invalid topic arg '{arg}', expected topic name and partitions")
    partitions = []
    for partition in parts[1].split(","):
        try:
            partitions.append(int(partition))
        except ValueError:
            raise GroupCommandError(
                f"Invalid partition '{partition}' specified in topic arg '{arg}''"
            ) from None
    return parts[0], tuple(partitions)


_DATETIME = re.compile(
    r"(\d{4})-(\d{2})-(\d{2})T(\d{2}):(\d{2}):(\d{2})(?:\.(\d{1,3}))?"
    r"(Z|[+-]\d{2}(?::?\d{2})?)?"
)


def parse_datetime_ms(text: str) -> int:
    """Kafka's ``Utils.getDateTime``: ``YYYY-MM-DDTHH:mm:SS.sss`` with an optional zone
    (``Z``, ``+hh:mm``, ``-hhmm``); without one the time is UTC."""
    if "T" not in text:
        raise GroupCommandError(
            "Error parsing timestamp. It does not contain a 'T' according to ISO8601 format"
        )
    match = _DATETIME.fullmatch(text)
    if match is None:
        raise GroupCommandError(f'Unparseable date: "{text}"')
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    millis = int((match.group(7) or "0").ljust(3, "0"))
    try:
        moment = datetime(year, month, day, hour, minute, second, millis * 1000, tzinfo=UTC)
    except ValueError:
        raise GroupCommandError(f'Unparseable date: "{text}"') from None
    zone = match.group(8)
    if zone and zone != "Z":
        digits = zone[1:].replace(":", "")
        offset = timedelta(hours=int(digits[:2]), minutes=int(digits[2:] or "0"))
        moment = moment - offset if zone[0] == "+" else moment + offset
    return int(moment.timestamp() * 1000)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?\d+)D)?(?:T(?:([-+]?\d+)H)?(?:([-+]?\d+)M)?(?:([-+]?\d+)(?:\.(\d{1,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """``java.time.Duration.parse``: ``PnDTnHnMn.nS`` (``PT1H``, ``P1DT2H30M``, ``-PT10S``)."""
    match = _DURATION.fullmatch(text)
    if match is None or text.upper().endswith("T") or match.group(0).upper() in ("P", "-P", "+P"):
        raise GroupCommandError(f"Text cannot be parsed to a Duration: {text}")
    days, hours, minutes = (int(match.group(i) or 0) for i in range(2, 5))
    seconds = match.group(5) or "0"
    millis = int(Decimal(f"{seconds}.{match.group(6) or 0}") * 1000)
    total = ((days * 24 + hours) * 60 + minutes) * 60_000 + millis
    return -total if match.group(1) == "-" else total


def check_offsets_range(requested: Mapping[TopicPartition, int], offsets: LogOffsets) -> ResetPlan:
    """Kafka's ``checkOffsetsRange``: past the log end → the end; before the start → the start."""
    result: dict[TopicPartition, int] = {}
    warnings = []
    for partition, offset in requested.items():
        end = offsets.log_end.get(partition)
        start = offsets.log_start.get(partition)
        if end is not None and offset > end:
            warnings.append(
                f"New offset ({offset}) is higher than latest offset for topic partition "
                f"{partition}. Value will be set to {end}."
            )
            result[partition] = end
        elif start is not None and offset < start:
            warnings.append(
                f"New offset ({offset}) is lower than earliest offset for topic partition "
                f"{partition}. Value will be set to {start}."
            )
            result[partition] = start
        else:
            result[partition] = offset
    return ResetPlan(result, tuple(warnings))


def _log_offset(known: Mapping[TopicPartition, int], partition: TopicPartition, what: str) -> int:
    if partition not in known:
        raise GroupCommandError(f"Error getting {what} of topic partition: {partition}")
    return known[partition]


def plan_reset(
    scenario: Scenario,
    partitions: Sequence[TopicPartition],
    committed: Mapping[TopicPartition, int],
    offsets: LogOffsets,
    value: int = 0,
    from_file: Mapping[TopicPartition, int] | None = None,
) -> ResetPlan:
    """The new offsets of ``partitions`` (``value``: the offset of ``--to-offset``, the shift of
    ``--shift-by``; ``from_file``: the group's rows of ``--from-file``)."""
    if scenario is Scenario.TO_OFFSET:
        return check_offsets_range(dict.fromkeys(partitions, value), offsets)
    if scenario is Scenario.TO_EARLIEST:
        return ResetPlan(
            {p: _log_offset(offsets.log_start, p, "starting offset") for p in partitions}
        )
    if scenario is Scenario.TO_LATEST:
        return ResetPlan({p: _log_offset(offsets.log_end, p, "ending offset") for p in partitions})
    if scenario is Scenario.SHIFT_BY:
        requested = {}
        for partition in partitions:
            if partition not in committed:
                raise GroupCommandError(
                    f"Cannot shift offset for partition {partition} since there is no current "
                    "committed offset"
                )
            requested[partition] = committed[partition] + value
        return check_offsets_range(requested, offsets)
    if scenario in (Scenario.TO_DATETIME, Scenario.BY_DURATION):
        return _by_timestamp(partitions, offsets)
    if scenario is Scenario.FROM_FILE:
        return check_offsets_range(from_file or {}, offsets)
    assert scenario is Scenario.TO_CURRENT, scenario
    return ResetPlan(
        {
            p: committed[p] if p in committed else _log_offset(offsets.log_end, p, "ending offset")
            for p in partitions
        }
    )


def _by_timestamp(partitions: Sequence[TopicPartition], offsets: LogOffsets) -> ResetPlan:
    result = {}
    warnings = []
    for partition in partitions:
        found = offsets.for_timestamp.get(partition, UNKNOWN_OFFSET)
        if found == UNKNOWN_OFFSET:
            warnings.append(
                f"Warn: Partition {partition.partition} from topic {partition.topic} is empty. "
                "Falling back to latest known offset."
            )
            found = _log_offset(offsets.log_end, partition, "offset by timestamp")
        result[partition] = found
    return ResetPlan(result, tuple(warnings))


def _csv_field(value: str) -> str:
    if any(c in value for c in ',"\n\r'):
        return '"' + value.replace('"', '""') + '"'
    return value


def export_csv(plans: Mapping[str, Mapping[TopicPartition, int]], single_group: bool) -> str:
    """``--export``: Kafka's ``exportOffsetsToCsv`` lines, each ending in a newline."""
    lines = []
    for group, offsets in plans.items():
        for partition, offset in offsets.items():
            row = [partition.topic, str(partition.partition), str(offset)]
            if not single_group:
                row.insert(0, group)
            lines.append(",".join(_csv_field(field) for field in row) + "\n")
    return "".join(lines)


def _csv_row(line: str) -> list[str]:
    fields: list[str] = []
    current: list[str] = []
    quoted = False
    index = 0
    while index < len(line):
        char = line[index]
        if quoted:
            if char == '"' and line[index + 1 : index + 2] == '"':
                current.append('"')
                index += 1
            elif char == '"':
                quoted = False
            else:
                current.append(char)
        elif char == '"':
            quoted = True
        elif char == ",":
            fields.append("".join(current))
            current = []
        else:
            current.append(char)
        index += 1
    fields.append("".join(current))
    return fields


def parse_reset_plan(text: str, groups: Collection[str]) -> dict[str, dict[TopicPartition, int]]:
    """``--from-file``: Kafka's ``parseResetPlan``. Three columns name no group and belong to the
    one ``--group`` given; four columns start with the group."""
    rows = [_csv_row(line) for line in text.splitlines() if line.strip()]
    plans: dict[str, dict[TopicPartition, int]] = {}
    for row in rows:
        if len(row) == 3 and len(groups) == 1:
            group, topic, partition, offset = next(iter(groups)), *row
        elif len(row) == 4:
            group, topic, partition, offset = row
        else:
            raise GroupCommandError(f"Invalid reset plan row: {','.join(row)}")
        try:
            key = TopicPartition(topic, int(partition))
            plans.setdefault(group, {})[key] = int(offset)
        except ValueError:
            raise GroupCommandError(f"Invalid reset plan row: {','.join(row)}") from None
    return plans


def partitions_of(
    topic_args: Iterable[str], partition_counts: Mapping[str, int]
) -> list[TopicPartition]:
    """``--topic`` arguments as partitions: named ones first, then every partition of each
    topic named alone (Kafka's ``parseTopicPartitionsToReset``)."""
    named: list[TopicPartition] = []
    whole: list[TopicPartition] = []
    for arg in topic_args:
        topic, partitions = parse_topic_arg(arg)
        if partitions is None:
            whole.extend(TopicPartition(topic, p) for p in range(partition_counts[topic]))
        else:
            named.extend(TopicPartition(topic, p) for p in partitions)
    return named + whole
