"""Decompression bombs: small compressed batches that inflate to 1 or 4 GiB (issue 9).

Before the bound, a 46 KB zstd batch inflating to 1 GiB was stored, and a ListOffsets by
timestamp over it drove the broker to 2.1 GB RSS and blocked its event loop for 19.5 s. Now a
records section inflates in 256 KiB chunks to at most 64x its batch's size (1 MiB floor,
``storage/record_walk.py``): Produce answers INVALID_RECORD within a second and writes nothing,
and a bomb already on disk (written into the segment while the broker was down) answers
ListOffsets with an error instead of inflating it; Fetch serves it as stored bytes (a broker
never inflates to serve a fetch). The broker's peak RSS (VmHWM) stays under 300 MB throughout.

Bombs are built by hand, cheaply, once per session: zstd as RLE blocks (4 bytes per 128 KiB of
zeros), gzip as repeated members of one deflated 64 MiB of zeros.
"""

from __future__ import annotations

import functools
import gzip

import pytest

from pykraft.protocol.errors import Errors
from pykraft.storage.log_reader import MAX_TIMESTAMP
from pykraft.storage.record_batch import CompressionType, patch_base_offset
from pykraft.storage.varint import encode_varint
from tests.hostile.conftest import SingleBroker
from tests.hostile.raw_records import (
    ANSWER_LIMIT_S,
    RSS_LIMIT_BYTES,
    TIMESTAMP,
    fetch,
    list_offsets,
    peak_rss_bytes,
    produce,
    raw_batch,
)
from tests.storage.bombs import ZSTD_BLOCK_BYTES, zstd_zeros_frame

GIB = 1 << 30
GZIP_MEMBER_ZEROS = 64 << 20
HONEST_RECORD = b"\x0e\x00\x00\x00\x01\x02v\x00"  # 7 bytes: offsetDelta 0, null key, "v"
GZIP_TOPIC_MAX_MESSAGE_BYTES = 8 << 20  # the 4 GiB gzip bomb is about 4.2 MB compressed


def record_prefix(inflated_bytes: int) -> bytes:
    """The start of a record that claims (nearly) all of ``inflated_bytes`` as its value:
    length, attributes, timestampDelta, offsetDelta, null key, value length."""
    value = min(inflated_bytes, 2**31 - 64)
    body_start = b"\x00\x00\x00\x01" + encode_varint(value)
    return encode_varint(len(body_start) + value + 1) + body_start


def zstd_bomb(inflated_bytes: int) -> bytes:
    """One zstd frame: the record prefix, then zeros."""
    return zstd_zeros_frame(record_prefix(inflated_bytes), inflated_bytes)


@functools.cache
def gzip_bomb(inflated_bytes: int) -> bytes:
    """Concatenated gzip members: the record prefix, then 64 MiB of zeros again and again."""
    zeros = gzip.compress(bytes(GZIP_MEMBER_ZEROS), compresslevel=9, mtime=0)
    prefix = gzip.compress(record_prefix(inflated_bytes), mtime=0)
    return prefix + zeros * (inflated_bytes // GZIP_MEMBER_ZEROS)


def bombs() -> dict[str, tuple[bytes, CompressionType]]:
    return {
        "zstd 1 GiB": (zstd_bomb(GIB), CompressionType.ZSTD),
        "zstd 4 GiB": (zstd_bomb(4 * GIB), CompressionType.ZSTD),
        "gzip 4 GiB": (gzip_bomb(4 * GIB), CompressionType.GZIP),
    }


def test_bombs_are_cheap_to_build_and_really_inflate_that_far() -> None:
    import zlib

    import zstandard

    payload, _ = bombs()["zstd 4 GiB"]
    assert len(payload) < 200_000
    reader = zstandard.ZstdDecompressor().stream_reader(payload)
    inflated = 0
    while chunk := reader.read(64 << 20):
        inflated += len(chunk)
    assert inflated >= 4 * GIB - ZSTD_BLOCK_BYTES
    member = gzip.compress(bytes(GZIP_MEMBER_ZEROS), compresslevel=9, mtime=0)
    assert len(zlib.decompress(member, 31)) == GZIP_MEMBER_ZEROS
    assert len(gzip_bomb(4 * GIB)) < GZIP_TOPIC_MAX_MESSAGE_BYTES


@pytest.mark.broker_properties({"message.max.bytes": str(GZIP_TOPIC_MAX_MESSAGE_BYTES)})
def test_produced_bombs_are_refused_within_a_second_in_bounded_memory(
    single_broker: SingleBroker,
) -> None:
    single_broker.create_topic(
        "bombs", 1, **{"max.message.bytes": str(GZIP_TOPIC_MAX_MESSAGE_BYTES)}
    )
    honest = raw_batch(HONEST_RECORD, 1)
    assert produce(single_broker, "bombs", honest)[0] == Errors.NONE  # the log is set up
    files_before = single_broker.partition_files("bombs")
    answers = {}
    for case, (payload, codec) in bombs().items():
        error, elapsed = produce(single_broker, "bombs", raw_batch(payload, 1, codec))
        answers[case] = (Errors(error), elapsed < ANSWER_LIMIT_S)
    assert answers == {case: (Errors.INVALID_RECORD, True) for case in bombs()}
    assert peak_rss_bytes(single_broker) < RSS_LIMIT_BYTES
    assert single_broker.log_end_offset("bombs") == 1
    assert single_broker.partition_files("bombs") == files_before
    single_broker.assert_still_serves()


def test_a_bomb_already_on_disk_is_never_inflated_to_answer(single_broker: SingleBroker) -> None:
    single_broker.create_topic("stored")
    honest = raw_batch(HONEST_RECORD, 1)
    assert produce(single_broker, "stored", honest)[0] == Errors.NONE
    single_broker.broker.kill()  # unclean: the log is recovered (and indexed) on start
    bomb = bytearray(raw_batch(zstd_bomb(4 * GIB), 1, CompressionType.ZSTD,
                               timestamp=TIMESTAMP + 1000))  # fmt: skip
    patch_base_offset(bomb, 0, 1)
    segment = single_broker.log_dir / "stored-0" / f"{0:020d}.log"
    with segment.open("ab") as log:
        log.write(bomb)
    single_broker.broker.start()
    single_broker.broker.wait_running()

    for timestamp in (TIMESTAMP + 500, MAX_TIMESTAMP):  # offsetsForTimes, and KIP-734's -3
        error, _, elapsed = list_offsets(single_broker, "stored", timestamp)
        assert (Errors(error), elapsed < ANSWER_LIMIT_S) == (Errors.CORRUPT_MESSAGE, True)
    error, offset, _ = list_offsets(single_broker, "stored", TIMESTAMP)  # before the bomb
    assert (Errors(error), offset) == (Errors.NONE, 0)
    error, size, elapsed = fetch(single_broker, "stored", 1)
    assert (Errors(error), size, elapsed < ANSWER_LIMIT_S) == (Errors.NONE, len(bomb), True)
    assert peak_rss_bytes(single_broker) < RSS_LIMIT_BYTES
    single_broker.assert_still_serves()
