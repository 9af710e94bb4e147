"""The replicated state machine of the metadata quorum, as a pure function.

Theory of operation
-------------------
pysyncobj delivers committed Raft entries, in Raft-index order, to ``MetadataRaft.apply_batch``
on its own thread. That method calls ``apply_entry(state, raft_index, blob)`` here, which returns
the next state and an ``ApplyResult``; nothing in this module reads a clock, draws a random
number, iterates a set, or raises (DESIGN.md §3.1: an exception inside apply wedges pysyncobj
forever; a non-deterministic apply makes replicas diverge).

Rules, checked in this order:
  1. ``raft_index <= state.last_raft_index``: the entry was applied before (pysyncobj replays
     its journal after a restart) -> DUPLICATE, state unchanged.
  2. The blob does not decode (``quorum.raft_batch``) or a record does not decode
     (``metadata.compact_codec``; ``metadata.codec`` for format-1 entries) -> INVALID.
  3. ``expected_last_offset`` differs from the state's last offset: the proposer computed the
     records against an image that is no longer current -> STALE; the proposer recomputes
     against the new image and proposes again.
  4. Replaying the records onto the image fails -> INVALID (nothing of the batch is kept).
  5. Otherwise APPLIED: the records get offsets ``next_offset .. next_offset + n - 1``.
Every outcome records ``raft_index`` as applied, so each entry has exactly one outcome no matter
how often it is delivered. Metadata offsets are counted here, never taken from the Raft index:
pysyncobj's own no-op and rejected entries leave gaps in Raft indexes, not in metadata offsets.
"""

from __future__ import annotations

import enum

import attrs

from pykraft.metadata import compact_codec
from pykraft.metadata.codec import MetadataCodecError
from pykraft.metadata.codec import decode_records as decode_json_lines
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord
from pykraft.quorum.log_window import CommittedBatch
from pykraft.quorum.raft_batch import AnyBatch, BatchCodecError, CompactBatch, decode_batch


class ApplyStatus(enum.Enum):
    APPLIED = "APPLIED"
    STALE = "STALE"
    INVALID = "INVALID"
    DUPLICATE = "DUPLICATE"


@attrs.frozen(kw_only=True)
class ApplyResult:
    status: ApplyStatus
    # For APPLIED: the offsets the records got. Otherwise -1.
    base_offset: int = -1
    last_offset: int = -1
    # The state's last offset after this entry (the offset a retry must expect).
    log_last_offset: int = -1
    message: str = ""

    @property
    def applied(self) -> bool:
        return self.status is ApplyStatus.APPLIED


@attrs.frozen(kw_only=True)
class MetadataState:
    """Everything the replicated state machine holds (and a snapshot must carry)."""

    image: MetadataImage = MetadataImage.EMPTY
    # Invariant: next_offset == image.offset + 1.
    next_offset: int = 0
    # The Raft index of the last entry given an outcome (0: none yet; pysyncobj starts at 1).
    last_raft_index: int = 0

    @property
    def last_offset(self) -> int:
        return self.next_offset - 1


@attrs.frozen(kw_only=True)
class Applied:
    state: MetadataState
    result: ApplyResult
    # Set only for APPLIED: what the retained window and long polls receive.
    batch: CommittedBatch | None = None


def apply_entry(
    state: MetadataState,
    raft_index: int,
    blob: object,
    decoded: tuple[MetadataRecord, ...] | None = None,
) -> Applied:
    """Give the Raft entry at ``raft_index`` its one outcome. Never raises.

    ``decoded`` may carry the records the proposer encoded into ``blob`` (the leader keeps them
    to skip decoding its own proposals); it must equal what decoding ``blob`` gives, which the
    codec's round-trip guarantee makes true.
    """
    if raft_index <= state.last_raft_index:
        return Applied(
            state=state,
            result=_result(
                state, ApplyStatus.DUPLICATE, f"raft index {raft_index} already applied"
            ),
        )
    consumed = attrs.evolve(state, last_raft_index=raft_index)
    try:
        if not isinstance(blob, bytes):
            raise BatchCodecError(f"a batch is bytes, got {type(blob).__name__}")
        batch = decode_batch(blob)
    except BatchCodecError as error:
        return Applied(state=consumed, result=_result(consumed, ApplyStatus.INVALID, str(error)))
    if batch.expected_last_offset != state.last_offset:
        message = (
            f"proposal expected the log to end at offset {batch.expected_last_offset}, "
            f"it ends at {state.last_offset}"
        )
        return Applied(state=consumed, result=_result(consumed, ApplyStatus.STALE, message))
    try:
        return _replay(consumed, batch, decoded)
    except Exception as error:  # apply must never raise (DESIGN.md §3.1): reject instead
        message = f"batch rejected: {type(error).__name__}: {error}"
        return Applied(state=consumed, result=_result(consumed, ApplyStatus.INVALID, message))


def _replay(
    state: MetadataState, batch: AnyBatch, decoded: tuple[MetadataRecord, ...] | None
) -> Applied:
    count = batch.record_count if isinstance(batch, CompactBatch) else len(batch.records)
    try:
        records = (
            decoded if decoded is not None and len(decoded) == count else decode_records(batch)
        )
    except MetadataCodecError as error:
        return Applied(state=state, result=_result(state, ApplyStatus.INVALID, str(error)))
    base_offset = state.next_offset
    image = replay_records(state.image, records, base_offset, batch.epoch)
    next_state = MetadataState(
        image=image,
        next_offset=base_offset + len(records),
        last_raft_index=state.last_raft_index,
    )
    committed = CommittedBatch(
        base_offset=base_offset,
        epoch=batch.epoch,
        append_time_ms=batch.append_time_ms,
        record_count=len(records),
        # A format-1 entry (replayed from an old journal) is re-encoded once, so the window
        # holds one format.
        payload=batch.payload
        if isinstance(batch, CompactBatch)
        else compact_codec.encode_records(records),
    )
    result = ApplyResult(
        status=ApplyStatus.APPLIED,
        base_offset=base_offset,
        last_offset=committed.last_offset,
        log_last_offset=committed.last_offset,
    )
    return Applied(state=next_state, result=result, batch=committed)


def decode_records(batch: AnyBatch) -> tuple[MetadataRecord, ...]:
    """The batch's records, strictly validated; MetadataCodecError if one is malformed."""
    if isinstance(batch, CompactBatch):
        return compact_codec.decode_records(batch.payload, batch.record_count)
    return tuple(decode_json_lines(batch.records))  # format 1: one JSON line per record


def replay_records(
    image: MetadataImage, records: tuple[MetadataRecord, ...], base_offset: int, epoch: int
) -> MetadataImage:
    """The image after ``records`` (at offsets from ``base_offset``); raises if one is invalid."""
    return apply_records(image, records, offset=base_offset + len(records) - 1, epoch=epoch)


def _result(state: MetadataState, status: ApplyStatus, message: str) -> ApplyResult:
    return ApplyResult(status=status, log_last_offset=state.last_offset, message=message)
