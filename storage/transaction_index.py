"""A segment's ``.txnindex`` file (Kafka's ``TransactionIndex``): its aborted transactions.

The rules and the 34-byte entry layout are ``storage.aborted_txn``'s; this is the file. As in
Kafka the file is created only by the first append (most segments never see an abort), so a
missing file is an empty index. Entries are few (one per aborted transaction), so they are read
once when the segment opens and kept in memory; appends go to both. ``flush`` fsyncs what was
appended since the last flush (the segment flushes its index with its log). Reading a file
whose tail is torn or whose entries are out of order is not an error here: ``sanity_check``
reports it, and recovery then rebuilds the index from the log (``storage.recovery``).
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Sequence
from pathlib import Path

from pykraft.storage.aborted_txn import (
    ABORTED_TXN_SIZE,
    AbortedTxn,
    TxnIndexProblem,
    check_appendable,
    collect_aborted_txns,
    decode_entries,
    entries_below,
    sanity_problem,
)
from pykraft.storage.index import CorruptIndexError


class TransactionIndex:
    # Invariant: ``_entries`` are the file's whole entries (the file may be absent: none).

    def __init__(self, path: Path, start_offset: int) -> None:
        self.path = path
        self.start_offset = start_offset
        self._problem: str | None = None
        self._dirty = False
        try:
            data = path.read_bytes()
        except FileNotFoundError:
            data = b""
        try:
            self._entries = decode_entries(data)
        except TxnIndexProblem as problem:
            self._entries, self._problem = [], str(problem)

    @property
    def entries(self) -> Sequence[AbortedTxn]:
        """Kafka ``allAbortedTxns``."""
        return tuple(self._entries)

    @property
    def is_empty(self) -> bool:
        return not self._entries

    def append(self, entry: AbortedTxn) -> None:
        """Append one entry (creating the file); its last offset must exceed the previous."""
        check_appendable(self._entries, entry)
        fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            data = entry.encode()
            if os.write(fd, data) != len(data):
                # A short write leaves a torn tail: cut it so the file stays whole entries.
                with contextlib.suppress(OSError):
                    os.ftruncate(fd, len(self._entries) * ABORTED_TXN_SIZE)
                raise OSError(f"short write to {self.path}")
        finally:
            os.close(fd)
        self._entries.append(entry)
        self._dirty = True

    def truncate_to(self, offset: int) -> None:
        """Drop the entries whose marker is at or above ``offset`` (Kafka ``truncateTo``)."""
        kept = entries_below(self._entries, offset)
        if len(kept) == len(self._entries):
            return
        self._rewrite(kept)

    def reset(self) -> None:
        """Remove every entry (recovery rebuilds them); no file is created for it."""
        if self.path.exists():
            self._rewrite([])
        self._entries, self._problem = [], None

    def _rewrite(self, entries: list[AbortedTxn]) -> None:
        size = len(entries) * ABORTED_TXN_SIZE
        with contextlib.suppress(FileNotFoundError):
            os.truncate(self.path, size)
        self._entries = entries
        self._dirty = True

    def collect(self, fetch_offset: int, upper_bound_offset: int) -> tuple[list[AbortedTxn], bool]:
        return collect_aborted_txns(self._entries, fetch_offset, upper_bound_offset)

    def sanity_check(self) -> None:
        """Raise ``CorruptIndexError`` when the index must be rebuilt (Kafka ``sanityCheck``)."""
        problem = self._problem or sanity_problem(self._entries, self.start_offset)
        if problem is not None:
            raise CorruptIndexError(self.path, problem)

    def flush(self) -> None:
        if not self._dirty:
            return
        with contextlib.suppress(FileNotFoundError):
            fd = os.open(self.path, os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)
        self._dirty = False

    def delete(self) -> None:
        self.path.unlink(missing_ok=True)
        self._entries = []
