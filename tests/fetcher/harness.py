"""An in-memory leader and follower for driving the pure fetcher core round by round.

The model of Kafka's ``MockLeaderEndPoint`` / ``MockFetcherThread`` (core/src/test/scala/unit/
kafka/server/), with the leader side following the broker's real rules rather than the mock's
shortcuts:

* a replica's log is a list of ``(offset, epoch)`` records; its leader-epoch history is kept by
  the same pure functions ``storage.leader_epoch_cache`` uses (assign on append, truncate from
  the end on truncation, cleared by truncate-fully), and a leader assigns its own epoch at its
  log end when elected (Kafka ``Partition.makeLeader``);
* ``MockLeader.fetch`` is ``Partition.readRecords``: the current-leader-epoch check, the
  KIP-320 ``last_fetched_epoch`` check answering OFFSET_OUT_OF_RANGE or ``DivergingEpoch``,
  then real RecordBatch v2 bytes (one batch per record) from the fetch offset;
* ``Follower`` is the shell the asyncio ``ReplicaFetcher`` will be: one ``do_work`` is Kafka's
  ``doWork`` (truncate if TRUNCATING, then fetch if FETCHING), every decision comes from
  ``fetcher.state`` and ``fetcher.responses`` and every action is carried out on the mock log.

After every completed truncation the follower checks that its log is a prefix of the leader's,
and that the truncation did not raise its high watermark.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import attrs

from pykraft.fetcher.responses import (
    Append,
    BackOff,
    FailureReason,
    FetchAction,
    FetchOutcome,
    Ignore,
    LeaderOffsets,
    LocalError,
    MarkFailed,
    ResetOffset,
    ResolveOutOfRange,
    SendOffsetsForLeaderEpoch,
    Truncate,
    follower_high_watermark,
    on_epoch_end_offset,
    on_fetch_response,
    on_leader_offsets,
    on_local_error,
    on_records_appended,
    plan_truncation,
)
from pykraft.fetcher.state import PartitionFetchState, fetch_partition, initial_fetch_state
from pykraft.fetcher.truncation import (
    FollowerLog,
    LeaderEpochEndOffset,
    LeaderEpochRequest,
    OffsetResetKind,
    Truncation,
)
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import EpochEndOffset, FetchPartition, PartitionData
from pykraft.storage.leader_epoch_cache import (
    UNDEFINED_EPOCH,
    UNDEFINED_EPOCH_OFFSET,
    Entries,
    assign_epoch,
    end_offset_for,
    truncate_from_end,
)
from pykraft.storage.record_batch import CorruptRecordError, iter_batches
from pykraft.storage.records import SimpleRecord, build_batch

Rec = tuple[int, int]  # (offset, epoch)
BACKOFF_MS = 100


class StorageFailure(Exception):
    """Stands in for KafkaStorageException in the mock log."""


@dataclass
class MockLog:
    records: list[Rec]
    log_start_offset: int = 0
    high_watermark: int = 0
    entries: Entries = ()
    # Which writes raise StorageFailure: "append", "truncate" (stands in for a failed disk).
    failing: frozenset[str] = frozenset()

    @classmethod
    def of(cls, epochs: Sequence[int], *, start: int = 0, high_watermark: int = 0) -> MockLog:
        """A log holding one record per epoch in ``epochs``, at offsets ``start``, ``start+1``..."""
        log = cls([], log_start_offset=start)
        log.append([(start + i, epoch) for i, epoch in enumerate(epochs)])
        log.high_watermark = high_watermark
        return log

    @property
    def log_end_offset(self) -> int:
        return self.records[-1][0] + 1 if self.records else self.log_start_offset

    def view(self) -> FollowerLog:
        return FollowerLog(
            self.log_start_offset, self.log_end_offset, self.high_watermark, self.entries
        )

    def append(self, records: Sequence[Rec]) -> None:
        self._check_writable("append")
        for offset, epoch in records:
            assert offset == self.log_end_offset, f"append at {offset}, log ends {self}"
            self.entries = assign_epoch(self.entries, epoch, offset)
            self.records.append((offset, epoch))

    def truncate_to(self, offset: int) -> None:
        self._check_writable("truncate")
        if offset < self.log_start_offset:
            self.truncate_fully_and_start_at(offset)
            return
        self.records = [r for r in self.records if r[0] < offset]
        self.entries = truncate_from_end(self.entries, offset)
        self.high_watermark = min(self.high_watermark, self.log_end_offset)

    def truncate_fully_and_start_at(self, offset: int) -> None:
        self._check_writable("truncate")
        self.records, self.entries = [], ()
        self.log_start_offset = self.high_watermark = offset

    def become_leader(self, epoch: int) -> None:
        """Kafka ``Partition.makeLeader``: the new epoch starts at the log end."""
        self.entries = assign_epoch(self.entries, epoch, self.log_end_offset)

    def _check_writable(self, operation: str) -> None:
        if operation in self.failing:
            raise StorageFailure(f"{operation} failed: log directory offline")


@dataclass
class MockLeader:
    log: MockLog
    leader_epoch: int
    max_records: int = 1  # like Kafka's mock: one batch per fetch unless told otherwise
    # Set to play a two-replica ISR: the high watermark follows the follower's fetch offset.
    track_isr_high_watermark: bool = False
    # Errors to answer, one per request, before behaving normally.
    fetch_errors: list[Errors] = field(default_factory=list)
    epoch_errors: list[Errors] = field(default_factory=list)
    corrupt_next_fetch: bool = False

    def _epoch_error(self, current_leader_epoch: int) -> Errors | None:
        """Kafka ``Partition.localLogWithEpochOrThrow``."""
        if current_leader_epoch == -1:
            return None
        if current_leader_epoch < self.leader_epoch:
            return Errors.FENCED_LEADER_EPOCH
        if current_leader_epoch > self.leader_epoch:
            return Errors.UNKNOWN_LEADER_EPOCH
        return None

    def offset_for_leader_epoch(self, request: LeaderEpochRequest) -> LeaderEpochEndOffset:
        if self.epoch_errors:
            return LeaderEpochEndOffset(self.epoch_errors.pop(0))
        error = self._epoch_error(request.current_leader_epoch)
        if error is not None:
            return LeaderEpochEndOffset(error)
        found = end_offset_for(self.log.entries, request.leader_epoch, self.log.log_end_offset)
        return LeaderEpochEndOffset(Errors.NONE, found.leader_epoch, found.offset)

    def list_offsets(self, current_leader_epoch: int) -> LeaderOffsets:
        error = self._epoch_error(current_leader_epoch)
        if error is not None:
            return LeaderOffsets(error)
        return LeaderOffsets(Errors.NONE, self.log.log_start_offset, self.log.log_end_offset)

    def fetch(self, request: FetchPartition) -> PartitionData:
        """Kafka ``Partition.readRecords`` for a follower's fetch."""
        log = self.log
        error = self.fetch_errors.pop(0) if self.fetch_errors else None
        error = error or self._epoch_error(request.current_leader_epoch)
        if error is not None:
            return PartitionData(0, error_code=error)
        if self.track_isr_high_watermark:
            # The follower has everything below its fetch offset: HW = min LEO over the ISR.
            caught_up = min(request.fetch_offset, log.log_end_offset)
            log.high_watermark = max(log.high_watermark, caught_up)
        base = PartitionData(
            0, high_watermark=log.high_watermark, log_start_offset=log.log_start_offset
        )
        fetch_offset, fetch_epoch = request.fetch_offset, request.last_fetched_epoch
        if fetch_epoch >= 0:
            found = end_offset_for(log.entries, fetch_epoch, log.log_end_offset)
            if found.offset == UNDEFINED_EPOCH_OFFSET or found.leader_epoch == UNDEFINED_EPOCH:
                return PartitionData(0, error_code=Errors.OFFSET_OUT_OF_RANGE)
            if fetch_offset < log.log_start_offset:
                return PartitionData(0, error_code=Errors.OFFSET_OUT_OF_RANGE)
            if found.leader_epoch < fetch_epoch or found.offset < fetch_offset:
                diverging = EpochEndOffset(found.leader_epoch, found.offset)
                return attrs.evolve(base, diverging_epoch=diverging)
        if not log.log_start_offset <= fetch_offset <= log.log_end_offset:
            return PartitionData(0, error_code=Errors.OFFSET_OUT_OF_RANGE)
        chosen = [r for r in log.records if r[0] >= fetch_offset][: self.max_records]
        data = b"".join(_batch(offset, epoch) for offset, epoch in chosen)
        if self.corrupt_next_fetch and data:
            self.corrupt_next_fetch = False
            data = data[:-1] + bytes([data[-1] ^ 0xFF])  # breaks the CRC, as Kafka's test does
        return attrs.evolve(base, records=(data,) if data else ())


