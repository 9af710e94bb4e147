"""The Raft entry encoding: round trips, and every malformed blob is a BatchCodecError."""

import crc32c
import pytest

from pykraft.quorum.raft_batch import (
    COMPACT_FORMAT,
    JSON_LINES_FORMAT,
    MAGIC,
    BatchCodecError,
    CompactBatch,
    ProposedBatch,
    decode_batch,
    encode_batch,
)


def batch(*records: bytes, expected: int = 41, epoch: int = 3) -> ProposedBatch:
    return ProposedBatch(
        expected_last_offset=expected,
        epoch=epoch,
        append_time_ms=1_700_000_000_000,
        records=records,
    )


def reseal(body: bytes) -> bytes:
    """Recompute the trailing CRC so a test reaches the check after it."""
    return body + crc32c.crc32c(body).to_bytes(4, "big")


@pytest.mark.parametrize(
    "value",
    [
        batch(b'{"type":"NoOpRecord","version":0}'),
        batch(b"a", b"", b"c" * 70_000, expected=-1, epoch=0),
        batch(*(b"r%d" % i for i in range(10_001))),
    ],
)
def test_round_trip(value: ProposedBatch) -> None:
    assert decode_batch(encode_batch(value)) == value


def compact(payload: bytes = b"[[20,0]]", count: int = 1) -> CompactBatch:
    return CompactBatch(
        expected_last_offset=7, epoch=2, append_time_ms=5, record_count=count, payload=payload
    )


@pytest.mark.parametrize("value", [compact(), compact(b"x" * 300_000, 10_000), compact(b"[")])
def test_compact_round_trip(value: CompactBatch) -> None:
    # The payload is opaque here (metadata.compact_codec checks it), even when it is garbage.
    assert decode_batch(encode_batch(value)) == value


def test_header_starts_with_magic_and_names_the_format() -> None:
    assert encode_batch(batch(b"x"))[:5] == MAGIC + bytes([JSON_LINES_FORMAT])
    assert encode_batch(compact())[:5] == MAGIC + bytes([COMPACT_FORMAT])


def test_a_compact_batch_needs_records_and_a_payload() -> None:
    with pytest.raises(BatchCodecError, match="at least one record"):
        encode_batch(compact(count=0))
    with pytest.raises(BatchCodecError, match="payload must not be empty"):
        encode_batch(compact(b""))
    header_only = encode_batch(compact(b"x"))[:-5]
    check_rejected(reseal(header_only), "has no payload")


def test_an_empty_batch_is_refused() -> None:
    with pytest.raises(BatchCodecError, match="at least one record"):
        encode_batch(batch())


def check_rejected(blob: bytes, message: str) -> None:
    with pytest.raises(BatchCodecError, match=message):
        decode_batch(blob)


def test_malformed_blobs_are_rejected_with_a_sentence() -> None:
    good = encode_batch(batch(b"abc", b"de"))
    body = good[:-4]
    check_rejected(b"", "at least")
    check_rejected(good[:-1], "checksum")
    check_rejected(good[:10] + bytes([good[10] ^ 1]) + good[11:], "checksum")
    check_rejected(reseal(b"XXXX" + body[4:]), "not a metadata batch")
    check_rejected(reseal(body[:4] + b"\x07" + body[5:]), "format version 7")
    check_rejected(reseal(body[:-1]), "past the end")
    check_rejected(reseal(body + b"zz"), "trailing bytes")
    # record count 0, then a count far above the bound
    count_at = 4 + 1 + 8 + 4 + 8
    check_rejected(
        reseal(body[:count_at] + b"\x00\x00\x00\x00" + body[count_at + 4 :]), "record count 0"
    )
    check_rejected(reseal(body[:count_at] + b"\x7f\xff\xff\xff" + body[count_at + 4 :]), "outside")


def test_non_bytes_are_rejected() -> None:
    check_rejected("text", "bytes")  # type: ignore[arg-type]
