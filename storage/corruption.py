"""Corrupt batches met by reads: what one is, and how a log counts and logs them.

Pure (no files), so that the log's rules can keep the reports while only the file store's
CRC check (``storage.read_verification``) reads bytes to find them.
"""

from __future__ import annotations

import logging

import attrs

# Distinct corrupt batches logged per log; more are counted but not logged again.
MAX_REPORTED_CORRUPTIONS = 1024

logger = logging.getLogger(__name__)


@attrs.frozen
class CorruptBatch:
    """The first bad batch of a read: where it is, the offset it should start at, why."""

    path: str
    position: int  # in the file
    offset: int  # the offset after the last good batch: where the bad one starts
    reason: str


class CorruptionReports:
    """A log's corrupt batches met by reads: counted, and each logged once (a follower
    retries the same batch every backoff)."""

    def __init__(self) -> None:
        self.count = 0
        self._logged: set[tuple[str, int]] = set()

    def report(self, corrupt: CorruptBatch) -> None:
        self.count += 1
        key = (corrupt.path, corrupt.position)
        if key in self._logged:
            return
        if len(self._logged) < MAX_REPORTED_CORRUPTIONS:
            self._logged.add(key)
        logger.error(
            "%s: the batch at offset %d (byte %d) is corrupt and is not served: %s",
            corrupt.path,
            corrupt.offset,
            corrupt.position,
            corrupt.reason,
        )
