"""PartitionLog against a plain list of batches (STYLE.md §10: Hypothesis checks storage
against a list model).

Small segments and indexes make rolls (by size and by full index) frequent. Steps: appends of
varying sizes, reads at random offsets with random byte limits, truncation, explicit rolls,
flushes, DeleteRecords, clean close and reopen, and crashes — with or without a torn tail (the
active file cut mid-batch, reopened without the clean-shutdown marker; the model then drops only
the torn batch, which must lie above the recovery point, as only unflushed data can tear).
After every step, everything readable must equal the model.

The machine runs on both segment stores (``storage.segment_store``): on files, a crash is a
kill -9 (the page cache survives) that may tear the unflushed tail; in memory, a crash is a
power loss (``MemoryDisk.crash``): every batch not yet flushed is gone, and the model keeps only
the batches below the last flush.
"""

from __future__ import annotations

import shutil
import tempfile
from pathlib import Path

import attrs
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_validator import OffsetOutOfRangeError
from pykraft.storage.memory_disk import MemoryDisk
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.record_batch import iter_batches
from pykraft.storage.records import SimpleRecord, build_batch, iter_records

CONFIG = LogConfig(segment_bytes=900, index_interval_bytes=64, segment_index_bytes=96)


@attrs.frozen
class ModelBatch:
    base_offset: int
    values: tuple[bytes, ...]
    size: int

    @property
    def last_offset(self) -> int:
        return self.base_offset + len(self.values) - 1


def decode(data: bytes) -> list[tuple[int, bytes | None]]:
    return [(r.offset, r.value) for pos, _ in iter_batches(data) for r in iter_records(data, pos)]


class PartitionLogMachine(RuleBasedStateMachine):
    """The rules and the model; the subclasses say how the store opens and crashes."""

    def __init__(self) -> None:
        super().__init__()
        self.batches: list[ModelBatch] = []
        self.log_start_offset = 0
        self.counter = 0
        # Every batch below this offset has been flushed (the memory store's crash keeps them).
        self.durable_end = 0
        self.log = self.open_log(recovery_point=0, had_clean_shutdown=False)

    def open_log(self, *, recovery_point: int, had_clean_shutdown: bool) -> PartitionLog:
        raise NotImplementedError

    def crash_store(self, tear: bool, cut: float) -> bool:
        """Crash; True when the model's last batch was torn off (and must be dropped)."""
        raise NotImplementedError

    def teardown(self) -> None:
        self.log.close_handlers()

    @property
    def log_end_offset(self) -> int:
        return self.batches[-1].last_offset + 1 if self.batches else self.log_start_offset

    # ------------------------------------------------------------------ rules

    @rule(count=st.integers(1, 6), value_size=st.integers(0, 120))
    def append(self, count: int, value_size: int) -> None:
        values = []
        for _ in range(count):
            self.counter += 1
            values.append(str(self.counter).encode().ljust(value_size, b"."))
        data = bytearray(
            build_batch([SimpleRecord(value=v, timestamp=self.counter) for v in values])
        )
        info = self.log.append_as_leader(data, leader_epoch=0, now_ms=0)
        assert info.first_offset == self.log_end_offset
        self.batches.append(ModelBatch(info.first_offset, tuple(values), len(data)))

    @rule(data=st.data(), max_bytes=st.integers(0, 2000), min_one_batch=st.booleans())
    def read(self, data: st.DataObject, max_bytes: int, min_one_batch: bool) -> None:
        offset = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        upper = data.draw(st.integers(offset, self.log_end_offset + 3))
        result = self.log.read(offset, max_bytes, upper, min_one_batch)
        expected: list[ModelBatch] = []
        size = 0
        for batch in self.batches:
            if batch.last_offset < offset:
                continue
            if batch.last_offset >= upper:
                break
            fits = size + batch.size <= max_bytes or (min_one_batch and not expected)
            if not fits:
                break
            expected.append(batch)
            size += batch.size
        assert decode(result.read_bytes()) == [
            (batch.base_offset + n, value)
            for batch in expected
            for n, value in enumerate(batch.values)
        ]
        assert result.next_offset == (expected[-1].last_offset + 1 if expected else offset)

    @rule(data=st.data())
    def read_out_of_range(self, data: st.DataObject) -> None:
        offset = data.draw(st.sampled_from([self.log_start_offset - 1, self.log_end_offset + 1]))
        try:
            self.log.read(offset, 1000, self.log_end_offset)
        except OffsetOutOfRangeError:
            return
        raise AssertionError(f"reading offset {offset} should be out of range")

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate_to(self, data: st.DataObject) -> None:
        target = data.draw(st.integers(self.batches[0].base_offset, self.log_end_offset))
        self.log.truncate_to(target)
        # Whole batches go: every batch holding an offset >= target. The log then ends at the
        # first removed batch, and the log start cannot stay above the log end.
        removed = [batch for batch in self.batches if batch.last_offset >= target]
        self.batches = [batch for batch in self.batches if batch.last_offset < target]
        if removed:
            self.log_start_offset = min(self.log_start_offset, removed[0].base_offset)
        self.durable_end = min(self.durable_end, self.log_end_offset)

    @rule()
    def roll(self) -> None:
        self.log.roll(now_ms=0)

    @rule()
    def flush(self) -> None:
        self.log.flush()
        assert self.log.recovery_point == self.log_end_offset
        self.durable_end = self.log_end_offset

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def delete_records(self, data: st.DataObject) -> None:
        self.log.update_high_watermark(self.log_end_offset)
        target = data.draw(st.integers(self.log_start_offset, self.log_end_offset))
        assert self.log.delete_records(target) == max(target, self.log_start_offset)
        self.log_start_offset = max(target, self.log_start_offset)
        self.batches = [
            batch for batch in self.batches if batch.last_offset >= self.log_start_offset
        ]

    @rule()
    def clean_close_and_reopen(self) -> None:
        self.log.close()
        self.durable_end = self.log_end_offset
        self.log = self.open_log(recovery_point=self.log.recovery_point, had_clean_shutdown=True)
        assert self.log.load_report.recovered_segments == ()

    @rule(tear=st.booleans(), cut=st.floats(0.01, 0.99))
    def crash(self, tear: bool, cut: float) -> None:
        recovery_point = self.log.recovery_point
        torn = self.crash_store(tear, cut)
        if torn:
            self.batches.pop()
        self.log = self.open_log(recovery_point=recovery_point, had_clean_shutdown=False)
        assert (self.log.load_report.truncated_bytes > 0) is torn

    # ------------------------------------------------------------------ invariants

    @invariant()
    def offsets_match_the_model(self) -> None:
        assert self.log.log_end_offset == self.log_end_offset
        assert self.log.log_start_offset == self.log_start_offset
        log = self.log
        assert log.log_start_offset <= log.high_watermark <= log.log_end_offset
        assert log.recovery_point <= log.log_end_offset

    @invariant()
    def everything_reads_back(self) -> None:
        result = self.log.read(self.log_start_offset, 10**8, self.log.log_end_offset)
        assert decode(result.read_bytes()) == [
            (batch.base_offset + n, value)
            for batch in self.batches
            for n, value in enumerate(batch.values)
        ]

    @invariant()
    def segments_are_bounded(self) -> None:
        for segment in self.log.segments:
            assert segment.size <= CONFIG.segment_bytes


