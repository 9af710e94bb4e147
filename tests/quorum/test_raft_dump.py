"""pysyncobj's full dump in our own format: header + embedded checkpoint, never pickle."""

from pathlib import Path

import attrs
import pytest

from pykraft.quorum.raft_dump import DumpError, DumpHeader, RaftEntry, read_dump, write_dump


def header(checkpoint: Path | None) -> DumpHeader:
    return DumpHeader(
        next_offset=42,
        last_raft_index=77,
        epoch=3,
        last_entry=RaftEntry(command=b"\x00\x80pickled-bytes", index=77, term=3),
        prev_entry=RaftEntry(command=b"\x01", index=76, term=3),
        voters=("127.0.0.1:9093", "127.0.0.1:9094"),
        checkpoint_name=None if checkpoint is None else checkpoint.name,
        checkpoint_size=0 if checkpoint is None else checkpoint.stat().st_size,
    )


def test_entries_of_megabytes_stay_out_of_the_header(tmp_path: Path) -> None:
    # A 10,000-partition topic is one Raft entry of megabytes.
    big = attrs.evolve(
        header(None), last_entry=RaftEntry(command=b"\n{" * 2_000_000, index=9, term=2)
    )
    write_dump(tmp_path / "dump.bin", big, None)
    assert read_dump(tmp_path / "dump.bin")[0] == big


def test_round_trip_with_an_embedded_checkpoint(tmp_path: Path) -> None:
    checkpoint = tmp_path / "00000000000000000042-0000000003.checkpoint"
    checkpoint.write_bytes(b'{"type":"SnapshotHeader"}\n' * 1000)
    written = header(checkpoint)
    write_dump(tmp_path / "dump.bin", written, checkpoint)
    read, content = read_dump(tmp_path / "dump.bin")
    assert read == written
    assert content == checkpoint.read_bytes()
    # pysyncobj compares these tuples with its journal's entries.
    assert read.last_entry.as_tuple() == (b"\x00\x80pickled-bytes", 77, 3)


def test_an_empty_state_has_no_checkpoint(tmp_path: Path) -> None:
    write_dump(tmp_path / "dump.bin", header(None), None)
    read, content = read_dump(tmp_path / "dump.bin")
    assert read.checkpoint_name is None and content == b""


@pytest.mark.parametrize(
    ("data", "message"),
    [
        (b"", "no header line"),
        (b"\x80\x04K\x01.", "no header line"),
        (b"not json\n", "not JSON"),
        (b'{"format":"other"}\n', "not a pykraft-raft-dump"),
        (b'{"format":"pykraft-raft-dump","version":9}\n', "unsupported dump version"),
        (b'{"format":"pykraft-raft-dump","version":1}\n', "lacks"),
    ],
)
def test_malformed_dumps_name_the_file(tmp_path: Path, data: bytes, message: str) -> None:
    path = tmp_path / "dump.bin"
    path.write_bytes(data)
    with pytest.raises(DumpError, match=message) as caught:
        read_dump(path)
    assert str(path) in str(caught.value)


def test_a_truncated_checkpoint_is_detected(tmp_path: Path) -> None:
    checkpoint = tmp_path / "00000000000000000042-0000000003.checkpoint"
    checkpoint.write_bytes(b"x" * 100)
    write_dump(tmp_path / "dump.bin", header(checkpoint), checkpoint)
    data = (tmp_path / "dump.bin").read_bytes()
    (tmp_path / "dump.bin").write_bytes(data[:-10])
    with pytest.raises(DumpError, match="truncated"):
        read_dump(tmp_path / "dump.bin")


def test_a_checkpoint_name_cannot_escape_the_directory(tmp_path: Path) -> None:
    write_dump(tmp_path / "dump.bin", header(None), None)
    data = (
        (tmp_path / "dump.bin")
        .read_bytes()
        .replace(b'"checkpoint":null', b'"checkpoint":"../x.checkpoint"')
    )
    (tmp_path / "dump.bin").write_bytes(data)
    with pytest.raises(DumpError, match="bad checkpoint name"):
        read_dump(tmp_path / "dump.bin")
