"""Metadata records and images as rows: the shapes of the ``pykraft-metadata`` views.

The ``records`` view has one row per metadata record. Common columns say where the record comes
from (``source`` is ``snapshot`` or ``log``), its position (``end_offset``, ``epoch``, ``offset``
for log records), when it was written, and its type; then one struct column per record type,
named after the type (``partition_change`` for ``PartitionChangeRecord``), holding the record's
fields under their names in ``metadata.records``. Exactly the column of the row's type is set
(``NoOpRecord`` has no fields and no column). Struct columns rather than one wide union keep
every field's own name and type: ``fenced`` is a boolean in ``RegisterBrokerRecord`` but a
fencing change (-1/0/1) in ``BrokerRegistrationChangeRecord``.

``end_offset`` is exclusive, as in Kafka's snapshot ids: for a snapshot's records it is the
snapshot's end offset (its image includes offsets below it); for a log record at ``offset`` it
is ``offset + 1``.

The typed views (``brokers``, ``topics``, ``partitions``, ``configs``) are rows of a
``MetadataImage`` (the image a snapshot rebuilds). Column order is ``*_COLUMNS``; the Spark
types are in ``export.spark_schemas``. Timestamps are milliseconds here; the Spark layer turns
them into TIMESTAMP values. Pure: no pyspark, no I/O.

SCRAM secrets are redacted: a ``UserScramCredentialRecord`` row keeps its user, mechanism and
iteration count, but ``salt``, ``stored_key`` and ``server_key`` are empty. StoredKey and
ServerKey are enough to impersonate the server and, with the salt, to mount an offline guess of
the password; Kafka never shows them either (the metadata shell's ``ScramCredentialDataNode``
prints ``[redacted]`` under ``MetadataNodeRedactionCriteria.Strict``, and
DescribeUserScramCredentials answers only mechanism and iterations, KIP-554). Empty rather than
null keeps the Spark columns' non-null binary type.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import attrs

from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    RECORD_CLASSES,
    ConfigResourceType,
    MetadataRecord,
    NoOpRecord,
    UserScramCredentialRecord,
)

SOURCE_SNAPSHOT = "snapshot"
SOURCE_LOG = "log"
# What a redacted SCRAM secret reads as in an export (see the module docstring).
REDACTED_BYTES = b""


def struct_column_name(cls: type[Any]) -> str:
    """``PartitionChangeRecord`` -> ``partition_change``."""
    name = cls.__name__.removesuffix("Record")
    return "".join(f"_{c.lower()}" if c.isupper() else c for c in name).lstrip("_")


# Record types with fields, in RECORD_CLASSES order: one struct column each.
STRUCT_RECORD_CLASSES: tuple[type[MetadataRecord], ...] = tuple(
    cls for cls in RECORD_CLASSES if attrs.fields(cls)
)
_STRUCT_INDEX = {cls: index for index, cls in enumerate(STRUCT_RECORD_CLASSES)}

RECORD_COMMON_COLUMNS = (
    "source",
    "snapshot_id",
    "end_offset",
    "offset",
    "epoch",
    "timestamp",
    "record_index",
    "record_type",
    "record_type_id",
    "record_version",
)
RECORD_COLUMNS = RECORD_COMMON_COLUMNS + tuple(
    struct_column_name(cls) for cls in STRUCT_RECORD_CLASSES
)
BROKER_COLUMNS = (
    "snapshot_id",
    "end_offset",
    "broker_id",
    "broker_epoch",
    "incarnation_id",
    "rack",
    "fenced",
    "in_controlled_shutdown",
    "endpoints",
)
TOPIC_COLUMNS = (
    "snapshot_id",
    "end_offset",
    "topic",
    "topic_id",
    "partitions",
    "replication_factor",
)
PARTITION_COLUMNS = (
    "snapshot_id",
    "end_offset",
    "topic",
    "topic_id",
    "partition",
    "replicas",
    "isr",
    "removing_replicas",
    "adding_replicas",
    "leader",
    "leader_recovery_state",
    "leader_epoch",
    "partition_epoch",
)
CONFIG_COLUMNS = (
    "snapshot_id",
    "end_offset",
    "resource_type",
    "resource_type_name",
    "resource_name",
    "name",
    "value",
)


@attrs.frozen
class RecordPosition:
    """Where a record sits: a snapshot's record (offset None) or a log record."""

    source: str
    snapshot_id: str | None
    end_offset: int
    offset: int | None
    epoch: int
    timestamp_ms: int
    record_index: int


