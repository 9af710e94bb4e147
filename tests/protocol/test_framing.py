"""FrameDecoder: h11-style incremental framing with Kafka's size checks.

Reference: Kafka's ``NetworkReceive.readFrom`` rejects a negative size and a size above
``socket.request.max.bytes`` ("Invalid receive (size = N larger than 104857600)") and the
``SocketServer`` closes only that connection.
"""

from __future__ import annotations

import itertools
import struct

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.protocol.errors import FrameError, ProtocolError
from pykraft.protocol.framing import (
    DEFAULT_SOCKET_REQUEST_MAX_BYTES,
    FrameDecoder,
    encode_frame,
    frame_response,
)
from pykraft.protocol.headers import encode_response_header
from pykraft.protocol.segments import Segments

payloads = st.lists(st.binary(max_size=300), max_size=12)


def split(stream: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({0, len(stream), *(cut % (len(stream) + 1) for cut in cuts)})
    return [stream[a:b] for a, b in itertools.pairwise(points)]


def drain(decoder: FrameDecoder, chunks: list[bytes]) -> list[bytes]:
    frames: list[bytes] = []
    for chunk in chunks:
        decoder.receive_data(chunk)
        while (frame := decoder.next_frame()) is not None:
            frames.append(bytes(frame))
    return frames


@given(payloads, st.lists(st.integers(min_value=0, max_value=10_000), max_size=40))
def test_any_split_yields_the_same_frames(frames: list[bytes], cuts: list[int]) -> None:
    stream = b"".join(encode_frame(frame) for frame in frames)
    decoder = FrameDecoder(max_frame_bytes=300)
    assert drain(decoder, split(stream, cuts)) == frames
    assert decoder.buffered_bytes == 0


@given(payloads, st.integers(min_value=1, max_value=7))
def test_byte_at_a_time(frames: list[bytes], step: int) -> None:
    stream = b"".join(encode_frame(frame) for frame in frames)
    chunks = [stream[i : i + step] for i in range(0, len(stream), step)]
    assert drain(FrameDecoder(max_frame_bytes=300), chunks) == frames


@given(
    st.integers(min_value=301, max_value=2**31 - 1),
    st.binary(max_size=20),
    st.integers(min_value=0, max_value=4),
)
def test_oversized_frame_raises_once_its_size_is_known(size: int, tail: bytes, cut: int) -> None:
    stream = struct.pack(">i", size) + tail
    decoder = FrameDecoder(max_frame_bytes=300)
    with pytest.raises(FrameError, match=r"exceeds socket\.request\.max\.bytes"):
        decoder.receive_data(stream[:cut])
        assert decoder.next_frame() is None, "size not complete yet"
        decoder.receive_data(stream[cut:])


@given(st.integers(min_value=-(2**31), max_value=-1))
def test_negative_size_raises(size: int) -> None:
    decoder = FrameDecoder()
    with pytest.raises(FrameError, match="negative") as raised:
        decoder.receive_data(struct.pack(">i", size))
    assert raised.value.size == size
    assert isinstance(raised.value, ProtocolError)


@given(payloads)
def test_frames_before_a_bad_size_are_still_delivered(frames: list[bytes]) -> None:
    decoder = FrameDecoder(max_frame_bytes=300)
    decoder.receive_data(b"".join(encode_frame(frame) for frame in frames))
    delivered = []
    for _ in frames:
        frame = decoder.next_frame()
        assert frame is not None
        delivered.append(bytes(frame))
    assert delivered == frames
    with pytest.raises(FrameError):
        decoder.receive_data(struct.pack(">i", 301))
    with pytest.raises(FrameError):
        decoder.next_frame()


def test_a_failed_decoder_stays_failed() -> None:
    decoder = FrameDecoder(max_frame_bytes=10)
    with pytest.raises(FrameError):
        decoder.receive_data(struct.pack(">i", 11))
    with pytest.raises(FrameError):
        decoder.next_frame()
    with pytest.raises(FrameError):
        decoder.receive_data(encode_frame(b"ok"))


def test_size_exactly_at_the_limit_is_accepted() -> None:
    decoder = FrameDecoder(max_frame_bytes=5)
    decoder.receive_data(encode_frame(b"12345"))
    assert decoder.next_frame() == bytearray(b"12345")


def test_empty_frame_is_a_frame() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame(b"") + encode_frame(b"x"))
    assert decoder.next_frame() == bytearray()
    assert decoder.next_frame() == bytearray(b"x")
    assert decoder.next_frame() is None


def test_frames_are_owned_by_the_caller() -> None:
    decoder = FrameDecoder()
    decoder.receive_data(encode_frame(b"abc") + encode_frame(b"def"))
    first = decoder.next_frame()
    assert first is not None
    first[0:3] = b"XYZ"  # the broker patches batches in place
    assert decoder.next_frame() == bytearray(b"def")


def test_default_limit_is_kafkas_100_mib() -> None:
    assert DEFAULT_SOCKET_REQUEST_MAX_BYTES == 104857600
    decoder = FrameDecoder()
    # 0x47455420 is "GET ": an HTTP client on the Kafka port (Kafka logs size = 1195725856).
    with pytest.raises(FrameError, match="1195725856"):
        decoder.receive_data(b"GET / HTTP/1.1\r\n")


def test_buffer_stays_bounded_by_one_frame_plus_one_read() -> None:
    decoder = FrameDecoder(max_frame_bytes=1000)
    stream = b"".join(encode_frame(bytes([n]) * 999) for n in range(50))
    high_water = 0
    for start in range(0, len(stream), 700):
        decoder.receive_data(stream[start : start + 700])
        while decoder.next_frame() is not None:
            pass
        high_water = max(high_water, decoder.buffered_bytes)
    assert high_water <= 1000 + 4
    assert decoder.buffered_bytes == 0


def test_frame_response_prefixes_size_and_header() -> None:
    body = Segments.of([b"\x00\x01", memoryview(b"\x02\x03\x04")])
    framed = frame_response(7, 1, body)
    assert framed.length == 4 + 5 + 5
    flat = framed.to_bytes(lambda part: b"")
    assert flat == struct.pack(">ii", 10, 7) + b"\x00" + b"\x00\x01\x02\x03\x04"
    unframed = frame_response(7, 0, b"xy").to_bytes(lambda part: b"")
    assert unframed == struct.pack(">ii", 6, 7) + b"xy"


@pytest.mark.parametrize("header_version", [0, 1])
@pytest.mark.parametrize(
    "body", [b"", b"abc", bytearray(b"abcd"), memoryview(b"abcde"), memoryview(b"xyzw")[1:3]]
)
def test_frame_response_is_size_then_the_encoded_header_then_the_body(
    header_version: int, body: bytes | bytearray | memoryview
) -> None:
    header = encode_response_header(-5, header_version)
    framed = frame_response(-5, header_version, body)
    flat = framed.to_bytes(lambda part: b"")
    assert flat == struct.pack(">i", len(header) + len(bytes(body))) + header + bytes(body)
    assert framed.length == len(flat) and framed.parts[1] is body  # the body is not copied


def test_frame_response_has_no_header_version_two() -> None:
    with pytest.raises(AssertionError):
        frame_response(1, 2, b"")
