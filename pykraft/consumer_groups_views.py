"""What ``pykraft consumer-groups`` prints (pure): Kafka 3.9's ``ConsumerGroupCommand`` tables.

Values in, lines out, so the columns, widths and messages are tested without a cluster:

* ``--list`` with ``--type`` / ``--state``: ``GROUP`` padded to max(15, longest)+10, then ``TYPE``
  and/or ``STATE`` (20 each);
* ``--describe`` (``--offsets``, the default): ``GROUP TOPIC PARTITION CURRENT-OFFSET
  LOG-END-OFFSET LAG CONSUMER-ID HOST CLIENT-ID``; the rows are ``collectGroupsOffsets``'s —
  members with the most partitions first, then the committed partitions no member holds (their
  consumer columns ``-``), a missing value ``-`` (``MISSING_COLUMN_VALUE``), LAG only where both
  offsets are known;
* ``--members`` [``--verbose``]: ``GROUP CONSUMER-ID [GROUP-INSTANCE-ID] HOST CLIENT-ID
  #PARTITIONS`` [``ASSIGNMENT``];
* ``--state``: ``GROUP COORDINATOR (ID) ASSIGNMENT-STRATEGY STATE #MEMBERS``;
* ``--reset-offsets``: ``GROUP TOPIC PARTITION NEW-OFFSET`` (``printOffsetsToReset``);
* the group's state first (``shouldPrintMemberState``): Dead → "Error: Consumer group 'g' does not
  exist.", Empty → "Consumer group 'g' has no active members." (stderr), a rebalance →
  "Warning: Consumer group 'g' is rebalancing." (stderr).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs

from pykraft.storage.topic_partition import TopicPartition

MISSING = "-"  # Kafka's ConsumerGroupCommand.MISSING_COLUMN_VALUE
# The states' names as Kafka prints them (ConsumerGroupState.toString).
STABLE, EMPTY, DEAD = "Stable", "Empty", "Dead"
REBALANCING = ("PreparingRebalance", "CompletingRebalance", "Assigning", "Reconciling")


@attrs.frozen
class Member:
    consumer_id: str
    host: str
    client_id: str
    group_instance_id: str = ""
    assignment: tuple[TopicPartition, ...] = ()


@attrs.frozen
class GroupDescription:
    group: str
    state: str
    members: tuple[Member, ...] = ()
    coordinator: str = MISSING  # "host:port  (id)"
    assignment_strategy: str = ""


@attrs.frozen
class OffsetRow:
    group: str
    topic: str
    partition: int
    current_offset: int | None
    log_end_offset: int | None
    consumer_id: str = MISSING
    host: str = MISSING
    client_id: str = MISSING
    leader_epoch: int | None = None  # of the committed offset (--verbose)

    @property
    def lag(self) -> int | None:
        if self.current_offset is None or self.current_offset == -1:
            return None
        if self.log_end_offset is None:
            return None
        return self.log_end_offset - self.current_offset


@attrs.frozen
class Printed:
    """Lines for stdout and for stderr, in the order Kafka prints them."""

    out: tuple[str, ...] = ()
    err: tuple[str, ...] = ()


def _text(value: int | None) -> str:
    return MISSING if value is None else str(value)


def _row(widths: Sequence[int], values: Sequence[str]) -> str:
    """Java's ``%-Ns`` columns joined by one space, the last one unpadded."""
    padded = [value.ljust(width) for width, value in zip(widths, values[:-1], strict=False)]
    return " ".join([*padded, values[-1]])


def list_with_state(groups: Sequence[tuple[str, str]]) -> list[str]:
    """``--list --state``: Kafka's ``printGroupInfo`` with the STATE column."""
    return group_info_lines([(group, "", state) for group, state in groups], False, True)


def group_info_lines(
    listings: Sequence[tuple[str, str, str]], include_type: bool, include_state: bool
) -> list[str]:
    """``--list`` with ``--type`` and/or ``--state`` (Kafka 3.8+, KIP-848): Kafka's
    ``printGroupInfo``: GROUP padded to max(15, longest)+10, then TYPE and/or STATE (20 each)."""
    width = max((max(15, len(group)) for group, _, _ in listings), default=15) + 10
    lines = []
    for group, group_type, state in [("GROUP", "TYPE", "STATE"), *listings]:
        line = group.ljust(width)
        if include_type:
            line += " " + group_type.ljust(20)
        if include_state:
            line += " " + state.ljust(20)
        lines.append(line)
    return lines


