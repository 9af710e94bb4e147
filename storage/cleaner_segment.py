"""Writing a cleaned segment beside the live one: ``<base>.log.cleaned`` with its
``.index.cleaned``, ``.timeindex.cleaned`` and ``.txnindex.cleaned`` (Kafka's
``LogCleaner.createNewCleanedSegment``), on the cleaner's worker thread.

The indexes are built as the batches are written, with ``LogSegment``'s rules (an offset-index
entry and the largest timestamp so far after more than ``index.interval.bytes`` of log, a final
time-index entry, both trimmed), so the swap (``storage.cleaner_swap``) only renames files and
never reads the new segment on the broker's event loop. A crash before the swap is decided
leaves ``.cleaned`` files that recovery deletes; after it, recovery rebuilds the indexes anyway.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from pykraft.storage.aborted_txn import TXN_INDEX_SUFFIX, AbortedTxn
from pykraft.storage.index import (
    NO_TIMESTAMP,
    OFFSET_INDEX_SUFFIX,
    TIME_INDEX_SUFFIX,
    OffsetIndex,
    TimeIndex,
)
from pykraft.storage.log_config import LogConfig
from pykraft.storage.record_batch import parse_header
from pykraft.storage.segment import LOG_SUFFIX, segment_file_name
from pykraft.storage.transaction_index import TransactionIndex

CLEANED_SUFFIX = ".cleaned"
SEGMENT_SUFFIXES = (LOG_SUFFIX, OFFSET_INDEX_SUFFIX, TIME_INDEX_SUFFIX, TXN_INDEX_SUFFIX)


def cleaned_path(directory: Path, base_offset: int, suffix: str) -> Path:
    return directory / (segment_file_name(base_offset, suffix) + CLEANED_SUFFIX)


class CleanedSegmentWriter:
    """One ``.cleaned`` segment being written; ``finish`` makes it durable, ``discard``
    removes it."""

    def __init__(self, directory: Path, base_offset: int, config: LogConfig) -> None:
        self.directory = directory
        self.base_offset = base_offset
        self._index_interval_bytes = config.index_interval_bytes
        path = cleaned_path(directory, base_offset, LOG_SUFFIX)
        self._fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        size = config.segment_index_bytes
        self._offset_index = OffsetIndex(
            cleaned_path(directory, base_offset, OFFSET_INDEX_SUFFIX), base_offset, size
        )
        self._time_index = TimeIndex(
            cleaned_path(directory, base_offset, TIME_INDEX_SUFFIX), base_offset, size
        )
        self.size = 0
        self._bytes_since_last_index_entry = 0
        self._max_timestamp, self._max_timestamp_offset = NO_TIMESTAMP, base_offset

    def write(self, batch: bytes) -> None:
        """Append one whole batch (Kafka ``LogSegment.append`` of the cleaned segment)."""
        header = parse_header(batch)
        os.write(self._fd, batch)  # a regular file takes the whole write
        if header.max_timestamp > self._max_timestamp:
            self._max_timestamp, self._max_timestamp_offset = (
                header.max_timestamp,
                header.last_offset,
            )
        if self._bytes_since_last_index_entry > self._index_interval_bytes:
            if not self._offset_index.is_full:
                self._offset_index.append(header.last_offset, self.size)
            if not self._time_index.is_full:
                self._time_index.maybe_append(self._max_timestamp, self._max_timestamp_offset)
            self._bytes_since_last_index_entry = 0
        self._bytes_since_last_index_entry += len(batch)
        self.size += len(batch)

    def finish(self, aborted_txns: Sequence[AbortedTxn]) -> None:
        """The final time-index entry, trimmed indexes, the ``.txnindex``; all fsync'd."""
        self._time_index.maybe_append(
            self._max_timestamp, self._max_timestamp_offset, skip_full_check=True
        )
        if aborted_txns:
            txn_index = TransactionIndex(
                cleaned_path(self.directory, self.base_offset, TXN_INDEX_SUFFIX), self.base_offset
            )
            for entry in aborted_txns:
                txn_index.append(entry)
            txn_index.flush()
        for index in (self._offset_index, self._time_index):
            index.trim_to_valid_size()
            index.flush()
            index.close()
        os.fsync(self._fd)
        os.close(self._fd)
        self._fd = -1

    def discard(self) -> None:
        """Remove every file of this segment (best effort: the cleaning failed)."""
        for index in (self._offset_index, self._time_index):
            index.close_handler()
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        for suffix in SEGMENT_SUFFIXES:
            with contextlib.suppress(FileNotFoundError):
                cleaned_path(self.directory, self.base_offset, suffix).unlink()
