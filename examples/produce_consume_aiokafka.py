"""Produce keyed messages with aiokafka, then read them back by partition and offset.

    make run                                            # in one terminal: a local cluster
    .venv/bin/python examples/produce_consume_aiokafka.py
    .venv/bin/python examples/produce_consume_aiokafka.py --bootstrap-servers 127.0.0.1:9092

Creates the topic (3 partitions) if it does not exist, produces one message per key with a
header, and prints every message read back by a consumer without a group (``assign`` and
``seek``), all on one asyncio event loop.
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import time

from aiokafka import AIOKafkaConsumer, AIOKafkaProducer, TopicPartition
from aiokafka.admin import AIOKafkaAdminClient, NewTopic

PARTITIONS = 3
TIMEOUT_S = 30.0
TOPIC_ALREADY_EXISTS = 36


async def ensure_topic(bootstrap_servers: str, topic: str) -> None:
    admin = AIOKafkaAdminClient(bootstrap_servers=bootstrap_servers)
    await admin.start()
    try:
        response = await admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        await admin.close()
    [(_, error_code, *_)] = response.topic_errors
    if error_code == TOPIC_ALREADY_EXISTS:
        print(f"topic {topic} already exists")
    elif error_code != 0:
        raise SystemExit(f"CreateTopics failed with error code {error_code}")
    else:
        print(f"created topic {topic} with {PARTITIONS} partitions")


async def produce(bootstrap_servers: str, topic: str, count: int) -> dict[int, int]:
    """Returns the first offset written per partition."""
    producer = AIOKafkaProducer(bootstrap_servers=bootstrap_servers, linger_ms=5)
    await producer.start()
    try:
        futures = [
            await producer.send(
                topic,
                key=f"user-{i}".encode(),
                value=f"event {i}".encode(),
                headers=[("source", b"example")],
            )
            for i in range(count)
        ]
        first_offsets: dict[int, int] = {}
        for future in futures:
            written = await future
            first_offsets[written.partition] = min(
                written.offset, first_offsets.get(written.partition, written.offset)
            )
    finally:
        await producer.stop()
    print(f"produced {count} messages to partitions {sorted(first_offsets)}")
    return first_offsets


async def consume(
    bootstrap_servers: str, topic: str, first_offsets: dict[int, int], count: int
) -> None:
    consumer = AIOKafkaConsumer(
        bootstrap_servers=bootstrap_servers, group_id=None, enable_auto_commit=False
    )
    await consumer.start()
    try:
        partitions = [TopicPartition(topic, p) for p in first_offsets]
        consumer.assign(partitions)
        for tp in partitions:
            consumer.seek(tp, first_offsets[tp.partition])
        read = 0
        deadline = time.monotonic() + TIMEOUT_S
        while read < count and time.monotonic() < deadline:
            for records in (await consumer.getmany(timeout_ms=500)).values():
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
        await consumer.stop()


async def run(bootstrap_servers: str, topic: str, count: int) -> None:
    await ensure_topic(bootstrap_servers, topic)
    first_offsets = await produce(bootstrap_servers, topic, count)
    await consume(bootstrap_servers, topic, first_offsets, count)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bootstrap-servers", default="127.0.0.1:9092")
    parser.add_argument("--topic", default="example-aiokafka")
    parser.add_argument("--count", type=int, default=6)
    args = parser.parse_args(argv)
    asyncio.run(
        asyncio.wait_for(run(args.bootstrap_servers, args.topic, args.count), 4 * TIMEOUT_S)
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
