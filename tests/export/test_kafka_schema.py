"""``pykraft-kafka``'s row is Spark's Kafka source's (``KafkaRecordToRowConverter``), built from
the file source's column definitions where the two agree."""

from __future__ import annotations

from pykraft.export.spark_schemas import (
    KAFKA_COLUMNS,
    KAFKA_SCHEMA,
    KAFKA_SCHEMA_WITH_HEADERS,
    LOG_SCHEMA,
)


def test_sparks_kafka_columns_in_sparks_order_and_types() -> None:
    assert [(f.name, f.dataType.simpleString()) for f in KAFKA_SCHEMA_WITH_HEADERS] == [
        ("key", "binary"),
        ("value", "binary"),
        ("topic", "string"),
        ("partition", "int"),
        ("offset", "bigint"),
        ("timestamp", "timestamp"),
        ("timestampType", "int"),
        ("headers", "array<struct<key:string,value:binary>>"),
    ]
    assert KAFKA_SCHEMA.fieldNames() == KAFKA_SCHEMA_WITH_HEADERS.fieldNames()[:-1]


def test_shared_columns_are_the_file_sources_definitions() -> None:
    for name, column in KAFKA_COLUMNS.items():
        assert KAFKA_SCHEMA[name].dataType == LOG_SCHEMA[column].dataType
        assert KAFKA_SCHEMA[name].nullable == LOG_SCHEMA[column].nullable
    assert KAFKA_SCHEMA_WITH_HEADERS["headers"] == LOG_SCHEMA["headers"]
    assert KAFKA_SCHEMA["key"].nullable and KAFKA_SCHEMA["value"].nullable  # null keys, tombstones
