"""What the client tests share: the messages they send, the check that every message came back
at its offset intact, the batches a broker stored on disk, and raw requests for what clients hide.

Every client test produces the same kind of message set (``keyed_messages``): keys that spread
over several partitions, values (one of them a tombstone), headers with a repeated key and an
empty value, and CreateTime timestamps an hour in the past — far enough from "now" that a broker
overwriting them with its own clock would be caught.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
import struct
import time
import uuid
from collections import defaultdict
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any

from kafka.protocol.metadata import MetadataRequest
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import decode_response
from pykraft.storage.record_batch import BatchHeader, iter_batches
from tests.broker.wire_client import blocking_exchange, request_frame

HOUR_MS = 3_600_000
# Kafka's error codes the tests expect (org.apache.kafka.common.protocol.Errors).
NONE = 0
UNKNOWN_TOPIC_OR_PARTITION = 3


@dataclasses.dataclass(frozen=True)
class Message:
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes | None], ...]
    timestamp_ms: int


@dataclasses.dataclass(frozen=True)
class Placed:
    """A message at the partition and offset the broker gave it."""

    partition: int
    offset: int
    message: Message


def unique_topic(prefix: str) -> str:
    """A topic name no other test (or earlier run against the same cluster) uses."""
    return f"{prefix}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return time.time_ns() // 1_000_000


def keyed_messages(
    count: int, *, keys: int = 8, null_header_values: bool = True, payload_bytes: int = 0
) -> list[Message]:
    """``count`` messages over ``keys`` keys; message 5 is a tombstone (null value)."""
    base_timestamp_ms = now_ms() - HOUR_MS
    messages = []
    for index in range(count):
        headers: list[tuple[str, bytes | None]] = [
            ("index", str(index).encode()),
            ("repeated", b"first"),
            ("repeated", b"second"),
            ("empty", b""),
        ]
        if null_header_values:
            headers.append(("null", None))
        value = None if index == 5 else f"value-{index}-".encode() + b"x" * payload_bytes
        messages.append(Message(
            key=f"key-{index % keys}".encode(), value=value, headers=tuple(headers),
            timestamp_ms=base_timestamp_ms + index * 7,
        ))  # fmt: skip
    return messages


def by_partition(placed: Iterable[Placed]) -> dict[int, list[Placed]]:
    partitions: dict[int, list[Placed]] = defaultdict(list)
    for item in sorted(placed, key=lambda p: (p.partition, p.offset)):
        partitions[item.partition].append(item)
    return dict(partitions)


def check_produced(produced: Sequence[Placed], *, partitions_at_least: int) -> None:
    """Acknowledged offsets: contiguous per partition from 0 (a fresh topic), keys stay put."""
    grouped = by_partition(produced)
    assert len(grouped) >= partitions_at_least, (
        f"keyed messages landed in partitions {sorted(grouped)} only; "
        f"expected at least {partitions_at_least}"
    )
    for partition, items in grouped.items():
        offsets = [item.offset for item in items]
        assert offsets == list(range(len(items))), (
            f"partition {partition}: acknowledged offsets {offsets} are not 0..{len(items) - 1}"
        )
    partition_of_key: dict[bytes | None, int] = {}
    for item in produced:
        first = partition_of_key.setdefault(item.message.key, item.partition)
        assert first == item.partition, (
            f"key {item.message.key!r} in partitions {first} and "
            f"{item.partition}: the partitioner is not sticky per key"
        )


def check_read_back(produced: Sequence[Placed], consumed: Sequence[Placed]) -> None:
    """Every produced message was read back once, at its offset, with every field intact."""
    expected = {(p.partition, p.offset): p.message for p in produced}
    seen: dict[tuple[int, int], Message] = {}
    for item in consumed:
        position = (item.partition, item.offset)
        assert position not in seen, f"partition {item.partition} offset {item.offset} read twice"
        seen[position] = item.message
    missing = sorted(set(expected) - set(seen))
    extra = sorted(set(seen) - set(expected))
    assert not missing and not extra, f"missing (partition, offset): {missing}; extra: {extra}"
    for position, message in expected.items():
        assert seen[position] == message, (
            f"partition {position[0]} offset {position[1]}:\n read {seen[position]}\n"
            f" sent {message}"
        )


@contextlib.contextmanager
def client_failure_context(logger_name: str, what: str) -> Iterator[None]:
    """Re-raise a failure of ``what`` with the client's last warnings and errors attached.

    A client that retries forever (say, InitProducerId on a connection the broker keeps closing)
    ends in a bare timeout; its log says why.
    """
    lines: list[str] = []

    class Collect(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            lines.append(f"{record.levelname} {record.name}: {record.getMessage()}")

    handler = Collect(logging.WARNING)
    logger = logging.getLogger(logger_name)
    logger.addHandler(handler)
    try:
        yield
    except Exception as error:
        distinct = list(dict.fromkeys(lines))[-12:]
        raise AssertionError(
            f"{what} failed: {error!r}\n{logger_name} logged:\n" + "\n".join(distinct)
        ) from error
    finally:
        logger.removeHandler(handler)


def stored_batches(data_dir: Path, topic: str, partition: int) -> list[BatchHeader]:
    """The batch headers of the one replica of ``topic-partition`` under ``data_dir``, CRC-checked.

    Reads the segment files themselves: what the broker wrote, not what a client decodes.
    """
    directories = sorted(p for p in data_dir.rglob(f"{topic}-{partition}") if p.is_dir())
    assert len(directories) == 1, f"expected one replica of {topic}-{partition}: {directories}"
    headers: list[BatchHeader] = []
    for segment in sorted(directories[0].glob("*.log")):
        headers.extend(header for _, header in iter_batches(segment.read_bytes()))
    return headers


def _exchange(port: int, api_key: ApiKey, version: int, body: bytes) -> Any:
    """One request, one response; only header-v0 versions (correlation id, then the body)."""
    [frame] = blocking_exchange(port, request_frame(api_key, version, 7, body))
    (correlation_id,) = struct.unpack_from(">i", frame)
    assert correlation_id == 7
    return frame[4:]


def metadata(port: int, topics: Sequence[str]) -> Any:
    """Metadata v4 for ``topics`` with allow_auto_topic_creation=false: it only looks.

    Versions before v4 always allow auto-creation, and auto.create.topics.enable is on by
    default (Kafka's default), so an older version would create every topic it asks about.
    """
    version = 4
    request = MetadataRequest(
        version=version,
        topics=[MetadataRequest.MetadataRequestTopic(name=t) for t in topics],
        allow_auto_topic_creation=False,
    )
    body = _exchange(port, ApiKey.METADATA, version, bytes(request.encode(version=version)))
    return decode_response(ApiKey.METADATA, version, body)


def raw_produce(port: int, topic: str, partition: int, batch: bytes) -> tuple[int, int]:
    """Produce v8 of one batch with acks=-1; returns (error_code, base_offset) of the partition."""
    version = 8
    request = ProduceRequest(
        version=version, transactional_id=None, acks=-1, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=batch),
        ])],
    )  # fmt: skip
    body = _exchange(port, ApiKey.PRODUCE, version, bytes(request.encode(version=version)))
    response = ProduceResponse.decode(body, version=version)
    [topic_response] = response.responses
    assert topic_response.name == topic
    [partition_response] = topic_response.partition_responses
    return partition_response.error_code, partition_response.base_offset
