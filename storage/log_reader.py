"""Reading a partition log: fetch slices across segments and ListOffsets by timestamp.

Kept apart from ``PartitionLog`` so the append/truncate state stays in one place and the read
side (which never changes the log) reads on its own. A read starts in the segment holding the
fetch offset and continues into later segments while ``max_bytes`` allows, always in whole
batches and never past the batch holding ``upper_bound``. Only a timestamp lookup looks inside a
batch; a stored batch it cannot read (damaged, or a decompression bomb stopped by the bound)
raises ``CorruptLogError`` for the request to answer CORRUPT_MESSAGE.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from pykraft.storage.fetch_data import FetchDataInfo, LogOffsetMetadata
from pykraft.storage.log_validator import CorruptLogError
from pykraft.storage.producer_entry import NO_TIMESTAMP
from pykraft.storage.record_batch import CorruptRecordError

if TYPE_CHECKING:
    from pykraft.storage.file_slice import FileSlice
    from pykraft.storage.segment import LogSegment

# Kafka's ListOffsetsRequest special timestamps.
LATEST_TIMESTAMP = -1
EARLIEST_TIMESTAMP = -2
MAX_TIMESTAMP = -3
EARLIEST_LOCAL_TIMESTAMP = -4


def _max_position(
    segment: LogSegment, next_base_offset: int | None, upper: int, log_end_offset: int | None
) -> int:
    """The position in ``segment`` where reads must stop to stay below ``upper``. Every batch
    of a segment ends below the next one's base offset, and the last segment's below the log
    end offset: an ``upper`` at or past that bound needs no index lookup (a follower's read is
    bounded by the log end, so every one of its reads takes this way)."""
    end = log_end_offset if next_base_offset is None else next_base_offset
    if end is not None and end <= upper:
        return segment.size
    location = segment.translate_offset(upper)
    return segment.size if location is None else location.position


def read_segments(
    segments: Sequence[LogSegment],
    offset: int,
    max_bytes: int,
    upper: int,
    min_one_batch: bool,
    log_end_offset: int | None = None,
) -> FetchDataInfo:
    """Read from ``segments[0]`` (the one holding ``offset``) onwards; see PartitionLog.read.
    ``log_end_offset``, when given, is the offset after the last segment's last batch."""
    slices: list[FileSlice] = []
    remaining = max_bytes
    next_offset = offset
    metadata: LogOffsetMetadata | None = None
    next_bases: list[int | None] = [segment.base_offset for segment in segments[1:]]
    next_bases.append(None)
    for segment, next_base in zip(segments, next_bases, strict=True):
        if segment.base_offset >= upper:
            break
        max_position = _max_position(segment, next_base, upper, log_end_offset)
        result = segment.read(next_offset, remaining, max_position, min_one_batch and not slices)
        if result is None:
            continue  # nothing at or after the offset in this segment
        if metadata is None:
            metadata = LogOffsetMetadata(offset, segment.base_offset, result.start_position)
        if result.slice.length == 0:
            break
        slices.append(result.slice)
        remaining -= result.slice.length
        next_offset = result.next_offset
        if remaining <= 0 or result.slice.position + result.slice.length < segment.size:
            break  # stopped by max_bytes or the upper bound, not by the segment's end
    return FetchDataInfo(metadata or LogOffsetMetadata(offset), tuple(slices), next_offset)


def fetch_offset_for_timestamp(
    segments: Sequence[LogSegment], timestamp: int, log_start_offset: int, log_end_offset: int
) -> tuple[int, int] | None:
    """``(offset, timestamp)`` for a ListOffsets query (Kafka ``fetchOffsetByTimestamp``).

    A real timestamp finds the first record at or after it; EARLIEST/LATEST give the log
    start/end with no timestamp; MAX_TIMESTAMP the first record holding the largest timestamp.
    """
    if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
        return log_start_offset, NO_TIMESTAMP
    if timestamp == LATEST_TIMESTAMP:
        return log_end_offset, NO_TIMESTAMP
    if timestamp == MAX_TIMESTAMP:
        newest = max(segments, key=lambda segment: segment.max_timestamp_so_far.timestamp)
        largest = newest.max_timestamp_so_far.timestamp
        if largest < 0:
            return None
        return _find_offset_by_timestamp(newest, largest, log_start_offset)
    if timestamp < 0:
        raise ValueError(f"unsupported ListOffsets timestamp {timestamp}")
    for segment in segments:
        if segment.max_timestamp_so_far.timestamp >= timestamp:
            found = _find_offset_by_timestamp(segment, timestamp, log_start_offset)
            if found is not None:
                return found
    return None


def _find_offset_by_timestamp(
    segment: LogSegment, timestamp: int, log_start_offset: int
) -> tuple[int, int] | None:
    """The segment's lookup, which reads (and inflates, within the bound of
    ``storage.record_walk``) one batch; a batch it cannot read is a ``CorruptLogError``."""
    try:
        return segment.find_offset_by_timestamp(timestamp, log_start_offset)
    except CorruptRecordError as error:
        raise CorruptLogError(f"{segment.log_path.name}: {error}") from error
