"""The retained metadata log read from a controller's Raft journal (pure; no Spark)."""

from __future__ import annotations

import pickle
import struct
from pathlib import Path

import pytest

from pykraft.export.metadata_journal import (
    JournalError,
    batch_blob,
    read_journal,
    read_retained_log,
    retained_image,
)
from pykraft.metadata.codec import encode_record
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from tests.export.fixtures import (
    MetadataFixture,
    build_fresh_metadata_dir,
    build_metadata_dir,
    cluster_records,
    expected_log_records,
    journal_batches,
)


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> MetadataFixture:
    return build_metadata_dir(tmp_path_factory.mktemp("meta"))


def test_offsets_and_records_equal_the_controllers_apply(meta: MetadataFixture) -> None:
    # quorum.raft_state.apply_entry is the reference: duplicates, no-ops, stale and invalid
    # entries get no offsets; entries above the commit index are not read.
    got = [
        (r.offset, r.epoch, r.append_time_ms, encode_record(r.record))
        for r in read_retained_log(meta.metadata_dir, meta.metadata_dir / "snapshots")
    ]
    expected = expected_log_records(meta)
    assert got == expected
    committed_batches = journal_batches()[:-1]
    assert [line for *_, line in got] == [encode_record(r) for b in committed_batches for r in b]


def test_no_journal_means_no_log(tmp_path: Path) -> None:
    assert read_retained_log(tmp_path, tmp_path) == []


def test_pickled_globals_are_refused() -> None:
    # A journal entry that would run code when unpickled is not a batch, and runs nothing.
    class Evil:
        def __reduce__(self) -> tuple[object, tuple[str]]:
            return (print, ("pwned",))

    command = b"\x00" + pickle.dumps((0, [Evil()]), protocol=2)
    assert batch_blob(command) is None
    assert batch_blob(b"\x01") is None  # pysyncobj no-op


def test_truncated_journal_names_file_and_byte(tmp_path: Path, meta: MetadataFixture) -> None:
    source = (meta.metadata_dir / "raft" / "journal.bin").read_bytes()
    path = tmp_path / "journal.bin"
    # Claim the records end further than the last record does: a torn record.
    header_end = struct.unpack_from("<I", source, 36)[0]
    path.write_bytes(source[:36] + struct.pack("<I", header_end + 9) + source[40:])
    with pytest.raises(JournalError, match=f"journal {path} at byte"):
        list(read_journal(path))
    path.write_bytes(b"not a journal")
    with pytest.raises(JournalError, match="not a pysyncobj journal"):
        list(read_journal(path))


def test_a_fresh_clusters_image_comes_from_the_journal_alone(tmp_path: Path) -> None:
    """Issue 15: before the first snapshot (20,000 records) the report had nothing to read."""
    root = build_fresh_metadata_dir(tmp_path / "meta")
    records = cluster_records() + [r for batch in journal_batches() for r in batch]
    image = retained_image(root, root / "snapshots")
    expected = apply_records(MetadataImage.EMPTY, records, offset=len(records) - 1, epoch=3)
    assert image is not None and image.offset == len(records) - 1
    assert (image.topics, image.cluster) == (expected.topics, expected.cluster)
    assert [r.offset for r in read_retained_log(root, root / "snapshots")] == list(
        range(len(records))
    )
    assert retained_image(tmp_path, tmp_path / "snapshots") is None  # no journal at all


def test_the_journal_image_continues_the_dumps_checkpoint(meta: MetadataFixture) -> None:
    image = retained_image(meta.metadata_dir, meta.metadata_dir / "snapshots")
    committed = journal_batches()[:-1]  # the fixture's last batch is not committed yet
    records = cluster_records() + [r for batch in committed for r in batch]
    expected = apply_records(MetadataImage.EMPTY, records, offset=len(records) - 1, epoch=3)
    assert image is not None and image.offset == expected.offset
    assert (image.topics, image.cluster) == (expected.topics, expected.cluster)
