"""A leader's log dir fails (issue 9, KIP-858): leadership moves to the other in-sync replica.

One controller and two brokers. Broker 10 has two log dirs, the first a 4 MiB tmpfs
(test_disk_full's ``small_disk``; without mount rights the case is skipped); broker 11 one
ordinary dir. A topic with replicas [10, 11] (RF=2, ``min.insync.replicas=1``) is led by 10 on
the tmpfs. The tmpfs is filled while an idempotent acks=all producer streams: broker 10 answers
KAFKA_STORAGE_ERROR, takes the dir offline, keeps running on its other dir, and its next
heartbeat (sent at once) reports the dir and its replica there. The controller moves the
leadership to 11 and removes 10 from the ISR within ``LEADERSHIP_MOVE_BOUND_S``; the producer
carries on against 11. Every acknowledged record is then read back once, none duplicated, none
invented; broker 10 never re-creates the partition on its healthy dir. Freed and restarted,
broker 10 re-joins the ISR through normal catch-up.
"""

from __future__ import annotations

import collections
import time
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.producer.future import FutureRecordMetadata

from tests.hostile.test_disk_full import (  # noqa: F401 (small_disk is a fixture)
    RECORD_BYTES,
    ROOM_BYTES,
    SMALL_LOGS,
    fill,
    small_disk,
    value,
    wait_for_partition_files,
    wait_until,
)
from tests.integration.conftest import Cluster, http, records_to_end
from tests.integration.test_broker_process import CONTROLLER_PROPERTIES, BrokerProcess

TOPIC = "moves"
RECORDS = 600  # about 250 fit on the small disk; the rest must land on broker 11
# From the moment broker 10 reports its dir offline to the controller's metadata naming 11 as
# leader: an immediate heartbeat (broker.heartbeat.interval.ms=500 otherwise) plus one commit.
LEADERSHIP_MOVE_BOUND_S = 5.0
POLL_S = 0.01
assert RECORDS * RECORD_BYTES > ROOM_BYTES


def start_two_brokers(
    cluster_factory: Any, brokers: list[BrokerProcess], tmp_path: Path, disk: Path
) -> tuple[Cluster, BrokerProcess, BrokerProcess]:
    """Controller, broker 10 (tmpfs first, then a healthy dir) and broker 11."""
    cluster: Cluster = cluster_factory(size=1, extra=CONTROLLER_PROPERTIES)
    cluster.wait_for_leader()
    url = cluster.controllers[0].url
    first, second = BrokerProcess(tmp_path, 10, url), BrokerProcess(tmp_path, 11, url)
    with first.config_path.open("a") as config:
        lines = {"log.dirs": f"{disk},{tmp_path / 'broker-10-other'}", **SMALL_LOGS}
        config.writelines(f"{key}={v}\n" for key, v in lines.items())
    for broker in (first, second):
        brokers.append(broker)
        broker.start()
    for broker in (first, second):
        broker.wait_running()
    return cluster, first, second


def partition_state(cluster: Cluster) -> dict[str, Any]:
    answer: dict[str, Any] = cluster.request("GET", f"/v1/topics/{TOPIC}")["partitions"][0]
    return answer


def time_to_failover(cluster: Cluster, broker: BrokerProcess, disk: Path) -> float:
    """Seconds from broker 10 first reporting ``disk`` offline (its /healthz) to the controller
    first naming 11 the leader, polling both every ``POLL_S``."""
    deadline = time.monotonic() + 30
    offline_at: float | None = None
    while time.monotonic() < deadline:
        now = time.monotonic()
        if offline_at is None:
            health = http("GET", broker.http_url + "/healthz")
            if str(disk) in health.get("offline_log_dirs", []):
                offline_at = now
        if offline_at is not None and partition_state(cluster)["leader"] == 11:
            return now - offline_at
        time.sleep(POLL_S)
    raise AssertionError(f"no failover within 30 s (dir offline: {offline_at is not None})")


