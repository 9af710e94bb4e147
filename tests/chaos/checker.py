"""The chaos checker: what a run produced against what the cluster kept.

Two questions, answered by pure functions over plain values (the gathering — a consumer reading
every partition from the final leaders, segment files read with ``storage.record_batch`` — lives
at the bottom of this module and in the harness):

1. **History** (Jepsen's "queue" checker, narrowed to Kafka's promise for ``acks=all``, RF=3,
   ``min.insync.replicas=2``): every acknowledged value is in the final log *at the offset it was
   acknowledged at* (``lost`` otherwise, and ``absent`` when it is nowhere at all); values in the
   log more than once are ``duplicated`` (a non-idempotent producer's retry may do that);
   values in a partition whose producer sequence number steps back behind one already seen,
   duplicates aside, are ``reordered``; a record a consumer read during the run that the final
   log no longer has at that offset is a ``consumer_mismatch`` (consumers only see records below
   the high watermark, which are committed, so this is data loss too).
2. **Replicas** (DESIGN.md §5, KIP-101/KIP-279): below its high watermark every replica holds
   exactly the leader's batches, byte for byte, with no hole from the log start offset.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from pykraft.storage.record_batch import LOG_OVERHEAD, validate_batch
from pykraft.storage.records import iter_records

VALUE_PREFIX = b"chaos-"
EXAMPLES_MAX = 5  # how many of each kind of anomaly the report spells out


def encode_value(sequence: int) -> bytes:
    """The unique value the producer sends as its ``sequence``-th record."""
    return VALUE_PREFIX + b"%09d" % sequence


def sequence_of(value: bytes) -> int:
    assert value.startswith(VALUE_PREFIX), f"not a chaos value: {value!r}"
    return int(value[len(VALUE_PREFIX) :])


@attrs.frozen
class Placed:
    """A value at a partition and offset (acknowledged by the broker, or read back)."""

    partition: int
    offset: int
    value: bytes


@attrs.frozen
class Batch:
    """One stored batch: its offsets and its bytes as the segment file holds them."""

    base_offset: int
    last_offset: int
    data: bytes


@attrs.frozen(kw_only=True)
class HistoryReport:
    acknowledged: int
    sent: int
    in_log: int
    lost: tuple[Placed, ...]
    absent: tuple[Placed, ...]
    duplicated: tuple[bytes, ...]
    reordered: tuple[Placed, ...]
    consumer_mismatches: tuple[Placed, ...]
    consumed: int
    unacknowledged_in_log: int


@attrs.frozen(kw_only=True)
class ReplicaDivergence:
    partition: int
    broker_id: int
    detail: str


def check_history(
    *,
    sent: int,
    acknowledged: Sequence[Placed],
    final_log: Mapping[int, Sequence[Placed]],
    consumed: Sequence[Placed],
) -> HistoryReport:
    """Compare what was acknowledged and consumed with the final log of every partition."""
    at_offset = {(p.partition, p.offset): p.value for log in final_log.values() for p in log}
    counts = Counter(p.value for log in final_log.values() for p in log)
    lost = tuple(a for a in acknowledged if at_offset.get((a.partition, a.offset)) != a.value)
    absent = tuple(a for a in lost if counts[a.value] == 0)
    acked_values = {a.value for a in acknowledged}
    mismatches = tuple(c for c in consumed if at_offset.get((c.partition, c.offset)) != c.value)
    return HistoryReport(
        acknowledged=len(acknowledged),
        sent=sent,
        in_log=len(at_offset),
        lost=lost,
        absent=absent,
        duplicated=tuple(sorted(v for v, n in counts.items() if n > 1)),
        reordered=tuple(r for log in final_log.values() for r in reordered_in(log)),
        consumer_mismatches=mismatches,
        consumed=len(consumed),
        unacknowledged_in_log=sum(1 for v in counts if v not in acked_values),
    )


def reordered_in(log: Sequence[Placed]) -> list[Placed]:
    """Records whose producer sequence is below one already seen in the partition (a value's
    second copy is a duplicate, not a reordering)."""
    seen: set[bytes] = set()
    highest = -1
    out = []
    for placed in log:
        if placed.value in seen:
            continue
        seen.add(placed.value)
        sequence = sequence_of(placed.value)
        if sequence < highest:
            out.append(placed)
        highest = max(highest, sequence)
    return out


def replica_divergence(
    leader: Sequence[Batch], replica: Sequence[Batch], high_watermark: int
) -> str | None:
    """Why ``replica``'s log below ``high_watermark`` is not exactly ``leader``'s, or None."""
    mine = [b for b in replica if b.base_offset < high_watermark]
    theirs = [b for b in leader if b.base_offset < high_watermark]
    if mine and mine[-1].last_offset >= high_watermark:
        # The high watermark never falls inside a batch (Kafka acknowledges whole batches).
        return f"batch {mine[-1].base_offset}-{mine[-1].last_offset} straddles {high_watermark}"
    expected = theirs[0].base_offset if theirs else 0
    for batch in mine:
        if batch.base_offset != expected:
            return f"hole or overlap: batch at {batch.base_offset}, expected {expected}"
        expected = batch.last_offset + 1
    if expected != high_watermark:
        return f"log ends at {expected}, below the high watermark {high_watermark}"
    for index, (ours, leaders) in enumerate(zip(mine, theirs, strict=False)):
        if ours != leaders:
            return (
                f"batch {index} ({ours.base_offset}-{ours.last_offset}) differs from the "
                f"leader's ({leaders.base_offset}-{leaders.last_offset})"
            )
    if len(mine) > len(theirs):
        return f"holds {len(mine) - len(theirs)} batch(es) below {high_watermark} the leader lacks"
    return None


def compare_replicas(
    *,
    partition: int,
    leader_id: int,
    logs: Mapping[int, Sequence[Batch]],
    high_watermarks: Mapping[int, int],
) -> list[ReplicaDivergence]:
    """Every replica (the leader included) against the leader, below its own high watermark."""
    out = []
    for broker_id, batches in sorted(logs.items()):
        detail = replica_divergence(logs[leader_id], batches, high_watermarks[broker_id])
        if detail is not None:
            out.append(ReplicaDivergence(partition=partition, broker_id=broker_id, detail=detail))
    return out


def format_report(
    history: HistoryReport, divergences: Sequence[ReplicaDivergence], converged: bool
) -> str:
    def examples(items: Iterable[object]) -> str:
        listed = list(items)[:EXAMPLES_MAX]
        return f"  e.g. {listed}" if listed else ""

    return "\n".join(
        [
            f"sent {history.sent}, acknowledged {history.acknowledged}, in the final log "
            f"{history.in_log} ({history.unacknowledged_in_log} of them never acknowledged), "
            f"consumed during the run {history.consumed}",
            f"lost (acknowledged, not at its offset): {len(history.lost)}{examples(history.lost)}",
            f"  of which absent from every offset: {len(history.absent)}",
            f"duplicated: {len(history.duplicated)}{examples(history.duplicated)}",
            f"reordered: {len(history.reordered)}{examples(history.reordered)}",
            f"consumed but not in the final log: {len(history.consumer_mismatches)}"
            f"{examples(history.consumer_mismatches)}",
            f"divergent replicas: {len(divergences)}{examples(divergences)}",
            f"replicas converged (same log end offset and high watermark, full ISR): {converged}",
        ]
    )


# ---------------------------------------------------------------- reading what brokers stored


def segment_batches(partition_dir: Path) -> list[Batch]:
    """The complete batches in a replica's segment files, in offset order, CRC-checked; a batch
    still being written at the tail is left out."""
    batches: list[Batch] = []
    for segment in sorted(partition_dir.glob("*.log")):
        data = segment.read_bytes()
        position = 0
        while position + LOG_OVERHEAD <= len(data):
            length = int.from_bytes(data[position + 8 : position + 12], "big", signed=True)
            end = position + LOG_OVERHEAD + length
            if length <= 0 or end > len(data):
                break
            header = validate_batch(data, position)
            batches.append(Batch(header.base_offset, header.last_offset, data[position:end]))
            position = end
    return batches


def batch_values(partition: int, batches: Iterable[Batch]) -> list[Placed]:
    return [
        Placed(partition, record.offset, record.value or b"")
        for batch in batches
        for record in iter_records(batch.data)
    ]
