"""Explicit Spark schemas of the ``pykraft-log`` and ``pykraft-metadata`` data sources.

Column names and order come from the pure modules (``export.segment_reader.LOG_COLUMNS``,
``export.metadata_rows.*_COLUMNS``); this module only gives them Spark types. A test checks both
agree. Kafka's types map to Spark's: int8/int16/int32 to INT, int64 to BIGINT, a record
timestamp (milliseconds) to TIMESTAMP.
"""

from __future__ import annotations

import attrs
from pyspark.sql.types import (
    ArrayType,
    BinaryType,
    BooleanType,
    DataType,
    DoubleType,
    IntegerType,
    LongType,
    StringType,
    StructField,
    StructType,
    TimestampType,
)

from pykraft.export.metadata_rows import STRUCT_RECORD_CLASSES, struct_column_name

_INT, _LONG, _STRING, _BOOL = IntegerType(), LongType(), StringType(), BooleanType()
_INT_ARRAY = ArrayType(_INT, containsNull=False)


def _struct(*fields: tuple[str, DataType, bool]) -> StructType:
    return StructType([StructField(name, kind, nullable) for name, kind, nullable in fields])


_HEADER = _struct(("key", _STRING, False), ("value", BinaryType(), True))
_ENDPOINT = _struct(
    ("name", _STRING, False),
    ("host", _STRING, False),
    ("port", _INT, False),
    ("security_protocol", _INT, False),
)
_FEATURE = _struct(
    ("name", _STRING, False),
    ("min_supported_version", _INT, False),
    ("max_supported_version", _INT, False),
)
# A client quota entity's part (KIP-546): a null name is the type's default entity.
_QUOTA_ENTITY = _struct(("entity_type", _STRING, False), ("entity_name", _STRING, True))

LOG_SCHEMA = _struct(
    ("topic", _STRING, False),
    ("partition", _INT, False),
    ("offset", _LONG, False),
    ("timestamp", TimestampType(), False),
    ("timestamp_type", _INT, False),
    ("key", BinaryType(), True),
    ("value", BinaryType(), True),
    ("headers", ArrayType(_HEADER, containsNull=False), False),
    ("leader_epoch", _INT, False),
    ("producer_id", _LONG, False),
    ("producer_epoch", _INT, False),
    ("is_transactional", _BOOL, False),
)

# Spark's Kafka source's row (``KafkaRecordToRowConverter.kafkaSchema``): the file source's
# columns where the two agree, taken from LOG_SCHEMA so there is one definition of each; only the
# name ``timestampType`` is Spark's spelling of our ``timestamp_type``. ``headers`` is there when
# the source's ``includeHeaders`` is true, as in Spark.
KAFKA_COLUMNS = {
    "key": "key",
    "value": "value",
    "topic": "topic",
    "partition": "partition",
    "offset": "offset",
    "timestamp": "timestamp",
    "timestampType": "timestamp_type",
}
KAFKA_SCHEMA = StructType(
    [
        StructField(name, LOG_SCHEMA[column].dataType, LOG_SCHEMA[column].nullable)
        for name, column in KAFKA_COLUMNS.items()
    ]
)
KAFKA_SCHEMA_WITH_HEADERS = StructType([*KAFKA_SCHEMA.fields, LOG_SCHEMA["headers"]])

