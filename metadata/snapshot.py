"""Metadata snapshot files (DESIGN.md §3.2).

A snapshot is the list of records that rebuilds an image, written as JSON lines::

    {"type":"SnapshotHeader","version":0,"endOffset":1043,"epoch":3,"recordCount":2,"createdMs":...}
    {"type":"TopicRecord","version":0,"name":"pet","topicId":"..."}
    {"type":"PartitionRecord","version":0,...}
    {"type":"SnapshotFooter","version":0,"crc32c":2866342178}

``endOffset`` is exclusive, as in Kafka's snapshot ids: the image's last applied offset is
``endOffset - 1``. The footer's ``crc32c`` is the CRC32C of every byte before the footer line. The
file is named ``<endOffset, 20 digits>-<epoch, 10 digits>.checkpoint`` (Kafka's snapshot naming),
written to a ``.partial`` file, fsync'd, renamed, and the directory fsync'd, so a crash leaves
either the old set of snapshots or the new one. ``jq`` reads it as is; Spark reads it with
``spark.read.json`` and an explicit schema, filtering out the header and footer by ``type``.

Reading checks the structure, the checksum, the record count and every record; any problem raises
``SnapshotError`` naming the file and the 1-based line.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path
from typing import Any

import attrs
import crc32c

from pykraft.metadata.codec import MetadataCodecError, decode_record, encode_record
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    ConfigRecord,
    FeatureLevelRecord,
    MetadataRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    TopicRecord,
)

SNAPSHOT_SUFFIX = ".checkpoint"
PARTIAL_SUFFIX = ".partial"
FORMAT_VERSION = 0
_NAME = re.compile(r"(\d{20})-(\d{10})\.checkpoint")


class SnapshotError(Exception):
    """A snapshot file is missing, truncated or corrupt; names the file and the line."""

    def __init__(self, source: str, line: int, message: str) -> None:
        super().__init__(f"snapshot {source}, line {line}: {message}")
        self.source = source
        self.line = line
        self.message = message


@attrs.frozen(order=True)
class SnapshotId:
    """Kafka's ``OffsetAndEpoch`` of a snapshot: the exclusive end offset and its epoch."""

    end_offset: int
    epoch: int

    def file_name(self) -> str:
        return f"{self.end_offset:020d}-{self.epoch:010d}{SNAPSHOT_SUFFIX}"

    @classmethod
    def parse(cls, file_name: str) -> SnapshotId | None:
        match = _NAME.fullmatch(file_name)
        return None if match is None else cls(int(match[1]), int(match[2]))


@attrs.frozen
class SnapshotHeader:
    end_offset: int
    epoch: int
    record_count: int
    created_ms: int

    @property
    def snapshot_id(self) -> SnapshotId:
        return SnapshotId(self.end_offset, self.epoch)


def image_to_records(image: MetadataImage) -> list[MetadataRecord]:
    """Records that rebuild ``image`` from the empty image, in a stable order."""
    records: list[MetadataRecord] = [
        FeatureLevelRecord(name=name, feature_level=level)
        for name, level in sorted(image.features.items())
    ]
    for broker_id in sorted(image.cluster.brokers):
        broker = image.cluster.brokers[broker_id]
        records.append(
            RegisterBrokerRecord(
                broker_id=broker.id,
                incarnation_id=broker.incarnation_id,
                broker_epoch=broker.epoch,
                end_points=broker.endpoints,
                features=broker.features,
                rack=broker.rack,
                fenced=broker.fenced,
                in_controlled_shutdown=broker.in_controlled_shutdown,
            )
        )
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        records.append(TopicRecord(name=topic.name, topic_id=topic.topic_id))
        records.extend(
            topic.partitions[partition_id].to_record(topic.topic_id, partition_id)
            for partition_id in sorted(topic.partitions)
        )
    for resource_type, resource_name in sorted(image.configs.resources):
        config = image.configs.resources[(resource_type, resource_name)]
        records.extend(
            ConfigRecord(
                resource_type=resource_type,
                resource_name=resource_name,
                name=key,
                value=config[key],
            )
            for key in sorted(config)
        )
    if image.producer_ids.next_producer_id != -1:
        records.append(
            ProducerIdsRecord(
                broker_id=-1, broker_epoch=-1, next_producer_id=image.producer_ids.next_producer_id
            )
        )
    records.extend(image.acls.acls[acl_id].to_record(acl_id) for acl_id in sorted(image.acls.acls))
    for user in sorted(image.scram.users):
        credentials = image.scram.users[user]
        records.extend(
            credentials[mechanism].to_record(user, mechanism) for mechanism in sorted(credentials)
        )
    records.extend(image.client_quotas.to_records())
    records.extend(image.delegation_tokens.to_records())
    return records


def encode_snapshot(image: MetadataImage, created_ms: int) -> bytes:
    """The bytes of a snapshot of ``image`` (what ``write_snapshot`` stores)."""
    if image.offset < 0 or image.epoch < 0:
        raise ValueError(
            f"cannot snapshot an image at offset {image.offset}, epoch {image.epoch}: "
            "nothing has been applied"
        )
    records = image_to_records(image)
    header = {
        "type": "SnapshotHeader",
        "version": FORMAT_VERSION,
        "endOffset": image.offset + 1,
        "epoch": image.epoch,
        "recordCount": len(records),
        "createdMs": created_ms,
    }
    lines = [_json_line(header)]
    lines.extend(encode_record(record) + "\n" for record in records)
    body = "".join(lines).encode("utf-8")
    footer = {"type": "SnapshotFooter", "version": FORMAT_VERSION, "crc32c": crc32c.crc32c(body)}
    return body + _json_line(footer).encode("utf-8")


