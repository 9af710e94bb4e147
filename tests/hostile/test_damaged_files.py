"""Damaged files (issue 9). At start-up: a broker whose partitions were torn or broken while it
was down — after a clean shutdown, so nothing would otherwise be re-validated — starts, recovers
what it can (cut to the last valid batch, indexes rebuilt), reports what it cannot as offline
(log line, ``/healthz`` degraded, ``/v1/partitions`` role offline, ``pykraft_offline_replicas``)
and serves everything else.

Four partitions are damaged at once, each in one way: 30 bytes cut off the active segment (the
issue's reproduction), 30 bytes cut off an older segment, an older segment's ``.index``
deleted, and a partition that cannot be read at all. We run as root, for whom permission bits
do not make a directory unreadable, so "unreadable" is a segment ``.log`` that is a directory:
opening it fails with EISDIR, an ``OSError`` as EIO or EACCES would be.
"""

from __future__ import annotations

import urllib.request
from pathlib import Path

import pytest
from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.errors import KafkaStorageError

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.fetch import FetchPartition, FetchRequest, FetchTopic
from pykraft.protocol.fetch_client import decode_fetch_response, encode_fetch_request
from tests.broker.wire_client import blocking_exchange, request_frame
from tests.hostile.conftest import SingleBroker
from tests.integration.conftest import http

RECORDS = 40
SEGMENT_BYTES = "1024"  # about 12 one-record batches a segment: several segments each
TOPICS = ("torn-active", "torn-older", "no-index", "unreadable", "intact")


def produce(single: SingleBroker, topic: str, count: int) -> list[int]:
    producer = KafkaProducer(
        bootstrap_servers=single.bootstrap, acks="all", enable_idempotence=False,
        retries=0, request_timeout_ms=10_000, max_block_ms=10_000,
    )  # fmt: skip
    try:
        # One batch a record: .get() before the next send.
        return [
            producer.send(topic, b"%s-%03d" % (topic.encode(), n)).get(timeout=15).offset
            for n in range(count)
        ]
    finally:
        producer.close()


