"""The C record walk (storage/_record_walk.c) agrees with the Python reference on every input.

Why: the produce path walks records in C for issue 9's throughput bound, while the Python walk
stays the readable reference and the fallback. A disagreement would accept a batch the
reference rejects (or the reverse), so Hypothesis compares ``(status, index, pos)`` of both
over arbitrary bytes, mutated valid record sections (the generators of
test_record_validation.py), and records built field by field from edge-case varints.
"""

from __future__ import annotations

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from storage import record_walk
from storage.record_batch import BATCH_HEADER_SIZE, CompressionType
from storage.record_walk import WalkStatus, c_walk_records, py_walk_records
from storage.records import SimpleRecord, build_batch
from tests.storage.test_record_validation import TWO, mutated, record
from tests.storage.test_records import records_strategy


def assert_same_walk(data: bytes, pos: int, index: int, stop: int, max_record_bytes: int) -> None:
    expected = py_walk_records(data, pos, index, stop, max_record_bytes)
    for buffer in (data, bytearray(data)):
        assert c_walk_records(buffer, pos, index, stop, max_record_bytes) == expected


def test_the_extension_is_built_so_produce_walks_in_c() -> None:
    """``pip install -e .`` builds it; silently walking in Python would cost 25% of produce."""
    assert record_walk.ACCELERATED
    assert record_walk.walk_records is c_walk_records


def test_an_honest_section_walks_to_its_end_in_both() -> None:
    records = [SimpleRecord(b"x" * 1024, timestamp=1000 + i) for i in range(64)]
    data = build_batch(records)[BATCH_HEADER_SIZE:]
    assert c_walk_records(data, 0, 0, 64, len(data)) == (WalkStatus.DONE, 64, len(data))
    assert_same_walk(data, 0, 0, 64, len(data))


def test_any_contiguous_buffer_is_walked_and_other_objects_are_refused() -> None:
    expected = (WalkStatus.DONE, 2, len(TWO))
    assert c_walk_records(memoryview(TWO), 0, 0, 2, len(TWO)) == expected
    with pytest.raises(TypeError):
        c_walk_records("not bytes", 0, 0, 2, 10)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=">= 0"):
        c_walk_records(TWO, -1, 0, 2, len(TWO))
    with pytest.raises(ValueError, match=">= 0"):
        c_walk_records(TWO, 0, -1, 2, len(TWO))


# --------------------------------------------------------------------------------- properties


@st.composite
def raw_varint(draw: st.DrawFn) -> bytes:
    """A varint as a lying producer might write it: any value up to 71 bits, canonical or
    padded with continuation bytes, up to 11 bytes (past both the varint and varlong caps)."""
    value = draw(
        st.sampled_from([0, 1, 2, 3, 127, 128, 2**31 - 1, 2**31, 2**32 - 1, 2**32, 2**64 - 1])
        | st.integers(0, 2**71 - 1)
    )
    groups = []
    while True:
        groups.append(value & 0x7F)
        value >>= 7
        if not value:
            break
    groups += [0] * draw(st.integers(0, max(0, 11 - len(groups))))
    return bytes([g | 0x80 for g in groups[:-1]] + [groups[-1]])


@st.composite
def field_built_record(draw: st.DrawFn) -> bytes:
    """A record whose every field is an edge-case varint or stray bytes, headers included
    (with keys that may not be UTF-8), and whose length prefix may or may not be right."""
    field = raw_varint() | st.binary(max_size=3)
    body = b"\x00" + draw(field) + draw(field)  # attributes, timestampDelta, offsetDelta
    for _ in range(2):  # key, value
        body += draw(field) + draw(st.binary(max_size=6))
    body += draw(field)  # headersCount
    for _ in range(draw(st.integers(0, 3))):
        body += draw(field) + draw(st.binary(max_size=6) | st.just("k\u00e9".encode()))
        body += draw(field) + draw(st.binary(max_size=4))
    return draw(st.sampled_from([record(body), draw(raw_varint()) + body]))


@settings(max_examples=1500, deadline=None)
@given(
    data=st.binary(max_size=200),
    pos=st.integers(0, 210),
    index=st.integers(0, 5),
    stop=st.integers(0, 2**31),
    max_record_bytes=st.integers(-1, 300),
)
@example(data=b"\xff\xff\xff\xff\x0f" + TWO, pos=0, index=0, stop=1, max_record_bytes=2**31)
def test_property_c_and_python_walks_agree_on_any_bytes(
    data: bytes, pos: int, index: int, stop: int, max_record_bytes: int
) -> None:
    assert_same_walk(data, pos, index, stop, max_record_bytes)


@settings(max_examples=600, deadline=None)
@given(records=st.lists(field_built_record(), min_size=1, max_size=4), stop=st.integers(0, 6))
def test_property_c_and_python_walks_agree_on_records_built_from_edge_varints(
    records: list[bytes], stop: int
) -> None:
    data = b"".join(records)
    assert_same_walk(data, 0, 0, stop, len(data))
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
    status, index, pos = py_walk_records(section[:cut], 0, 0, len(records), len(section))
    if status is WalkStatus.NEED_MORE:  # resuming where the walk stopped, as iter_record_runs
        assert_same_walk(section, pos, index, len(records), len(section))