def _json_line(obj: dict[str, Any]) -> str:
    return json.dumps(obj, separators=(",", ":")) + "\n"


def decode_snapshot(data: bytes, source: str) -> tuple[SnapshotHeader, list[MetadataRecord]]:
    """Verify and parse snapshot bytes; ``source`` names them in errors (a path or a URL)."""
    if not data.endswith(b"\n"):
        raise SnapshotError(source, data.count(b"\n") + 1, "truncated: the last line is incomplete")
    lines = data[:-1].split(b"\n")
    if len(lines) < 2:
        raise SnapshotError(source, len(lines), "truncated: a snapshot needs a header and a footer")
    footer_line = len(lines)
    checksum = _parse_footer(lines[-1], source, footer_line)
    body_length = len(data) - len(lines[-1]) - 1
    if crc32c.crc32c(memoryview(data)[:body_length]) != checksum:
        bad_line = _first_undecodable_line(lines[1:-1])
        where = footer_line if bad_line is None else bad_line + 2
        raise SnapshotError(source, where, "checksum mismatch: the file is corrupt")
    header = _parse_header(lines[0], source)
    if header.record_count != len(lines) - 2:
        raise SnapshotError(
            source, 1, f"header says {header.record_count} records, found {len(lines) - 2}"
        )
    records = []
    for index, record_line in enumerate(lines[1:-1]):
        try:
            records.append(decode_record(record_line))
        except MetadataCodecError as exc:
            raise SnapshotError(source, index + 2, str(exc)) from None
    return header, records


def _first_undecodable_line(lines: list[bytes]) -> int | None:
    for index, line in enumerate(lines):
        try:
            decode_record(line)
        except MetadataCodecError:
            return index
    return None


def _parse_json(line: bytes, source: str, number: int, expected_type: str) -> dict[str, Any]:
    try:
        obj = json.loads(line)
    except ValueError:
        obj = None
    if type(obj) is not dict or obj.get("type") != expected_type:
        raise SnapshotError(
            source, number, f"expected the {expected_type} line, found {line!r:.80}"
        )
    if obj.get("version") != FORMAT_VERSION:
        raise SnapshotError(
            source,
            number,
            f"{expected_type} version {obj.get('version')!r} "
            f"is not supported (this build reads {FORMAT_VERSION})",
        )
    return obj


def _parse_footer(line: bytes, source: str, number: int) -> int:
    obj = _parse_json(line, source, number, "SnapshotFooter")
    checksum = obj.get("crc32c")
    if obj.keys() != {"type", "version", "crc32c"} or type(checksum) is not int:
        raise SnapshotError(source, number, f"malformed footer {line!r:.80}")
    return checksum


def _parse_header(line: bytes, source: str) -> SnapshotHeader:
    obj = _parse_json(line, source, 1, "SnapshotHeader")
    fields = ("endOffset", "epoch", "recordCount", "createdMs")
    if obj.keys() != {"type", "version", *fields} or any(
        type(obj[field]) is not int or obj[field] < 0 for field in fields
    ):
        raise SnapshotError(source, 1, f"malformed header {line!r:.80}")
    return SnapshotHeader(obj["endOffset"], obj["epoch"], obj["recordCount"], obj["createdMs"])


def snapshot_to_image(
    header: SnapshotHeader, records: list[MetadataRecord], source: str
) -> MetadataImage:
    """Replay a snapshot's records onto the empty image."""
    delta = MetadataDelta(MetadataImage.EMPTY)
    for index, record in enumerate(records):
        try:
            delta.replay(record)
        except MetadataReplayError as exc:
            raise SnapshotError(source, index + 2, str(exc)) from None
    return delta.apply(offset=header.end_offset - 1, epoch=header.epoch)


def write_snapshot(directory: Path, image: MetadataImage, created_ms: int) -> Path:
    """Write a snapshot of ``image`` atomically and durably; returns its path."""
    data = encode_snapshot(image, created_ms)
    path = directory / SnapshotId(image.offset + 1, image.epoch).file_name()
    partial = path.with_name(path.name + PARTIAL_SUFFIX)
    with open(partial, "wb") as file:
        file.write(data)
        file.flush()
        os.fsync(file.fileno())
    os.replace(partial, path)
    _fsync_directory(directory)
    return path


def _fsync_directory(directory: Path) -> None:
    descriptor = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(descriptor)
    finally:
        os.close(descriptor)


def read_snapshot(path: Path) -> tuple[SnapshotHeader, list[MetadataRecord]]:
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise SnapshotError(str(path), 0, f"cannot read: {exc.strerror}") from None
    header, records = decode_snapshot(data, str(path))
    named = SnapshotId.parse(path.name)
    if named is not None and named != header.snapshot_id:
        raise SnapshotError(str(path), 1, f"header says {header.snapshot_id}, the name {named}")
    return header, records


def load_snapshot(path: Path) -> MetadataImage:
    """Read, verify and replay a snapshot file into an image."""
    header, records = read_snapshot(path)
    return snapshot_to_image(header, records, str(path))


def list_snapshots(directory: Path) -> list[Path]:
    """Snapshot files in ``directory``, oldest first (partial files are ignored)."""
    found: list[tuple[SnapshotId, Path]] = []
    for path in directory.iterdir():
        snapshot_id = SnapshotId.parse(path.name)
        if snapshot_id is not None:
            found.append((snapshot_id, path))
    return [path for _, path in sorted(found)]


def latest_snapshot(directory: Path) -> Path | None:
    snapshots = list_snapshots(directory)
    return snapshots[-1] if snapshots else None
