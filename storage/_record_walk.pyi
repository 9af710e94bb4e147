"""Types of the C record walk (storage/_record_walk.c); storage.record_walk wraps it."""

from typing_extensions import Buffer

def walk_batch_records(
    data: Buffer,
    pos: int,
    index: int,
    stop: int,
    max_record_bytes: int,
    last_delta: int,
    max_delta: int,
    /,
) -> tuple[int, int, int, int]: ...
