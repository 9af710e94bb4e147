"""The chaos checker: what the brokers stored, and the report of a run.

What clients saw (acknowledged writes lost, duplicated or reordered, records read and later
gone) is judged by ``tests.chaos.history_checker`` over the run's history, closed by a read of
every partition's final log. This module answers the other question, by pure functions over
plain values (the gathering — segment files read with ``storage.record_batch`` — is at the
bottom):

**Replicas** (DESIGN.md §5, KIP-101/KIP-279): below its high watermark every replica holds
exactly the leader's batches, byte for byte, with no hole from the log start offset.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path

import attrs

from pykraft.storage.record_batch import LOG_OVERHEAD, validate_batch
from pykraft.storage.records import iter_records
from tests.chaos.history_checker import EXAMPLES_MAX, Report

VALUE_PREFIX = b"chaos-"


def encode_value(sequence: int) -> bytes:
    """The unique value the producer sends as its ``sequence``-th record."""
    return VALUE_PREFIX + b"%09d" % sequence


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
class ReplicaDivergence:
    partition: int
    broker_id: int
    detail: str


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
    history: Report, divergences: Sequence[ReplicaDivergence], converged: bool
) -> str:
    listed = list(divergences)[:EXAMPLES_MAX]
    return "\n".join(
        [
            history.render(),
            f"divergent replicas: {len(divergences)}" + (f"  e.g. {listed}" if listed else ""),
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