def consume(single: SingleBroker, topic: str, end: int | None = None) -> list[bytes]:
    """Values of partition 0 from offset 0 up to ``end`` (default: until 5 s pass idle)."""
    consumer = KafkaConsumer(
        bootstrap_servers=single.bootstrap, enable_auto_commit=False,
        consumer_timeout_ms=5_000, request_timeout_ms=10_000,
    )  # fmt: skip
    try:
        partition = TopicPartition(topic, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        values: list[bytes] = []
        for message in consumer:
            values.append(message.value)
            if end is not None and message.offset + 1 >= end:
                break
        return values
    finally:
        consumer.close()


def expected(topic: str, count: int) -> list[bytes]:
    return [b"%s-%03d" % (topic.encode(), n) for n in range(count)]


def segments(directory: Path, suffix: str = ".log") -> list[Path]:
    return sorted(directory.glob(f"*{suffix}"))


def cut(path: Path, size: int) -> None:
    with path.open("r+b") as file:
        file.truncate(size)


def metric(single: SingleBroker, name: str) -> float:
    with urllib.request.urlopen(single.broker.http_url + "/metrics", timeout=5) as response:
        text = response.read().decode()
    [value] = [line.split()[-1] for line in text.splitlines() if line.startswith(name + " ")]
    return float(value)


def test_a_broker_with_damaged_partitions_starts_recovers_them_and_serves_the_rest(
    single_broker: SingleBroker,
) -> None:
    single = single_broker
    for topic in TOPICS:
        single.create_topic(topic, 1, **{"segment.bytes": SEGMENT_BYTES})
        assert produce(single, topic, RECORDS) == list(range(RECORDS))
    assert single.broker.terminate() == 0  # a clean shutdown: the marker is written
    assert (single.log_dir / ".kafka_cleanshutdown").exists()

    active = segments(single.log_dir / "torn-active-0")[-1]
    cut(active, active.stat().st_size - 30)
    older = segments(single.log_dir / "torn-older-0")
    assert len(older) >= 3
    cut(older[1], older[1].stat().st_size - 30)
    first_of_third = int(older[2].name.removesuffix(".log"))
    index = segments(single.log_dir / "no-index-0", ".index")[0]
    index.unlink()
    unreadable = segments(single.log_dir / "unreadable-0")[0]
    unreadable.unlink()
    unreadable.mkdir()
    offline_files = single.partition_files("unreadable")

    single.broker.start()
    single.broker.wait_running()

    # Recovered: each lost exactly its torn batch (and, for an older segment, what followed).
    assert single.log_end_offset("torn-active") == RECORDS - 1
    assert consume(single, "torn-active", RECORDS - 1) == expected("torn-active", RECORDS - 1)
    assert single.log_end_offset("torn-older") == first_of_third - 1
    assert consume(single, "torn-older", first_of_third - 1) == expected(
        "torn-older", first_of_third - 1
    )
    assert index.exists()  # rebuilt, and nothing lost
    assert single.log_end_offset("no-index") == RECORDS
    assert consume(single, "no-index", RECORDS) == expected("no-index", RECORDS)
    assert consume(single, "intact", RECORDS) == expected("intact", RECORDS)
    # A recovered partition takes new records where its log now ends.
    assert produce(single, "torn-active", 1) == [RECORDS - 1]

    # Offline: reported three ways, answers KAFKA_STORAGE_ERROR, and nothing is written.
    rows = http("GET", single.broker.http_url + "/v1/partitions?topic=unreadable")["partitions"]
    assert [(row["role"], row["log_end_offset"]) for row in rows] == [("offline", -1)]
    assert "IsADirectoryError" in rows[0]["offline_reason"]
    health = http("GET", single.broker.http_url + "/healthz")
    assert (health["status"], health["offline_partitions"]) == ("degraded", ["unreadable-0"])
    assert metric(single, "pykraft_offline_replicas") == 1
    assert "partition unreadable-0 is offline" in single.broker.log_tail(200)
    with pytest.raises(KafkaStorageError):  # error code 56
        produce(single, "unreadable", 1)
    assert single.partition_files("unreadable") == offline_files
    assert unreadable.is_dir()

    single.assert_still_serves()


FETCH_VERSION = 11


def fetch_answer(single: SingleBroker, topic: str, offset: int) -> tuple[int, int]:
    """(error code, record bytes) of a consumer's Fetch v11 of partition 0 at ``offset``."""
    request = FetchRequest(
        replica_id=-1, max_wait_ms=0, min_bytes=1,
        topics=(FetchTopic((FetchPartition(0, offset, 1 << 20),), topic=topic),),
    )  # fmt: skip
    body = encode_fetch_request(request, FETCH_VERSION)
    [frame] = blocking_exchange(
        single.host_port[1], request_frame(ApiKey.FETCH, FETCH_VERSION, 7, body)
    )
    response = decode_fetch_response(frame[4:], FETCH_VERSION)
    [partition] = response.responses[0].partitions
    records = 0
    for chunk in partition.records or ():
        assert isinstance(chunk, bytes | bytearray | memoryview)  # decoded from the wire
        records += len(chunk)
    return partition.error_code, records


def test_a_bit_flipped_in_an_old_segment_is_never_served(single_broker: SingleBroker) -> None:
    # Below the recovery point nothing re-validates stored data; the read path's CRC check
    # (storage.read_verification) stops before the bad batch and reports it.
    single = single_broker
    single.create_topic("flipped", 1, **{"segment.bytes": SEGMENT_BYTES})
    produce(single, "flipped", RECORDS)
    assert single.broker.terminate() == 0  # flushed: the recovery point is the log end
    first = segments(single.log_dir / "flipped-0")[0]
    data = bytearray(first.read_bytes())
    data[len(data) // 2] ^= 0x04  # here: the baseOffset of a batch, outside its CRC
    first.write_bytes(bytes(data))
    logs = {name: sha for name, sha in single.partition_files("flipped").items() if ".log" in name}
    single.broker.start()
    single.broker.wait_running()

    error, served = fetch_answer(single, "flipped", 0)
    assert (error, 0 < served < len(data) // 2 + 1) == (Errors.NONE, True)  # up to the flip
    good = consume(single, "flipped", RECORDS)  # a client stops where the bad batch starts
    assert good == expected("flipped", len(good)) and 0 < len(good) < RECORDS
    assert fetch_answer(single, "flipped", len(good)) == (Errors.KAFKA_STORAGE_ERROR, 0)
    second = int(segments(single.log_dir / "flipped-0")[1].name.removesuffix(".log"))
    assert fetch_answer(single, "flipped", second)[0] == Errors.NONE  # later segments serve
    assert metric(single, "pykraft_corrupt_batch_reads") >= 2
    assert "is corrupt and is not served" in single.broker.log_tail(200)
    after = single.partition_files("flipped")
    assert {name: after[name] for name in logs} == logs  # reported; no segment rewritten
    single.assert_still_serves()
