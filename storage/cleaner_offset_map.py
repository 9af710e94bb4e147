"""The cleaner's key → latest offset map over a log's dirty section (Kafka's ``OffsetMap``).

Kafka's ``SkimpyOffsetMap`` stores an MD5 of each key and its offset in a fixed buffer of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes, 24 bytes a slot (16 of hash, 8
of offset), and the cleaner fills it to ``log.cleaner.io.buffer.load.factor`` (0.9) of its slots
before it stops and cleans what it mapped (``Cleaner.buildOffsetMap``). This map keeps the same
bound on the number of keys but stores the keys themselves (a Python dict), so no two keys ever
collide; ``latest_offset`` is the last offset mapped, the end of what one cleaning covers.
"""

from __future__ import annotations

# Kafka's SkimpyOffsetMap: an MD5 digest (16 bytes) plus an 8-byte offset per slot.
BYTES_PER_ENTRY = 16 + 8
DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_IO_BUFFER_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
NO_OFFSET = -1


def offset_map_capacity(
    dedupe_buffer_size: int,
    cleaner_threads: int = 1,
    load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR,
) -> int:
    """Keys one cleaning may map: Kafka's ``maxDesiredMapSize`` for one cleaner thread."""
    assert cleaner_threads >= 1, "log.cleaner.threads is at least 1"
    slots = dedupe_buffer_size // cleaner_threads // BYTES_PER_ENTRY
    return max(1, int(slots * load_factor))


class OffsetMap:
    """Key → the largest offset seen for it, at most ``capacity`` keys."""

    # Invariant: every mapped offset <= latest_offset; len(self) <= capacity.

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, "an offset map holds at least one key"
        self.capacity = capacity
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = NO_OFFSET

    def __len__(self) -> int:
        return len(self._offsets)

    def has_room_for(self, keys: int) -> bool:
        """Could ``keys`` new keys be mapped without passing the capacity?"""
        return len(self._offsets) + keys <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        assert offset >= self.latest_offset, "offsets are mapped in log order"
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, ``NO_OFFSET`` (-1) when it is not mapped."""
        return self._offsets.get(key, NO_OFFSET)

    def update_latest_offset(self, offset: int) -> None:
        """Kafka ``updateLatestOffset``: batches without keys (markers, aborted data) were
        read up to ``offset`` too."""
        self.latest_offset = max(self.latest_offset, offset)
