"""The C record walk (storage/_record_walk.c) agrees with the Python reference on every input.

Why: the produce path walks records in C for issue 9's throughput bound, while the Python walk
stays the readable reference and the fallback. A disagreement would accept a batch the
reference rejects (or the reverse), so Hypothesis compares ``(status, index, pos, last_delta)``
of both over arbitrary bytes, mutated valid record sections (the generators of
test_record_validation.py), and records built field by field from edge-case varints — with
offset deltas that leave gaps, as the cleaner's rebuilt batches do (issue 14).
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from pykraft.storage import record_walk
from pykraft.storage.record_batch import BATCH_HEADER_SIZE, CompressionType
from pykraft.storage.record_walk import WalkStatus, c_walk_records, py_walk_records
from pykraft.storage.records import SimpleRecord, build_batch
from pykraft.storage.varint import decode_varint, decode_varlong, encode_varint
from tests.storage.test_record_validation import TWO, mutated
from tests.storage.test_records import records_strategy

NO_DELTA_BOUND = 2**31 - 1


def assert_same_walk(
    data: bytes,
    pos: int,
    index: int,
    stop: int,
    max_record_bytes: int,
    last_delta: int = -1,
    max_delta: int = NO_DELTA_BOUND,
) -> None:
    expected = py_walk_records(data, pos, index, stop, max_record_bytes, last_delta, max_delta)
    for buffer in (data, bytearray(data)):
        got = c_walk_records(buffer, pos, index, stop, max_record_bytes, last_delta, max_delta)
        assert got == expected


def test_the_extension_is_built_so_produce_walks_in_c() -> None:
    """``pip install -e .`` builds it; silently walking in Python would cost 25% of produce."""
    assert record_walk.ACCELERATED
    assert record_walk.walk_records is c_walk_records


def test_an_honest_section_walks_to_its_end_in_both() -> None:
    records = [SimpleRecord(b"x" * 1024, timestamp=1000 + i) for i in range(64)]
    data = build_batch(records)[BATCH_HEADER_SIZE:]
    expected = (WalkStatus.DONE, 64, len(data), 63)
    assert c_walk_records(data, 0, 0, 64, len(data), -1, 63) == expected
    assert_same_walk(data, 0, 0, 64, len(data), -1, 63)


def test_any_contiguous_buffer_is_walked_and_other_objects_are_refused() -> None:
    expected = (WalkStatus.DONE, 2, len(TWO), 1)
    assert c_walk_records(memoryview(TWO), 0, 0, 2, len(TWO), -1, 1) == expected
    with pytest.raises(TypeError):
        c_walk_records("not bytes", 0, 0, 2, 10, -1, 1)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        c_walk_records(TWO, -1, 0, 2, len(TWO), -1, 1)
    with pytest.raises(ValueError, match=">= 0"):
        c_walk_records(TWO, 0, -1, 2, len(TWO), -1, 1)
    with pytest.raises(ValueError, match=">= -1"):
        c_walk_records(TWO, 0, 0, 2, len(TWO), -2, 1)


def gapped_section(deltas: list[int]) -> bytes:
    """The records section of a batch whose records keep these offset deltas (a batch the
    cleaner rebuilt: Kafka's MemoryRecords.filterTo keeps each retained record's offset)."""
    records = [SimpleRecord(b"v%d" % delta, key=b"k%d" % delta) for delta in deltas]
    plain = build_batch(records)[BATCH_HEADER_SIZE:]
    status, _, pos, _ = py_walk_records(plain, 0, 0, len(deltas), len(plain), -1, NO_DELTA_BOUND)
    assert status is WalkStatus.DONE and pos == len(plain)
    out, pos = bytearray(), 0
    for index, delta in enumerate(deltas):
        length, body_start = decode_varint(plain, pos, "length")
        body = bytearray(plain[body_start : body_start + length])
        _, after_timestamp = decode_varlong(body, 1, "timestampDelta")
        _, after_delta = decode_varint(body, after_timestamp, "offsetDelta")
        assert body[after_timestamp:after_delta] == encode_varint(index)
        body[after_timestamp:after_delta] = encode_varint(delta)
        out += encode_varint(len(body)) + body
        pos = body_start + length
    return bytes(out)


@pytest.mark.parametrize(
    ("deltas", "last_offset_delta", "expected_status", "expected_index"),
    [
        ([0, 2, 5], 5, WalkStatus.DONE, 3),  # gaps, the last record at lastOffsetDelta
        ([3, 4, 9], 12, WalkStatus.DONE, 3),  # the first record's gone too; the batch's end kept
        ([1], 1, WalkStatus.DONE, 1),
        ([0, 2, 2], 5, WalkStatus.CORRUPT, 2),  # a repeated delta
        ([0, 3, 1], 5, WalkStatus.CORRUPT, 2),  # going back
        ([0, 2, 6], 5, WalkStatus.CORRUPT, 2),  # past lastOffsetDelta
        ([-1, 0], 5, WalkStatus.CORRUPT, 0),  # negative
    ],
)
def test_offset_deltas_may_leave_gaps_but_only_increase_within_last_offset_delta(
    deltas: list[int], last_offset_delta: int, expected_status: WalkStatus, expected_index: int
) -> None:
    # Kafka's DefaultRecord.readFrom: offset = baseOffset + offsetDelta, whatever the index.
    data = gapped_section(deltas)
    status, index, _, last = py_walk_records(
        data, 0, 0, len(deltas), len(data), -1, last_offset_delta
    )
    assert (status, index) == (expected_status, expected_index)
    assert last == (deltas[index - 1] if index else -1)
    assert_same_walk(data, 0, 0, len(deltas), len(data), -1, last_offset_delta)


# --------------------------------------------------------------------------------- properties


def padded(unsigned: int, padding: int) -> bytes:
    """``unsigned`` as a varint, with ``padding`` extra zero groups (an over-long encoding)."""
    groups = []
    while True:
        groups.append(unsigned & 0x7F)
        unsigned >>= 7
        if not unsigned:
            break
    groups += [0] * padding
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


EDGE_UNSIGNED = [0, 1, 2, 3, 127, 128, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**64 - 1, 2**64]


@st.composite
def raw_varint(draw: st.DrawFn) -> bytes:
    """A varint as a lying producer might write it: any value up to 71 bits, canonical or
    padded with continuation bytes, up to 11 bytes (past both the varint and varlong caps)."""
    unsigned = draw(st.sampled_from(EDGE_UNSIGNED) | st.integers(0, 2**71 - 1))
    return padded(unsigned, draw(st.integers(0, max(0, 11 - unsigned.bit_length() // 7))))


@st.composite
def varint_field(draw: st.DrawFn, value: int) -> bytes:
    """Mostly ``value`` (zig-zag, sometimes over-long), sometimes a neighbour of it (off by
    one, zero, negative), any varint or stray bytes."""
    kind = draw(st.sampled_from(["exact"] * 6 + ["near"] * 2 + ["padded", "raw", "bytes"]))
    if kind == "near":
        value = draw(st.sampled_from([value - 2, value - 1, value + 1, 0, -1, -2]))
    unsigned = (value << 1) ^ (value >> 63) if value >= 0 else (-value << 1) - 1
    if kind in ("exact", "near"):
        return padded(unsigned, 0)
    if kind == "padded":
        return padded(unsigned, draw(st.integers(1, 6)))
    if kind == "raw":
        return draw(raw_varint())
    return draw(st.binary(max_size=3))


@st.composite
def sized(draw: st.DrawFn, low: int, utf8: bool = False) -> bytes:
    """A length (from ``low``, so negative ones too) and that many bytes, give or take one."""
    size = draw(st.sampled_from(range(low, 1)) | st.integers(0, 6))
    data = draw(st.text(max_size=3).map(str.encode) if utf8 and size >= 0 else st.binary())
    data = data[: max(size, 0)].ljust(max(size, 0), b"k")
    data += draw(st.sampled_from([b"", b"", b"", b"x"]))
    return draw(varint_field(size)) + data


@st.composite
def field_built_record(draw: st.DrawFn, index: int) -> bytes:
    """``index`` is the offset delta the record should carry (an index, or one after gaps)."""
    """Record ``index`` built field by field, each field mostly right and sometimes an edge
    case (over-long or overflowing varints, negative sizes, non-UTF-8 header keys, a wrong
    length prefix), so that one wrong field in an otherwise valid record is common."""
    timestamp = draw(st.sampled_from([0, -1, 2**63 - 1, -(2**63)]) | st.integers(-300, 300))
    body = b"\x00" + draw(varint_field(timestamp)) + draw(varint_field(index))
    body += draw(sized(-3)) + draw(sized(-3))  # key, value
    headers = draw(st.sampled_from([0, 1, 2]) | st.integers(-1, 3))
    body += draw(varint_field(headers))
    for _ in range(max(headers, 0)):
        body += draw(sized(-2, utf8=draw(st.booleans()))) + draw(sized(-3))
    return draw(varint_field(len(body))) + body


@st.composite
def field_built_section(draw: st.DrawFn) -> bytes:
    """1-4 records; their offset deltas increase, with gaps half the time (a compacted batch)."""
    count = draw(st.integers(1, 4))
    gaps = draw(st.booleans())
    deltas = sorted(draw(st.sets(st.integers(0, 9), min_size=count, max_size=count)))
    return b"".join(draw(field_built_record(d if gaps else i)) for i, d in enumerate(deltas))


@settings(max_examples=1500, deadline=None)
@given(
    data=st.binary(max_size=200),
    pos=st.integers(0, 210),
    index=st.integers(0, 5),
    stop=st.integers(0, 2**31),
    max_record_bytes=st.integers(-1, 300),
    last_delta=st.integers(-1, 6),
    max_delta=st.integers(-1, 9) | st.just(NO_DELTA_BOUND),
)
@example(
    data=b"\xff\xff\xff\xff\x0f" + TWO,
    pos=0,
    index=0,
    stop=1,
    max_record_bytes=2**31,
    last_delta=-1,
    max_delta=1,
)
def test_property_c_and_python_walks_agree_on_any_bytes(
    data: bytes,
    pos: int,
    index: int,
    stop: int,
    max_record_bytes: int,
    last_delta: int,
    max_delta: int,
) -> None:
    assert_same_walk(data, pos, index, stop, max_record_bytes, last_delta, max_delta)


@settings(max_examples=1500, deadline=None)
@given(data=field_built_section(), stop=st.integers(0, 5), max_delta=st.integers(-1, 10))
def test_property_c_and_python_walks_agree_on_records_built_field_by_field(
    data: bytes, stop: int, max_delta: int
) -> None:
    assert_same_walk(data, 0, 0, stop, len(data))
    assert_same_walk(data, 0, 0, stop, len(data), -1, max_delta)
    assert_same_walk(data, 0, 0, stop, 8)  # TOO_LARGE against NEED_MORE and CORRUPT


@settings(max_examples=400, deadline=None)
@given(records=records_strategy, data=st.data())
def test_property_c_and_python_walks_agree_on_mutated_valid_sections(
    records: list[SimpleRecord], data: st.DataObject
) -> None:
    batch = mutated(build_batch(records, compression=CompressionType.NONE), data)
    section = batch[BATCH_HEADER_SIZE:]
    count = int.from_bytes(batch[57:61], "big", signed=True)
    cut = data.draw(st.integers(0, len(section)), label="cut")  # a chunk boundary, as inflating
    for stop in {count, len(records), 2**31 - 1}:
        assert_same_walk(section, 0, 0, stop, len(section))
        assert_same_walk(section[:cut], 0, 0, stop, len(section))
    status, index, pos, last = py_walk_records(
        section[:cut], 0, 0, len(records), len(section), -1, NO_DELTA_BOUND
    )
    if status is WalkStatus.NEED_MORE:  # resuming where the walk stopped, as iter_record_runs
        assert_same_walk(section, pos, index, len(records), len(section), last)