def consume(bootstrap: str) -> list[bytes]:
    """Every value of partition 0 from offset 0 to its end."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap, enable_auto_commit=False, request_timeout_ms=10_000
    )
    try:
        partition = TopicPartition(TOPIC, 0)
        consumer.assign([partition])
        consumer.seek(partition, 0)
        return [message.value for message in records_to_end(consumer)]
    finally:
        consumer.close()


def test_a_failed_leader_dir_moves_leadership_and_loses_nothing(
    small_disk: Path,  # noqa: F811 - test_disk_full's fixture, imported above
    cluster_factory: Any,
    brokers: list[BrokerProcess],
    tmp_path: Path,
) -> None:
    cluster, first, second = start_two_brokers(cluster_factory, brokers, tmp_path, small_disk)
    cluster.request("POST", "/v1/topics", {
        "name": TOPIC, "assignments": {"0": [10, 11]},
        "configs": {"min.insync.replicas": "1"},
    })  # fmt: skip
    wait_until(lambda: partition_state(cluster)["isr"] == [10, 11])
    before = partition_state(cluster)
    assert before["leader"] == 10
    wait_for_partition_files(small_disk, f"{TOPIC}-0")  # broker 10's first, emptiest dir
    filler = fill(small_disk, ROOM_BYTES)
    producer = KafkaProducer(
        bootstrap_servers=f"{first.bootstrap},{second.bootstrap}", acks="all",
        enable_idempotence=True, max_in_flight_requests_per_connection=5, linger_ms=2,
        retries=2**31 - 1, retry_backoff_ms=100, delivery_timeout_ms=60_000,
        request_timeout_ms=10_000, max_block_ms=60_000, metadata_max_age_ms=1_000,
    )  # fmt: skip
    futures: list[FutureRecordMetadata] = []
    try:
        for n in range(RECORDS):
            futures.append(producer.send(TOPIC, value(n), partition=0))

        moved_s = time_to_failover(cluster, first, small_disk)
        assert moved_s < LEADERSHIP_MOVE_BOUND_S
        producer.flush(timeout=60)
    finally:
        producer.close(timeout=10)

    after = partition_state(cluster)
    assert (after["leader"], after["isr"]) == (11, [11])
    assert after["leader_epoch"] == before["leader_epoch"] + 1
    assert "No space left on device" in first.log_tail(400)
    assert first.process is not None and first.process.poll() is None  # 10 still runs
    # Broker 10 never re-creates the replica empty on its healthy dir.
    assert not (tmp_path / "broker-10-other" / f"{TOPIC}-0").exists()

    acknowledged = {value(n) for n, f in enumerate(futures) if f.succeeded()}
    assert len(acknowledged) == RECORDS, [f.exception for f in futures if f.failed()][:3]
    stored = consume(second.bootstrap)
    counts = collections.Counter(stored)
    assert [v[:6] for v, c in counts.items() if c > 1] == []  # nothing twice
    assert acknowledged <= set(counts)  # nothing acknowledged lost
    assert set(counts) <= {value(n) for n in range(RECORDS)}  # nothing invented
    print(f"leadership moved {moved_s * 1000:.0f} ms after broker 10 reported its dir offline")

    # Healthy again and restarted, broker 10 loads its log and catches up into the ISR.
    filler.unlink()
    assert first.terminate() == 0
    first.start()
    first.wait_running()
    wait_until(lambda: sorted(partition_state(cluster)["isr"]) == [10, 11], timeout_s=30)
    assert partition_state(cluster)["leader"] == 11
    # A well-behaved client bootstrapped from broker 10 alone still gets an acks=all produce
    # through (to the leader 11, with both replicas in sync), right after the last record.
    late = KafkaProducer(
        bootstrap_servers=first.bootstrap, acks="all", enable_idempotence=False,
        request_timeout_ms=10_000, max_block_ms=10_000,
    )  # fmt: skip
    try:
        assert late.send(TOPIC, b"after", partition=0).get(timeout=15).offset == len(stored)
    finally:
        late.close()
