"""Producer-state snapshots: Kafka's version-1 codec (pure) and the small file helpers.

Snapshots are ``<offset, 20 digits>.snapshot`` files in Kafka's version-1 layout
(``ProducerStateManager.writeSnapshot``): int16 version, uint32 CRC32C of everything after it,
int32 count, then per producer ``producer_id int64, epoch int16, last_sequence int32,
last_offset int64, offset_delta int32, timestamp int64, coordinator_epoch int32,
current_txn_first_offset int64``. Like Kafka, a snapshot keeps only each producer's LAST batch, so
after a reload only a retry of that batch is recognised as a duplicate. Which snapshot to load,
and when to write or delete one, is ``storage.producer_state.ProducerStateManager``'s decision.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from pathlib import Path

import crc32c

from pykraft.storage.producer_entry import SEQUENCE_MODULUS, BatchMetadata, ProducerStateEntry
from pykraft.storage.record_batch import NO_SEQUENCE

SNAPSHOT_SUFFIX = ".snapshot"
PRODUCER_SNAPSHOT_VERSION = 1
_HEADER = struct.Struct(">hIi")  # version, crc, entry count
_CRC_START = 6  # the CRC covers everything after version (int16) and crc (uint32)
_ENTRY = struct.Struct(">qhiqiqiq")


# --- snapshot codec (pure) ---------------------------------------------------------------


class CorruptSnapshotError(ValueError):
    """A producer snapshot cannot be trusted; ``reason`` says why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


def encode_snapshot(entries: Iterable[ProducerStateEntry]) -> bytes:
    """Kafka's version-1 snapshot bytes (only each producer's last batch is kept)."""
    ordered = sorted(entries, key=lambda e: e.producer_id)
    body = bytearray(struct.pack(">i", len(ordered)))
    for e in ordered:
        last = e.batches[-1] if e.batches else None
        body += _ENTRY.pack(
            e.producer_id,
            e.producer_epoch,
            last.last_sequence if last else NO_SEQUENCE,
            last.last_offset if last else -1,
            last.offset_delta if last else 0,
            e.last_timestamp,
            e.coordinator_epoch,
            -1 if e.current_txn_first_offset is None else e.current_txn_first_offset,
        )
    crc = crc32c.crc32c(bytes(body))
    return struct.pack(">hI", PRODUCER_SNAPSHOT_VERSION, crc) + bytes(body)


def decode_snapshot(data: bytes) -> list[ProducerStateEntry]:
    """Parse snapshot bytes; raise CorruptSnapshotError saying what is wrong."""
    if len(data) < _HEADER.size:
        raise CorruptSnapshotError(f"truncated: {len(data)} bytes, the header needs {_HEADER.size}")
    version, stored_crc, count = _HEADER.unpack_from(data)
    if version != PRODUCER_SNAPSHOT_VERSION:
        raise CorruptSnapshotError(f"unknown snapshot version {version}, expected 1")
    computed_crc = crc32c.crc32c(data[_CRC_START:])
    if computed_crc != stored_crc:
        raise CorruptSnapshotError(
            f"CRC mismatch: stored {stored_crc:#010x}, computed {computed_crc:#010x}"
        )
    expected_size = _HEADER.size + count * _ENTRY.size
    if count < 0 or len(data) != expected_size:
        raise CorruptSnapshotError(
            f"{count} entries need {expected_size} bytes but the file has {len(data)}"
        )
    return [_entry_from_fields(*f) for f in _ENTRY.iter_unpack(data[_HEADER.size :])]


def _entry_from_fields(
    producer_id: int,
    epoch: int,
    last_sequence: int,
    last_offset: int,
    offset_delta: int,
    timestamp: int,
    coordinator_epoch: int,
    txn_first_offset: int,
) -> ProducerStateEntry:
    batches: tuple[BatchMetadata, ...] = ()
    if last_offset >= 0:  # Kafka: no batch metadata when the last offset is -1
        first_sequence = (last_sequence - offset_delta) % SEQUENCE_MODULUS
        batches = (
            BatchMetadata(
                first_sequence, last_sequence, last_offset - offset_delta, last_offset, timestamp
            ),
        )
    return ProducerStateEntry(
        producer_id,
        epoch,
        batches,
        coordinator_epoch,
        timestamp,
        txn_first_offset if txn_first_offset >= 0 else None,
    )


# --- snapshot file names ---------------------------------------------------------------------


def snapshot_file(directory: Path, offset: int) -> Path:
    return directory / f"{offset:020d}{SNAPSHOT_SUFFIX}"
