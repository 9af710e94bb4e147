"""Produce keyed messages with kafka-python, then read them back by partition and offset.

    make run                                            # in one terminal: a local cluster
    .venv/bin/python examples/produce_consume_kafka_python.py
    .venv/bin/python examples/produce_consume_kafka_python.py --bootstrap-servers 127.0.0.1:9092

Creates the topic (3 partitions) if it does not exist, produces one message per key with a
header, and prints every message read back by a consumer without a group (``assign`` and
``seek``). kafka-python's producer is idempotent by default: it asks for a producer id
(InitProducerId) before its first batch.
"""

from __future__ import annotations

import argparse
import sys
import time

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import KafkaAdminClient, NewTopic
from kafka.errors import KafkaError, TopicAlreadyExistsError

PARTITIONS = 3
TIMEOUT_S = 30.0


def ensure_topic(bootstrap_servers: list[str], topic: str) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap_servers)
    try:
        admin.create_topics([NewTopic(topic, num_partitions=PARTITIONS, replication_factor=1)])
        print(f"created topic {topic} with {PARTITIONS} partitions")
    except TopicAlreadyExistsError:
        print(f"topic {topic} already exists")
    finally:
        admin.close()


def produce(bootstrap_servers: list[str], topic: str, count: int) -> dict[int, int]:
    """Returns the first offset written per partition."""
    producer = KafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5)
    try:
        futures = [
            producer.send(
                topic,
                key=f"user-{i}".encode(),
                value=f"event {i}".encode(),
                headers=[("source", b"example")],
            )
            for i in range(count)
        ]
        producer.flush(TIMEOUT_S)
        first_offsets: dict[int, int] = {}
        for future in futures:
            written = future.get(TIMEOUT_S)
            first_offsets[written.partition] = min(
                written.offset, first_offsets.get(written.partition, written.offset)
            )
    except KafkaError as error:
        raise SystemExit(f"produce failed: {error}") from None
    finally:
        producer.close(timeout=0)
    print(f"produced {count} messages to partitions {sorted(first_offsets)}")
    return first_offsets


def consume(
    bootstrap_servers: list[str], topic: str, first_offsets: dict[int, int], count: int
) -> None:
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False
    )
    try:
        partitions = [TopicPartition(topic, p) for p in first_offsets]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, first_offsets[tp.partition])
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        while read < count and time.monotonic() < deadline:
            for records in consumer.poll(timeout_ms=500).values():
                for record in records:
                    print(
                        f"  partition {record.partition} offset {record.offset}: "
                        f"{record.key!r} -> {record.value!r} headers={record.headers}"
                    )
                    read += 1
        print(f"read {read} of {count} messages back")
        if read < count:
            raise SystemExit(1)
    finally:
        consumer.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="example-kafka-python")
    parser.add_argument("--count", type=int, default=6)
    args = parser.parse_args(argv)
    servers = args.bootstrap_servers.split(",")
    ensure_topic(servers, args.topic)
    first_offsets = produce(servers, args.topic, args.count)
    consume(servers, args.topic, first_offsets, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