def _batch(offset: int, epoch: int) -> bytes:
    record = SimpleRecord(value=f"{offset}@{epoch}".encode())
    return build_batch([record], base_offset=offset, partition_leader_epoch=epoch)


def decode_records(records: Sequence[object]) -> list[Rec]:
    """Parse fetched RecordBatch bytes back into ``(offset, epoch)`` records (CRC checked)."""
    out: list[Rec] = []
    for chunk in records:
        assert isinstance(chunk, bytes | bytearray | memoryview)
        for _, header in iter_batches(chunk):
            epoch = header.partition_leader_epoch
            out.extend((offset, epoch) for offset in range(header.base_offset, header.next_offset))
    return out


def is_prefix(follower: MockLog, leader: MockLog) -> bool:
    """The follower's records, from the leader's log start on, begin the leader's log."""
    kept = [r for r in follower.records if r[0] >= leader.log_start_offset]
    return leader.records[: len(kept)] == kept


@dataclass
class Follower:
    """The fetcher shell for one partition: decisions from ``fetcher.responses``, I/O on ``log``."""

    log: MockLog
    truncate_on_fetch: bool = True
    check_prefix: bool = True
    now_ms: int = 0
    state: PartitionFetchState | None = None
    failed: FailureReason | None = None
    truncations: list[Truncation] = field(default_factory=list)
    actions: list[FetchAction] = field(default_factory=list)
    fetches: int = 0
    epoch_requests: int = 0
    on_append: Callable[[], None] | None = None

    def add_partition(self, current_leader_epoch: int) -> None:
        self.state = initial_fetch_state(
            self.state,
            current_leader_epoch,
            self.log.view(),
            truncate_on_fetch=self.truncate_on_fetch,
        )
        self.failed = None

    def do_work(self, leader: MockLeader) -> None:
        """Kafka ``AbstractFetcherThread.doWork``: maybe truncate, then maybe fetch."""
        if self.state is None:
            return
        self.state = self.state.resume_if_due(self.now_ms)
        if self.state.is_truncating:
            self._truncation_round(leader)
        if self.state is not None and self.state.is_ready_for_fetch:
            self._fetch_round(leader)

    def run_until_in_sync(self, leader: MockLeader, max_rounds: int = 50) -> int:
        for rounds in range(1, max_rounds + 1):
            self.do_work(leader)
            self.now_ms += BACKOFF_MS
            if self.in_sync_with(leader):
                return rounds
        raise AssertionError(f"not in sync after {max_rounds} rounds: {self.log} vs {leader.log}")

    def in_sync_with(self, leader: MockLeader) -> bool:
        return (
            self.log.records == leader.log.records
            and self.state is not None
            and self.state.fetch_offset == leader.log.log_end_offset
        )

    def _truncation_round(self, leader: MockLeader) -> None:
        assert self.state is not None
        outcome = plan_truncation(
            self.state, self.log.view(), truncate_on_fetch=self.truncate_on_fetch
        )
        if isinstance(outcome.action, SendOffsetsForLeaderEpoch):
            self.epoch_requests += 1
            request = outcome.action.request
            outcome = on_epoch_end_offset(
                self.state,
                request,
                leader.offset_for_leader_epoch(request),
                self.log.view(),
                self.now_ms,
                fetch_backoff_ms=BACKOFF_MS,
                truncate_on_fetch=self.truncate_on_fetch,
            )
        self._apply(outcome, leader)

    def _fetch_round(self, leader: MockLeader) -> None:
        assert self.state is not None
        self.fetches += 1
        request = fetch_partition(
            self.state,
            0,
            self.log.log_start_offset,
            1 << 20,
            truncate_on_fetch=self.truncate_on_fetch,
        )
        response = leader.fetch(request)
        outcome = on_fetch_response(
            self.state,
            request,
            response,
            self.log.view(),
            self.now_ms,
            fetch_backoff_ms=BACKOFF_MS,
            truncate_on_fetch=self.truncate_on_fetch,
        )
        if isinstance(outcome.action, ResolveOutOfRange):
            self.actions.append(outcome.action)
            epoch = outcome.action.current_leader_epoch
            outcome = on_leader_offsets(
                self.state,
                epoch,
                leader.list_offsets(epoch),
                self.log.view(),
                self.now_ms,
                fetch_backoff_ms=BACKOFF_MS,
            )
        self._apply(outcome, leader)

    def _apply(self, outcome: FetchOutcome, leader: MockLeader) -> None:
        action = outcome.action
        self.actions.append(action)
        try:
            self._carry_out(outcome, leader)
        except CorruptRecordError:
            self._local_error(LocalError.CORRUPT_RECORD)
        except StorageFailure:
            self._local_error(LocalError.STORAGE_ERROR)

    def _carry_out(self, outcome: FetchOutcome, leader: MockLeader) -> None:
        action = outcome.action
        if isinstance(action, Append):
            self._append(action)
            return  # the state advances in _append, from what was appended
        if isinstance(action, Truncate):
            self._truncate(action.truncation, leader)
        elif isinstance(action, ResetOffset):
            if action.reset.kind is OffsetResetKind.TRUNCATE_TO_LEADER_END:
                self.log.truncate_to(action.reset.fetch_offset)
            elif action.reset.kind is OffsetResetKind.TRUNCATE_FULLY_AND_START_AT_LEADER_START:
                self.log.truncate_fully_and_start_at(action.reset.fetch_offset)
        elif isinstance(action, MarkFailed):
            self.failed = action.reason
        else:
            assert isinstance(action, Ignore | BackOff), action
        self.state = outcome.state

    def _append(self, action: Append) -> None:
        assert self.state is not None
        records = decode_records(action.records)
        if records:
            self.log.append(records)
            if self.on_append is not None:
                self.on_append()
        log = self.log
        log.high_watermark = follower_high_watermark(
            action.high_watermark, log.log_start_offset, log.log_end_offset
        )
        self.state = on_records_appended(
            self.state,
            last_offset=records[-1][0] if records else None,
            last_leader_epoch=records[-1][1] if records else None,
            leader_high_watermark=action.high_watermark,
        )

    def _truncate(self, truncation: Truncation, leader: MockLeader) -> None:
        high_watermark_before = self.log.high_watermark
        self.log.truncate_to(truncation.offset)
        self.truncations.append(truncation)
        assert self.log.high_watermark <= high_watermark_before, "truncation raised the HW"
        if truncation.truncation_completed and self.check_prefix:
            assert is_prefix(self.log, leader.log), (self.log, leader.log)

    def _local_error(self, error: LocalError) -> None:
        assert self.state is not None
        outcome = on_local_error(self.state, error, self.now_ms, fetch_backoff_ms=BACKOFF_MS)
        self.actions.append(outcome.action)
        self.state = outcome.state
        if isinstance(outcome.action, MarkFailed):
            self.failed = outcome.action.reason
