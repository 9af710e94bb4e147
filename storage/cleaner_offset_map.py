"""The cleaner's key → latest offset map over a log's dirty section (Kafka's ``OffsetMap``).

Kafka's ``SkimpyOffsetMap`` stores an MD5 of each key and its offset in a fixed buffer of
``log.cleaner.dedupe.buffer.size / log.cleaner.threads`` bytes, 24 bytes a slot (16 of hash, 8
of offset), and the cleaner fills it to ``log.cleaner.io.buffer.load.factor`` (0.9) of its slots
before it stops and cleans what it mapped (``Cleaner.buildOffsetMap``).

This map keeps the keys themselves (a Python dict), so no two keys ever collide: a digest
collision would make the cleaner drop a live record for another key's later write. It is
bounded by the same budget in bytes, each entry counted as what it costs here:
``len(key) + ENTRY_OVERHEAD_BYTES`` (the bytes object's header, the int offset and the dict's
slot), so a log of long keys cannot make the map grow past ``log.cleaner.dedupe.buffer.size``.
``latest_offset`` is the last offset mapped, the end of what one cleaning covers.
"""

from __future__ import annotations

DEFAULT_DEDUPE_BUFFER_SIZE = 128 * 1024 * 1024  # log.cleaner.dedupe.buffer.size
DEFAULT_IO_BUFFER_LOAD_FACTOR = 0.9  # log.cleaner.io.buffer.load.factor
# CPython, 64-bit: a bytes object's header (33), an int (28-32), a dict entry (hash, key and
# value pointers, 24) and its share of the sparse index and spare room (~12).
ENTRY_OVERHEAD_BYTES = 100
NO_OFFSET = -1


def offset_map_capacity(
    dedupe_buffer_size: int,
    cleaner_threads: int = 1,
    load_factor: float = DEFAULT_IO_BUFFER_LOAD_FACTOR,
) -> int:
    """Bytes one cleaning's map may hold: Kafka's ``maxDesiredMapSize`` for one cleaner
    thread, in bytes rather than slots."""
    assert cleaner_threads >= 1, "log.cleaner.threads is at least 1"
    return max(1, int(dedupe_buffer_size // cleaner_threads * load_factor))


def entry_bytes(key: bytes) -> int:
    """What mapping ``key`` costs against the budget."""
    return len(key) + ENTRY_OVERHEAD_BYTES


class OffsetMap:
    """Key → the largest offset seen for it, its entries costing at most ``capacity`` bytes
    (``entry_bytes``); one key always fits, however long."""

    # Invariant: every mapped offset <= latest_offset; used_bytes <= capacity, or one entry.

    def __init__(self, capacity: int) -> None:
        assert capacity >= 1, "an offset map holds at least one key"
        self.capacity = capacity
        self.used_bytes = 0
        self._offsets: dict[bytes, int] = {}
        self.latest_offset = NO_OFFSET

    def __len__(self) -> int:
        return len(self._offsets)

    def has_room_for(self, key: bytes) -> bool:
        """Could ``key`` be mapped (a key already mapped always can) without passing the
        budget? An empty map takes any one key."""
        if key in self._offsets or not self._offsets:
            return True
        return self.used_bytes + entry_bytes(key) <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        assert offset >= self.latest_offset, "offsets are mapped in log order"
        if key not in self._offsets:
            self.used_bytes += entry_bytes(key)
        self._offsets[key] = offset
        self.latest_offset = offset

    def get(self, key: bytes) -> int:
        """The latest offset of ``key``, ``NO_OFFSET`` (-1) when it is not mapped."""
        return self._offsets.get(key, NO_OFFSET)

    def update_latest_offset(self, offset: int) -> None:
        """Kafka ``updateLatestOffset``: batches without keys (markers, aborted data) were
        read up to ``offset`` too."""
        self.latest_offset = max(self.latest_offset, offset)
