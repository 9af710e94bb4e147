"""KIP-966: the clean-shutdown marker holds the broker epoch (Kafka's CleanShutdownFileHandler),
read back at the next start as the registration's PreviousBrokerEpoch (Kafka's
LogManager.readBrokerEpochFromCleanShutdownFiles)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from pykraft.storage.clean_shutdown import (
    decode_clean_shutdown,
    encode_clean_shutdown,
    previous_broker_epoch,
)
from pykraft.storage.file_log_dir import FileLogDir
from pykraft.storage.log_dir_store import LogDirStore
from pykraft.storage.log_manager import LogManager
from pykraft.storage.memory_log_dir import MemoryLogDir
from pykraft.storage.recovery import CLEAN_SHUTDOWN_FILE
from tests.storage.test_log_manager import CONFIG, ORDERS_0, append


def test_the_marker_is_kafkas_json() -> None:
    assert json.loads(encode_clean_shutdown(42)) == {"version": 0, "brokerEpoch": 42}
    assert decode_clean_shutdown(encode_clean_shutdown(42)) == 42


@pytest.mark.parametrize(
    "data", [b"", b"{", b"[]", b'{"version":0}', b'{"brokerEpoch":"42"}', b"\xff"]
)
def test_a_marker_without_an_epoch_reads_as_none(data: bytes) -> None:
    assert decode_clean_shutdown(data) is None


@pytest.mark.parametrize(
    ("epochs", "live", "expected"),
    [
        ([7, 7], True, 7),
        ([7, 8], True, -1),  # dirs disagree
        ([7, None], True, -1),  # one dir was not cleanly shut down
        ([7, 7], False, -1),  # a dir is offline
        ([], True, -1),
    ],
)
def test_previous_broker_epoch(epochs: list[int | None], live: bool, expected: int) -> None:
    assert previous_broker_epoch(epochs, all_dirs_live=live) == expected


def test_a_clean_shutdown_writes_the_epoch_and_the_next_start_reads_it(tmp_path: Path) -> None:
    dirs: list[LogDirStore] = [
        FileLogDir(tmp_path / "a"),
        MemoryLogDir(Path("/sim/b"), directory_id="dir-b"),
    ]
    manager = LogManager.open(dirs, CONFIG, now_ms=0)
    assert manager.previous_broker_epoch() == -1  # a first start
    append(manager.get_or_create_log(ORDERS_0, now_ms=0), 3)
    manager.shutdown(broker_epoch=42)
    marker = json.loads((tmp_path / "a" / CLEAN_SHUTDOWN_FILE).read_bytes())
    assert marker == {"version": 0, "brokerEpoch": 42}
    restarted = LogManager.open(dirs, CONFIG, now_ms=0)
    assert restarted.previous_broker_epoch() == 42
    assert not (tmp_path / "a" / CLEAN_SHUTDOWN_FILE).exists()  # a crash from now on: -1
    # A crash (no shutdown) leaves no marker: the start after it sends -1.
    assert LogManager.open(dirs, CONFIG, now_ms=0).previous_broker_epoch() == -1