def record_fields(record: MetadataRecord) -> tuple[Any, ...]:
    """The record's fields in attrs order: a Spark struct value (arrays as lists); SCRAM
    secrets redacted."""
    if isinstance(record, UserScramCredentialRecord):
        record = attrs.evolve(
            record, salt=REDACTED_BYTES, stored_key=REDACTED_BYTES, server_key=REDACTED_BYTES
        )
    return tuple(_struct_value(getattr(record, field.name)) for field in attrs.fields(type(record)))


def _struct_value(value: Any) -> Any:
    """Arrays as lists (Spark's row converter insists), structs as tuples."""
    if type(value) is tuple:
        return [attrs.astuple(item) if attrs.has(type(item)) else item for item in value]
    return value


def record_row(record: MetadataRecord, position: RecordPosition) -> tuple[Any, ...]:
    """One ``records`` row in RECORD_COLUMNS order (timestamp in milliseconds)."""
    structs: list[tuple[Any, ...] | None] = [None] * len(STRUCT_RECORD_CLASSES)
    if not isinstance(record, NoOpRecord):
        structs[_STRUCT_INDEX[type(record)]] = record_fields(record)
    return (
        position.source,
        position.snapshot_id,
        position.end_offset,
        position.offset,
        position.epoch,
        position.timestamp_ms,
        position.record_index,
        type(record).__name__,
        record.TYPE_ID,
        record.VERSION,
        *structs,
    )


def broker_rows(image: MetadataImage, snapshot_id: str) -> Iterator[tuple[Any, ...]]:
    end_offset = image.offset + 1
    for broker_id in sorted(image.cluster.brokers):
        broker = image.cluster.brokers[broker_id]
        endpoints = [attrs.astuple(endpoint) for endpoint in broker.endpoints]
        yield (
            snapshot_id,
            end_offset,
            broker.id,
            broker.epoch,
            broker.incarnation_id,
            broker.rack,
            broker.fenced,
            broker.in_controlled_shutdown,
            endpoints,
        )


def topic_rows(image: MetadataImage, snapshot_id: str) -> Iterator[tuple[Any, ...]]:
    """One row per topic; replication factor as Kafka's tools report it (partition 0's)."""
    end_offset = image.offset + 1
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        first = topic.partitions.get(0)
        replication_factor = len(first.replicas) if first is not None else 0
        yield (
            snapshot_id,
            end_offset,
            name,
            topic.topic_id,
            len(topic.partitions),
            replication_factor,
        )


def partition_rows(image: MetadataImage, snapshot_id: str) -> Iterator[tuple[Any, ...]]:
    end_offset = image.offset + 1
    for name in sorted(image.topics.by_name):
        topic = image.topics.by_name[name]
        for partition_id in sorted(topic.partitions):
            p = topic.partitions[partition_id]
            yield (
                snapshot_id,
                end_offset,
                name,
                topic.topic_id,
                partition_id,
                list(p.replicas),
                list(p.isr),
                list(p.removing_replicas),
                list(p.adding_replicas),
                p.leader,
                int(p.leader_recovery_state),
                p.leader_epoch,
                p.partition_epoch,
            )


def config_rows(image: MetadataImage, snapshot_id: str) -> Iterator[tuple[Any, ...]]:
    end_offset = image.offset + 1
    for resource_type, resource_name in sorted(image.configs.resources):
        config = image.configs.resources[(resource_type, resource_name)]
        type_name = _resource_type_name(resource_type)
        for key in sorted(config):
            yield (
                snapshot_id,
                end_offset,
                resource_type,
                type_name,
                resource_name,
                key,
                config[key],
            )


def _resource_type_name(resource_type: int) -> str:
    try:
        return ConfigResourceType(resource_type).name.lower()
    except ValueError:
        return f"unknown({resource_type})"
