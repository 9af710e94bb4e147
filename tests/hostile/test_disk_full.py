"""The disk fills mid-stream (issue 9), on a real file system: a 4 MiB tmpfs mounted as the
broker's first log dir (we run as root; without mount rights the case is skipped and the
injected-fault tests in tests/storage/test_storage_errors.py stand alone).

An idempotent producer streams into a partition on that dir until ENOSPC. The broker answers
KAFKA_STORAGE_ERROR, takes the dir offline (Kafka's ``handleLogDirFailure``) and keeps serving
from its second dir. Space is freed and the broker restarted (Kafka brings a failed dir back
only on restart); the producer's retries then land. Every acknowledged record is in the log
exactly once, none is duplicated, and the log holds nothing the producer never sent.
"""

from __future__ import annotations

import collections
import errno
import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaProducer
from kafka.producer.future import FutureRecordMetadata

from tests.hostile.conftest import SingleBroker
from tests.hostile.test_damaged_files import consume
from tests.integration.conftest import http

SMALL_DISK = Path(f"/tmp/pykraft-hostile-disk-{os.getpid()}")
OTHER_DIR = Path(f"/tmp/pykraft-hostile-other-{os.getpid()}")
DISK_BYTES = 4 * 1024 * 1024
ROOM_BYTES = 300 * 1024  # what the filler leaves free: about 250 records
RECORD_BYTES = 1024
RECORDS = 600  # more than fits
# Index files reserve their size on disk (storage/index.py), and logs load with the broker's
# defaults before topic overrides are known: keep both small enough for a 4 MiB disk.
SMALL_LOGS = {"log.segment.bytes": "1048576", "log.index.size.max.bytes": "65536"}


@pytest.fixture
def small_disk() -> Iterator[Path]:
    SMALL_DISK.mkdir(exist_ok=True)
    OTHER_DIR.mkdir(exist_ok=True)
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={DISK_BYTES}", "tmpfs", str(SMALL_DISK)],
        capture_output=True, text=True, check=False,
    )  # fmt: skip
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here: {mounted.stderr.strip()}")
    try:
        yield SMALL_DISK
    finally:
        subprocess.run(["umount", "-l", str(SMALL_DISK)], check=False)
        subprocess.run(["rm", "-rf", str(SMALL_DISK), str(OTHER_DIR)], check=False)


def free_bytes(disk: Path) -> int:
    stats = os.statvfs(disk)
    return stats.f_bavail * stats.f_frsize


def fill(disk: Path, leave_bytes: int) -> Path:
    """A file taking all but about ``leave_bytes`` of the disk, written in chunks that re-read
    the free space, so files the broker creates meanwhile cannot make the filler overrun."""
    filler = disk / "filler"
    with filler.open("wb", buffering=0) as file:
        while (room := free_bytes(disk) - leave_bytes) > 0:
            try:
                file.write(b"\0" * min(room, 256 * 1024))
            except OSError as error:  # the broker took the last of the room meanwhile
                if error.errno != errno.ENOSPC:
                    raise
                break
    return filler


def wait_for_partition_files(disk: Path, partition_dir: str) -> None:
    """The partition's first segment and its (space-reserving) indexes exist."""
    first = disk / partition_dir / "00000000000000000000"
    wait_until(lambda: all(first.with_suffix(s).exists() for s in (".log", ".index", ".timeindex")))


def wait_until(predicate: object, timeout_s: float = 30.0) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():  # type: ignore[operator]
            return
        time.sleep(0.2)
    raise AssertionError("timed out")


def value(n: int) -> bytes:
    return b"%06d-" % n + b"x" * (RECORD_BYTES - 7)


@pytest.mark.broker_properties({"log.dirs": f"{SMALL_DISK},{OTHER_DIR}", **SMALL_LOGS})
def test_disk_full_mid_stream_then_freed_loses_and_duplicates_nothing(
    small_disk: Path, single_broker: SingleBroker
) -> None:
    single = single_broker
    single.create_topic("stream", 1)
    wait_for_partition_files(small_disk, "stream-0")  # the first, emptiest dir
    filler = fill(small_disk, ROOM_BYTES)
    producer = KafkaProducer(
        bootstrap_servers=single.bootstrap, acks="all", enable_idempotence=True,
        max_in_flight_requests_per_connection=5, linger_ms=2, retries=2**31 - 1,
        retry_backoff_ms=200, delivery_timeout_ms=60_000, request_timeout_ms=10_000,
        max_block_ms=60_000,
    )  # fmt: skip
    futures: list[FutureRecordMetadata] = []
    try:
        for n in range(RECORDS):
            futures.append(producer.send("stream", value(n), partition=0))

        def broker_reports_the_full_disk() -> bool:
            health = http("GET", single.broker.http_url + "/healthz")
            return str(small_disk) in health.get("offline_log_dirs", [])

        wait_until(broker_reports_the_full_disk)
        assert "No space left on device" in single.broker.log_tail(300)
        single.assert_still_serves()  # from the other dir, while the first is offline

        filler.unlink()  # space freed; Kafka reopens a failed dir on restart
        assert single.broker.terminate() == 0
        single.broker.start()
        single.broker.wait_running()
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)

    acknowledged = {value(n) for n, f in enumerate(futures) if f.succeeded()}
    assert len(acknowledged) == RECORDS, [f.exception for f in futures if f.failed()][:3]
    stored = consume(single, "stream")
    counts = collections.Counter(stored)
    assert [v[:6] for v, c in counts.items() if c > 1] == []  # nothing twice
    assert acknowledged <= set(counts)  # nothing acknowledged lost
    assert set(counts) <= {value(n) for n in range(RECORDS)}  # nothing invented
    assert single.log_end_offset("stream") == len(stored)
    single.assert_still_serves()


@pytest.mark.broker_properties({"log.dirs": str(SMALL_DISK), **SMALL_LOGS})
def test_a_broker_whose_only_log_dir_fails_stops(
    small_disk: Path, single_broker: SingleBroker
) -> None:
    # Kafka halts a broker once every log dir is offline (ReplicaManager.handleLogDirFailure):
    # it can serve nothing, and its leaderships must move.
    single = single_broker
    single.create_topic("doomed", 1)
    wait_for_partition_files(small_disk, "doomed-0")
    fill(small_disk, 8 * 1024)
    producer = KafkaProducer(
        bootstrap_servers=single.bootstrap, acks=1, enable_idempotence=False, retries=0,
        request_timeout_ms=10_000, max_block_ms=10_000,
    )  # fmt: skip
    try:
        outcomes = [producer.send("doomed", value(n), partition=0) for n in range(40)]
        producer.flush(timeout=30)
    finally:
        producer.close(timeout=5)
    failed = [f.exception for f in outcomes if f.failed()]
    assert failed and type(failed[0]).__name__ == "KafkaStorageError"  # error code 56
    assert single.broker.process is not None
    assert single.broker.process.wait(30) == 1
    assert "every log dir is offline" in single.broker.log_tail(100)