class FileLogMachine(PartitionLogMachine):
    """Segment files; a crash is kill -9, which may tear the unflushed last batch."""

    def __init__(self) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="pykraft-sm-"))
        self.directory = self.root / "topic-0"
        super().__init__()

    def open_log(self, *, recovery_point: int, had_clean_shutdown: bool) -> PartitionLog:
        return PartitionLog.open(
            self.directory,
            CONFIG,
            recovery_point=recovery_point,
            log_start_offset=self.log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
        )

    def crash_store(self, tear: bool, cut: float) -> bool:
        torn = self._tear_last_batch(cut) if tear and self._last_batch_unflushed() else False
        self.log.close_handlers()
        return torn

    def teardown(self) -> None:
        super().teardown()
        shutil.rmtree(self.root, ignore_errors=True)

    def _last_batch_unflushed(self) -> bool:
        return bool(self.batches) and self.batches[-1].base_offset >= self.log.recovery_point

    def _tear_last_batch(self, cut: float) -> bool:
        last = self.batches[-1]
        segments = self.log.local_log.segments
        segment = next(s for s in reversed(segments) if s.base_offset <= last.base_offset)
        keep = segment.size - last.size + max(1, int(last.size * cut))
        with segment.log_path.open("r+b") as file:
            file.truncate(keep)
        return True


class MemoryLogMachine(PartitionLogMachine):
    """The in-memory store; a crash is a power loss that drops every unflushed batch."""

    def __init__(self) -> None:
        self.disk = MemoryDisk(Path("memory/topic-0"))
        super().__init__()

    def open_log(self, *, recovery_point: int, had_clean_shutdown: bool) -> PartitionLog:
        return PartitionLog.open(
            self.disk,
            CONFIG,
            recovery_point=recovery_point,
            log_start_offset=self.log_start_offset,
            had_clean_shutdown=had_clean_shutdown,
        )

    def crash_store(self, tear: bool, cut: float) -> bool:
        self.log.close_handlers()
        self.disk.crash()
        self.batches = [batch for batch in self.batches if batch.last_offset < self.durable_end]
        return False  # memory never tears a batch: the crash cuts at a flushed boundary


SETTINGS = settings(max_examples=60, stateful_step_count=40, deadline=None)
FileLogMachine.TestCase.settings = SETTINGS
MemoryLogMachine.TestCase.settings = SETTINGS
TestPartitionLogOnFiles = FileLogMachine.TestCase
TestPartitionLogInMemory = MemoryLogMachine.TestCase