def state_message(group: str, state: str, rows: int | None) -> tuple[Printed, bool]:
    """Kafka's ``shouldPrintMemberState``: what to say first, and whether rows follow."""
    if rows is None:
        return Printed(out=("", f"Error: The consumer group '{group}' does not exist.")), False
    if state == DEAD:
        return Printed(out=("", f"Error: Consumer group '{group}' does not exist.")), False
    if state == EMPTY:
        printed = Printed(err=("", f"Consumer group '{group}' has no active members."))
    elif state in REBALANCING:
        printed = Printed(err=("", f"Warning: Consumer group '{group}' is rebalancing."))
    else:
        printed = Printed()
    return printed, rows > 0


def offset_rows(
    description: GroupDescription,
    committed: Mapping[TopicPartition, int],
    log_end: Mapping[TopicPartition, int],
    leader_epochs: Mapping[TopicPartition, int] | None = None,
) -> list[OffsetRow]:
    """Kafka's ``collectGroupsOffsets``: assigned partitions by member (most partitions first),
    then the committed partitions no member holds; each block sorted by topic, partition."""
    rows: list[OffsetRow] = []
    assigned: set[TopicPartition] = set()
    members = sorted(
        (m for m in description.members if m.assignment), key=lambda m: -len(m.assignment)
    )
    for member in members:
        assigned.update(member.assignment)
        for partition in sorted(member.assignment):
            rows.append(
                OffsetRow(
                    description.group,
                    partition.topic,
                    partition.partition,
                    committed.get(partition),
                    log_end.get(partition),
                    member.consumer_id,
                    member.host,
                    member.client_id,
                    (leader_epochs or {}).get(partition),
                )
            )
    for partition in sorted(set(committed) - assigned):
        rows.append(
            OffsetRow(
                description.group,
                partition.topic,
                partition.partition,
                committed[partition],
                log_end.get(partition),
                leader_epoch=(leader_epochs or {}).get(partition),
            )
        )
    return rows


OFFSET_HEADER = (
    "GROUP",
    "TOPIC",
    "PARTITION",
    "CURRENT-OFFSET",
    "LOG-END-OFFSET",
    "LAG",
    "CONSUMER-ID",
    "HOST",
    "CLIENT-ID",
)


def offsets_table(rows: Sequence[OffsetRow], verbose: bool = False) -> list[str]:
    """Kafka's ``printOffsets`` (a blank line, the header, one line per row, a blank line);
    ``--verbose`` adds LEADER-EPOCH, the committed offset's leader epoch."""
    group_width = max([15, *(len(r.group) for r in rows)])
    topic_width = max([15, *(len(r.topic) for r in rows)])
    consumer_width = max([15, *(len(r.consumer_id) for r in rows)])
    host_width = max([15, *(len(r.host) for r in rows)])
    epoch = [15] if verbose else []
    widths = [group_width, topic_width, 10, *epoch, 15, 15, 15, consumer_width, host_width]
    header = list(OFFSET_HEADER)
    if verbose:
        header.insert(3, "LEADER-EPOCH")
    lines = ["", _row(widths, header)]
    for r in rows:
        values = [
            r.group,
            r.topic,
            str(r.partition),
            _text(r.current_offset),
            _text(r.log_end_offset),
            _text(r.lag),
            r.consumer_id,
            r.host,
            r.client_id,
        ]
        if verbose:
            values.insert(3, _text(r.leader_epoch))
        lines.append(_row(widths, values))
    return [*lines, ""]


def assignment_text(assignment: Sequence[TopicPartition]) -> str:
    """``--members --verbose``'s ASSIGNMENT: ``topic(0,1), other(2)``, topics sorted."""
    if not assignment:
        return MISSING
    by_topic: dict[str, list[int]] = {}
    for partition in assignment:
        by_topic.setdefault(partition.topic, []).append(partition.partition)
    return ", ".join(
        f"{topic}({','.join(str(p) for p in sorted(parts))})"
        for topic, parts in sorted(by_topic.items())
    )


