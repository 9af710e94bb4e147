"""Kafka's text checkpoint files: format, atomic replacement, and typed errors.

Reading follows Kafka's CheckpointFile.CheckpointReadBuffer.read
(server-common/src/main/java/org/apache/kafka/server/common/CheckpointFile.java).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from pykraft.storage.atomic_file import write_atomically
from pykraft.storage.checkpoints import (
    RECOVERY_POINT_CHECKPOINT,
    CheckpointError,
    read_leader_epoch_checkpoint,
    read_offset_checkpoint,
    write_leader_epoch_checkpoint,
    write_offset_checkpoint,
)
from pykraft.storage.topic_partition import TopicPartition

PET0, PET1, PET2 = (TopicPartition("pet", n) for n in range(3))


def test_offset_checkpoint_matches_kafkas_text(tmp_path: Path) -> None:
    path = tmp_path / RECOVERY_POINT_CHECKPOINT
    write_offset_checkpoint(path, {PET2: 1003, PET0: 1042, PET1: 977})
    assert path.read_text() == "0\n3\npet 0 1042\npet 1 977\npet 2 1003\n"
    assert read_offset_checkpoint(path) == {PET0: 1042, PET1: 977, PET2: 1003}
    assert not (tmp_path / f"{RECOVERY_POINT_CHECKPOINT}.tmp").exists()


def test_offset_checkpoint_round_trips_dashed_topics_and_big_offsets(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    offsets = {TopicPartition("my-topic.v2", 7): 2**63 - 1, TopicPartition("__x", 0): 0}
    write_offset_checkpoint(path, offsets)
    assert read_offset_checkpoint(path) == offsets


def test_empty_checkpoint_round_trips(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_offset_checkpoint(path, {})
    assert path.read_text() == "0\n0\n"
    assert read_offset_checkpoint(path) == {}


def test_overwrite_replaces_content(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    write_offset_checkpoint(path, {PET0: 1, PET1: 2})
    write_offset_checkpoint(path, {PET0: 5})
    assert read_offset_checkpoint(path) == {PET0: 5}


def test_missing_file_reads_as_empty(tmp_path: Path) -> None:
    assert read_offset_checkpoint(tmp_path / "absent") == {}
    assert read_leader_epoch_checkpoint(tmp_path / "absent") == []


def test_kafka_reads_empty_and_version_only_files_as_no_entries(tmp_path: Path) -> None:
    # CheckpointFile creates the file empty before the first write, so "" and "0\n" are legal.
    path = tmp_path / "cp"
    for text in ["", "0\n"]:
        path.write_text(text)
        assert read_offset_checkpoint(path) == {}


def check_error(tmp_path: Path, text: str, line: int, fragment: str) -> None:
    path = tmp_path / "replication-offset-checkpoint"
    path.write_text(text)
    with pytest.raises(CheckpointError, match=fragment) as caught:
        read_offset_checkpoint(path)
    assert caught.value.path == path
    assert caught.value.line == line
    assert str(path) in str(caught.value)


def test_malformed_offset_checkpoints(tmp_path: Path) -> None:
    # Kafka: "Unrecognised version" / "Malformed line" / "Expected [n] entries ... found only".
    check_error(tmp_path, "1\n0\n", 1, "unrecognised version 1")
    check_error(tmp_path, "zero\n0\n", 1, "malformed version line 'zero'")
    check_error(tmp_path, "0\nthree\npet 0 1\n", 2, "malformed entry count line 'three'")
    check_error(tmp_path, "0\n-1\n", 2, "malformed entry count")
    check_error(tmp_path, "0\n1\npet 0\n", 3, "malformed entry line 'pet 0'")
    check_error(tmp_path, "0\n1\npet 0 1 2\n", 3, "malformed entry line")
    check_error(tmp_path, "0\n1\npet x 1\n", 3, "malformed entry line")
    check_error(tmp_path, "0\n1\npet 0 1.5\n", 3, "malformed entry line")
    check_error(tmp_path, "0\n1\npet -1 5\n", 3, "malformed entry line")
    check_error(tmp_path, "0\n1\npet 0 9223372036854775808\n", 3, "malformed entry line")
    check_error(tmp_path, "0\n2\npet 0 1\npet 1 2\n\n", 5, "malformed entry line ''")
    # A file cut short: fewer entries than the count line promises.
    check_error(tmp_path, "0\n3\npet 0 1042\npet 1 977\n", 2, "expected 3 entries but found 2")
    check_error(tmp_path, "0\n1\npet 0 1\npet 1 1\n", 2, "expected 1 entries but found 2")


def test_non_utf8_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "cp"
    path.write_bytes(b"0\n1\n\xff 0 1\n")
    with pytest.raises(CheckpointError, match="not UTF-8") as caught:
        read_offset_checkpoint(path)
    assert caught.value.line == 0


def test_leader_epoch_checkpoint_format(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    write_leader_epoch_checkpoint(path, [(0, 0), (2, 150), (5, 400)])
    assert path.read_text() == "0\n3\n0 0\n2 150\n5 400\n"
    assert read_leader_epoch_checkpoint(path) == [(0, 0), (2, 150), (5, 400)]


def test_malformed_leader_epoch_checkpoint(tmp_path: Path) -> None:
    path = tmp_path / "leader-epoch-checkpoint"
    for text, line in [("0\n1\n3\n", 3), ("0\n1\n3 4 5\n", 3), ("0\n2\n3 4\n", 2)]:
        path.write_text(text)
        with pytest.raises(CheckpointError) as caught:
            read_leader_epoch_checkpoint(path)
        assert caught.value.line == line


def test_write_atomically_leaves_no_temp_file_and_replaces(tmp_path: Path) -> None:
    path = tmp_path / "file"
    write_atomically(path, b"first")
    write_atomically(path, b"second")
    assert path.read_bytes() == b"second"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]


def test_write_atomically_keeps_old_content_when_the_write_fails(tmp_path: Path) -> None:
    path = tmp_path / "file"
    write_atomically(path, b"old")
    with pytest.raises(TypeError):
        write_atomically(path, "not bytes")  # type: ignore[arg-type]
    assert path.read_bytes() == b"old"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["file"]
