"""The ``pykraft-kafka`` source next to ``pykraft-log`` and a plain confluent-kafka consumer,
all three reading the same records (run from ``bench/spark_export.py``).

A ``pykraft dev`` cluster (1 controller, 3 brokers) gets ``records`` records of the file bench's
shape (``bench.spark_export.write_logs``: keys ``k0``..``k96``, ~90-byte JSON values) in four
topic partitions, a quarter of the batches in each codec (none, gzip, lz4, zstd: one
confluent-kafka producer per codec). Then, in one run:

1. a plain confluent-kafka consumer (one process, ``assign`` from offset 0) reads them all;
2. ``spark.read.format("pykraft-kafka")`` exports them to Parquet through the brokers;
3. after a clean stop, ``spark.read.format("pykraft-log")`` exports the brokers' segment files.

Spark figures are the best of two runs after a first (reported apart, cold); each side's row
count is checked. MB/s counts key and value bytes.
"""

from __future__ import annotations

import time
import uuid
from pathlib import Path
from typing import Any

from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

from bench.common import RunningCluster
from pykraft.dev import plan_layout
from pykraft.free_ports import pick_free_ports

PARTITIONS = 4
CODECS = ("none", "gzip", "lz4", "zstd")
TIMEOUT_S = 300.0
MB = 1_000_000


def record(n: int) -> tuple[bytes, bytes]:
    return f"k{n % 97}".encode(), f'{{"n": {n}, "i": {n % 100}, "pad": "{"x" * 60}"}}'.encode()


def produce(bootstrap_servers: str, topic: str, records: int) -> int:
    """Every record acknowledged; returns the key and value bytes sent."""
    failures: list[KafkaError] = []
    payload = 0

    def delivered(error: KafkaError | None, _report: object) -> None:
        if error is not None:
            failures.append(error)

    share = records // len(CODECS)
    for index, codec in enumerate(CODECS):
        producer = Producer({
            "bootstrap.servers": bootstrap_servers, "compression.type": codec,
            "linger.ms": 5, "batch.num.messages": 100, "delivery.report.only.error": True,
        })  # fmt: skip
        count = share if index < len(CODECS) - 1 else records - share * index
        for n in range(index * share, index * share + count):
            key, value = record(n)
            payload += len(key) + len(value)
            while True:
                try:
                    producer.produce(
                        topic, value, key, partition=n % PARTITIONS,
                        on_delivery=delivered,
                    )  # fmt: skip
                    break
                except BufferError:
                    producer.poll(0.05)
        if producer.flush(TIMEOUT_S) != 0 or failures:
            raise RuntimeError(f"produce failed: {failures[:1]}")
    return payload


def plain_consume(bootstrap_servers: str, topic: str, records: int) -> float:
    consumer = Consumer({
        "bootstrap.servers": bootstrap_servers, "group.id": f"bench-{uuid.uuid4().hex[:8]}",
        "enable.auto.commit": False, "isolation.level": "read_committed",
    })  # fmt: skip
    try:
        consumer.assign([TopicPartition(topic, p, 0) for p in range(PARTITIONS)])
        read = 0
        started = time.perf_counter()
        while read < records:
            if time.perf_counter() - started > TIMEOUT_S:
                raise RuntimeError(f"read {read} of {records} records in {TIMEOUT_S} s")
            for message in consumer.consume(num_messages=10_000, timeout=0.5):
                if message.error() is not None:
                    raise RuntimeError(f"consumer error: {message.error()}")
                read += 1
        return time.perf_counter() - started
    finally:
        consumer.close()


def spark_export(df: Any, out: str, records: int) -> tuple[float, float]:
    """(best of two warm runs, the cold first run) in seconds, the count checked."""
    times = []
    for _ in range(3):
        started = time.perf_counter()
        df.write.mode("overwrite").parquet(out)
        times.append(time.perf_counter() - started)
    count = df.sparkSession.read.parquet(out).count()
    assert count == records, (count, records)
    return min(times[1:]), times[0]


def bench_kafka(spark: Any, root: Path, records: int) -> dict[str, Any]:
    layout = plan_layout(1, 3, 0, pick_free_ports(2 * 4))
    data_dir = root / "kafka-cluster"
    topic = f"bench-{uuid.uuid4().hex[:8]}"
    with RunningCluster(layout, data_dir) as cluster:
        admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic].result(timeout=30)
        time.sleep(1)  # leaders elected and known to every broker
        payload = produce(cluster.bootstrap_servers, topic, records)
        plain_s = plain_consume(cluster.bootstrap_servers, topic, records)
        df = (
            spark.read.format("pykraft-kafka")
            .option("kafka.bootstrap.servers", cluster.bootstrap_servers)
            .option("subscribe", topic)
            .load()
        )
        kafka_s, kafka_cold_s = spark_export(df, str(root / "kafka-parquet"), records)
        splits = df.rdd.getNumPartitions()
    log_dirs = ",".join(str(data_dir / broker.name) for broker in layout.brokers)
    files = spark.read.format("pykraft-log").option("topic", topic).load(log_dirs)
    log_s, log_cold_s = spark_export(files, str(root / "log-parquet"), records)

    def rates(name: str, seconds: float) -> dict[str, float]:
        return {
            f"{name}_records_per_s": round(records / seconds),
            f"{name}_mb_per_s": round(payload / seconds / MB, 1),
        }

    return {
        "records": records,
        "payload_mb": round(payload / MB, 1),
        "splits": splits,
        **rates("plain_confluent_consumer", plain_s),
        **rates("pykraft_kafka_parquet", kafka_s),
        **rates("pykraft_log_parquet", log_s),
        "pykraft_kafka_first_run_s": round(kafka_cold_s, 2),
        "pykraft_log_first_run_s": round(log_cold_s, 2),
    }