# Record field name -> Spark type; (record class name, field) overrides where types differ.
_FIELD_TYPES: dict[str, DataType] = {
    "broker_id": _INT,
    "incarnation_id": _STRING,
    "broker_epoch": _LONG,
    "end_points": ArrayType(_ENDPOINT, containsNull=False),
    "features": ArrayType(_FEATURE, containsNull=False),
    "rack": _STRING,
    "fenced": _BOOL,
    "in_controlled_shutdown": _BOOL,
    "name": _STRING,
    "topic_id": _STRING,
    "partition_id": _INT,
    "replicas": _INT_ARRAY,
    "isr": _INT_ARRAY,
    "removing_replicas": _INT_ARRAY,
    "adding_replicas": _INT_ARRAY,
    # KIP-966 (tagged fields: empty when a record has none; null = unchanged in a change).
    "eligible_leader_replicas": _INT_ARRAY,
    "last_known_elr": _INT_ARRAY,
    "leader": _INT,
    "leader_recovery_state": _INT,
    "leader_epoch": _INT,
    "partition_epoch": _INT,
    "resource_type": _INT,
    "resource_name": _STRING,
    "value": _STRING,
    "id": _INT,
    "epoch": _LONG,
    "feature_level": _INT,
    "next_producer_id": _LONG,
    # SCRAM credentials (KIP-554) and ACLs (KIP-801): Kafka's int8 codes as INT.
    "mechanism": _INT,
    "salt": BinaryType(),
    "stored_key": BinaryType(),
    "server_key": BinaryType(),
    "iterations": _INT,
    "pattern_type": _INT,
    "principal": _STRING,
    "host": _STRING,
    "operation": _INT,
    "permission_type": _INT,
    # Client quotas (KIP-546): the entity's parts, the quota key and its float64 value.
    "entity": ArrayType(_QUOTA_ENTITY, containsNull=False),
    "key": _STRING,
    "remove": _BOOL,
    # Delegation tokens (KIP-48, KIP-373): principals as strings, times in ms.
    "owner": _STRING,
    "requester": _STRING,
    "renewers": ArrayType(_STRING, containsNull=False),
    "issue_timestamp": _LONG,
    "max_timestamp": _LONG,
    "expiration_timestamp": _LONG,
    "token_id": _STRING,
}
_FIELD_OVERRIDES: dict[tuple[str, str], DataType] = {
    # -1 unfence / 0 no change / 1 fence (BrokerRegistrationFencingChange)
    ("BrokerRegistrationChangeRecord", "fenced"): _INT,
    ("BrokerRegistrationChangeRecord", "in_controlled_shutdown"): _INT,
    # An ACL's id is a Kafka uuid string, a broker's an int.
    ("AccessControlEntryRecord", "id"): _STRING,
    ("RemoveAccessControlEntryRecord", "id"): _STRING,
    ("ClientQuotaRecord", "value"): DoubleType(),
}
# Fields that may be null (None means "unchanged" in a PartitionChangeRecord).
_NULLABLE_FIELDS = {
    "rack",
    "value",
    "isr",
    "replicas",
    "removing_replicas",
    "adding_replicas",
    "eligible_leader_replicas",
    "last_known_elr",
}


def record_struct(cls: type) -> StructType:
    fields = []
    for field in attrs.fields(cls):
        kind = _FIELD_OVERRIDES.get((cls.__name__, field.name), _FIELD_TYPES[field.name])
        fields.append(StructField(field.name, kind, field.name in _NULLABLE_FIELDS))
    return StructType(fields)


RECORDS_SCHEMA = StructType(
    [
        StructField("source", _STRING, False),
        StructField("snapshot_id", _STRING, True),
        StructField("end_offset", _LONG, False),
        StructField("offset", _LONG, True),
        StructField("epoch", _INT, False),
        StructField("timestamp", TimestampType(), False),
        StructField("record_index", _INT, False),
        StructField("record_type", _STRING, False),
        StructField("record_type_id", _INT, False),
        StructField("record_version", _INT, False),
    ]
    + [
        StructField(struct_column_name(cls), record_struct(cls), True)
        for cls in STRUCT_RECORD_CLASSES
    ]
)

_SNAPSHOT_COLUMNS = (("snapshot_id", _STRING, False), ("end_offset", _LONG, False))
BROKERS_SCHEMA = _struct(
    *_SNAPSHOT_COLUMNS,
    ("broker_id", _INT, False),
    ("broker_epoch", _LONG, False),
    ("incarnation_id", _STRING, False),
    ("rack", _STRING, True),
    ("fenced", _BOOL, False),
    ("in_controlled_shutdown", _BOOL, False),
    ("endpoints", ArrayType(_ENDPOINT, containsNull=False), False),
)
TOPICS_SCHEMA = _struct(
    *_SNAPSHOT_COLUMNS,
    ("topic", _STRING, False),
    ("topic_id", _STRING, False),
    ("partitions", _INT, False),
    ("replication_factor", _INT, False),
)
PARTITIONS_SCHEMA = _struct(
    *_SNAPSHOT_COLUMNS,
    ("topic", _STRING, False),
    ("topic_id", _STRING, False),
    ("partition", _INT, False),
    ("replicas", _INT_ARRAY, False),
    ("isr", _INT_ARRAY, False),
    ("removing_replicas", _INT_ARRAY, False),
    ("adding_replicas", _INT_ARRAY, False),
    ("leader", _INT, False),
    ("leader_recovery_state", _INT, False),
    ("leader_epoch", _INT, False),
    ("partition_epoch", _INT, False),
)
CONFIGS_SCHEMA = _struct(
    *_SNAPSHOT_COLUMNS,
    ("resource_type", _INT, False),
    ("resource_type_name", _STRING, False),
    ("resource_name", _STRING, False),
    ("name", _STRING, False),
    ("value", _STRING, True),
)

VIEW_SCHEMAS: dict[str, StructType] = {
    "records": RECORDS_SCHEMA,
    "brokers": BROKERS_SCHEMA,
    "topics": TOPICS_SCHEMA,
    "partitions": PARTITIONS_SCHEMA,
    "configs": CONFIGS_SCHEMA,
}
