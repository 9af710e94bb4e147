"""Produce keyed messages with confluent-kafka, then read them back by partition and offset.

    make run                                            # in one terminal: a local cluster
    .venv/bin/python examples/produce_consume_confluent.py
    .venv/bin/python examples/produce_consume_confluent.py --bootstrap-servers 127.0.0.1:9092

Creates the topic (3 partitions) if it does not exist, produces one message per key with a
header and a timestamp, and prints every message read back with ``assign`` from offset 0.
librdkafka's consumer needs a ``group.id`` even when it only assigns; nothing is committed.
"""

from __future__ import annotations

import argparse
import sys
import time

from confluent_kafka import (
    Consumer,
    KafkaError,
    KafkaException,
    Message,
    Producer,
    TopicPartition,
)
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewTopic

PARTITIONS = 3
TIMEOUT_S = 30.0


def ensure_topic(bootstrap_servers: str, topic: str) -> None:
    admin = AdminClient({"bootstrap.servers": bootstrap_servers})
    future = admin.create_topics([NewTopic(topic, PARTITIONS, 1)])[topic]
    try:
        future.result(timeout=TIMEOUT_S)
        print(f"created topic {topic} with {PARTITIONS} partitions")
    except KafkaException as error:
        if error.args[0].code() != KafkaError.TOPIC_ALREADY_EXISTS:
            raise
        print(f"topic {topic} already exists")


def produce(bootstrap_servers: str, topic: str, count: int) -> dict[int, int]:
    """Returns the first offset written per partition."""
    producer = Producer({"bootstrap.servers": bootstrap_servers, "linger.ms": 5})
    first_offsets: dict[int, int] = {}
    failures: list[KafkaError] = []

    def delivered(error: KafkaError | None, message: Message) -> None:
        if error is not None:
            failures.append(error)
            return
        partition, offset = message.partition(), message.offset()
        assert partition is not None and offset is not None  # set on every delivered message
        first_offsets[partition] = min(offset, first_offsets.get(partition, offset))

    for index in range(count):
        producer.produce(
            topic,
            key=f"user-{index}".encode(),
            value=f"event {index}".encode(),
            headers=[("source", b"example")],
            timestamp=int(time.time() * 1000),
            on_delivery=delivered,
        )
    producer.flush(TIMEOUT_S)
    if failures:
        raise SystemExit(f"delivery failed: {failures[0]}")
    print(f"produced {count} messages to partitions {sorted(first_offsets)}")
    return first_offsets


def consume(bootstrap_servers: str, topic: str, first_offsets: dict[int, int], count: int) -> None:
    consumer = Consumer(
        {"bootstrap.servers": bootstrap_servers, "group.id": "example", "enable.auto.commit": False}
    )
    try:
        consumer.assign([TopicPartition(topic, p, o) for p, o in first_offsets.items()])
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        while read < count and time.monotonic() < deadline:
            message = consumer.poll(0.5)
            if message is None:
                continue
            if message.error():
                raise SystemExit(f"consumer error: {message.error()}")
            print(
                f"  partition {message.partition()} offset {message.offset()}: "
                f"{message.key()!r} -> {message.value()!r} headers={message.headers()}"
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
    parser.add_argument("--topic", default="example-confluent")
    parser.add_argument("--count", type=int, default=6)
    args = parser.parse_args(argv)
    ensure_topic(args.bootstrap_servers, args.topic)
    first_offsets = produce(args.bootstrap_servers, args.topic, args.count)
    consume(args.bootstrap_servers, args.topic, first_offsets, args.count)
    return 0


if __name__ == "__main__":
    sys.exit(main())