def members_table(description: GroupDescription, verbose: bool) -> list[str]:
    """Kafka 3.9's ``printMembers``."""
    members = description.members
    with_instance = any(m.group_instance_id for m in members)
    widths = [
        max([15, len(description.group)]),
        max([15, *(len(m.consumer_id) for m in members)]),
        *([max([17, *(len(m.group_instance_id) for m in members)])] if with_instance else []),
        max([15, *(len(m.host) for m in members)]),
        max([15, *(len(m.client_id) for m in members)]),
        15,
    ]
    header = ["GROUP", "CONSUMER-ID", *(["GROUP-INSTANCE-ID"] if with_instance else [])]
    header += ["HOST", "CLIENT-ID", "#PARTITIONS"]
    if verbose:
        header.append("ASSIGNMENT")
    lines = ["", _padded(widths, header, verbose)]
    for m in members:
        values = [description.group, m.consumer_id]
        values += [m.group_instance_id] if with_instance else []
        values += [m.host, m.client_id, str(len(m.assignment))]
        if verbose:
            values.append(assignment_text(m.assignment))
        lines.append(_padded(widths, values, verbose))
    return [*lines, ""]


def _padded(widths: Sequence[int], values: Sequence[str], verbose: bool) -> str:
    """Kafka's members format ends every padded column with a space (``%-15s ``)."""
    cells = [value.ljust(width) + " " for width, value in zip(widths, values, strict=False)]
    if verbose:
        cells.append(values[-1])
    return "".join(cells)


def state_table(description: GroupDescription) -> list[str]:
    """Kafka's ``printStates`` (non-verbose)."""
    group_width = max(15, len(description.group))
    coordinator_width = max(25, len(description.coordinator))
    widths = [group_width, coordinator_width, 20, 20]
    strategy = description.assignment_strategy or MISSING
    return [
        "",
        _row(widths, ["GROUP", "COORDINATOR (ID)", "ASSIGNMENT-STRATEGY", "STATE", "#MEMBERS"]),
        _row(
            widths,
            [
                description.group,
                description.coordinator,
                strategy,
                description.state,
                str(len(description.members)),
            ],
        ),
        "",
    ]


def reset_table(plans: Mapping[str, Mapping[TopicPartition, int]]) -> list[str]:
    """Kafka's ``printOffsetsToReset``: no header when no group was reset."""
    group_width = max([15, *(len(g) for g in plans)])
    topic_width = max([15, *(len(p.topic) for o in plans.values() for p in o)])
    widths = [group_width, topic_width, 10]
    lines = []
    if plans:
        lines += ["", _row(widths, ["GROUP", "TOPIC", "PARTITION", "NEW-OFFSET"])]
    for group, offsets in plans.items():
        for partition, offset in sorted(offsets.items()):
            lines.append(
                _row(widths, [group, partition.topic, str(partition.partition), str(offset)])
            )
    return [*lines, ""]


def delete_groups_lines(results: Mapping[str, str | None]) -> list[str]:
    """Kafka's ``deleteGroups`` report (``None``: deleted, else the error's text)."""
    deleted = [g for g, error in results.items() if error is None]
    failed = {g: error for g, error in results.items() if error is not None}
    quoted = ", ".join(f"'{g}'" for g in deleted)
    if not failed:
        return [f"Deletion of requested consumer groups ({quoted}) was successful."]
    lines = ["", "Error: Deletion of some consumer groups failed:"]
    lines += [f"* Group '{g}' could not be deleted due to: {error}" for g, error in failed.items()]
    if deleted:
        lines += ["", f"These consumer groups were deleted successfully: {quoted}"]
    return lines


def delete_offsets_lines(
    group: str, top_level: str | None, results: Mapping[TopicPartition, str | None]
) -> list[str]:
    """Kafka's ``deleteOffsets`` report: the outcome, then ``TOPIC PARTITION STATUS``."""
    if top_level is None:
        lines = [f"Request succeeded for deleting offsets from group {group}."]
    else:
        lines = ["", f"Error: {top_level}"]
    topic_width = max([15, *(len(p.topic) for p in results)])

    def row(topic: str, partition: str, status: str) -> str:
        # Kafka's "%-Ns %-10s %-15s": every column padded.
        return f"{topic.ljust(topic_width)} {partition.ljust(10)} {status.ljust(15)}"

    lines += ["", row("TOPIC", "PARTITION", "STATUS")]
    for partition, error in sorted(results.items(), key=lambda i: (i[0].topic, i[0].partition)):
        status = "Successful" if error is None else f"Error: {error}"
        shown = str(partition.partition) if partition.partition >= 0 else MISSING
        lines.append(row(partition.topic, shown, status))
    return lines
