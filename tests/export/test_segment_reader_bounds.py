"""The Spark readers inflate through the same bound as the broker (issue 9): a bomb in a
segment is a ``SegmentReadError`` naming the batch, read in bounded memory."""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.export.segment_reader import SegmentReadError, SegmentSplit, read_segment_rows
from pykraft.storage.record_batch import CompressionType
from pykraft.storage.varint import encode_varint
from tests.storage.bombs import zstd_zeros_frame
from tests.storage.test_record_validation import batch_of

GIB = 1 << 30


def test_a_zstd_bomb_in_a_segment_is_a_read_error(tmp_path: Path) -> None:
    body = b"\x00\x00\x00\x01" + encode_varint(GIB)
    prefix = encode_varint(len(body) + GIB + 1) + body
    segment = tmp_path / f"{0:020d}.log"
    segment.write_bytes(batch_of(zstd_zeros_frame(prefix, GIB), 1, CompressionType.ZSTD))
    split = SegmentSplit(str(segment), "t", 0, 0, 0, None)
    with pytest.raises(SegmentReadError, match="longer than the limit"):
        list(read_segment_rows(split))
