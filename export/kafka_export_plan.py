"""``export-topic --bootstrap-server``: the export's planner and reader through the Kafka protocol.

The file path (``--log-dirs``) plans from the brokers' disks and reads with ``pykraft-log``; this
one plans from ListOffsets and reads with ``pykraft-kafka``, so it runs wherever the driver and
the executors reach the brokers (issue 15). Everything after the read — staging, the output check,
the manifest commit — is ``export.export_topic_job``'s, the same for both.

Planning (``plan_kafka_export``) is the source's own (``kafka_plan``), asked through its offset
reader (``kafka_client.KafkaOffsetReader``): each partition of the topic reads from the manifest's
committed end (a partition it has never exported: from the log start offset) to ``latest`` at the
export's isolation level — the last stable offset under ``read_committed`` (ListOffsets with
``isolation_level=1``, KIP-98), the high watermark under ``read_uncommitted``. Offsets the manifest
has not exported that the log no longer holds (retention, DeleteRecords, a recreated topic) are
Spark's ``failOnDataLoss`` failure: the run stops before anything is written, naming the partition
and the offsets, and commits nothing.

Reading (``read_planned``): ``assign`` of the planned partitions with ``startingOffsets`` /
``endingOffsets`` JSON of exactly the planned ranges. The rows become the export's columns in one
place (``export_columns``): the Kafka row's, named as the file source names them
(``spark_schemas.KAFKA_COLUMNS``), with headers. The Kafka protocol does not carry the leader
epoch or the producer fields per record, so this output has fewer columns than the file path's,
and the manifest records its source (``manifest.KAFKA_SOURCE``).

``--command-config`` is a Kafka client properties file (security included), turned into
librdkafka's names as every tool's (``pykraft.client_properties``) and passed as ``kafka.*``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, ClassVar, Protocol

import attrs

from pykraft.client_properties import librdkafka_config
from pykraft.export.isolation import ISOLATION_LEVEL_OPTION, IsolationLevel
from pykraft.export.kafka_options import EARLIEST, SpecificOffsets, Subscribe, parse_batch_options
from pykraft.export.kafka_plan import (
    DataLossError,
    DescribedTopic,
    offset_ranges,
    resolve_offsets,
    select_partitions,
)
from pykraft.export.manifest import KAFKA_SOURCE, ExportedRange, ExportPlan, Manifest
from pykraft.export.spark_schemas import KAFKA_COLUMNS, LOG_SCHEMA
from pykraft.storage.topic_partition import TopicPartition

# The export's columns from this source, in the file source's order: the Kafka row's, and headers.
EXPORT_COLUMNS = tuple(
    field.name
    for field in LOG_SCHEMA.fields
    if field.name in KAFKA_COLUMNS.values() or field.name == "headers"
)


class OffsetReader(Protocol):
    """What planning asks the brokers (``kafka_client.KafkaOffsetReader``)."""

    def describe_topic(self, topic: str) -> DescribedTopic | None:
        """None: the brokers do not have the topic."""
        ...

    def earliest(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...

    def latest(self, partitions: Sequence[TopicPartition]) -> dict[TopicPartition, int]: ...


class TopicNotFoundError(ValueError):
    """The topic is not in the brokers' metadata."""


def plan_kafka_export(manifest: Manifest, topic: str, reader: OffsetReader) -> ExportPlan:
    """The ranges to export now (see the module doc); raises ``DataLossError`` when offsets the
    manifest has not exported are gone from the log."""
    described = reader.describe_topic(topic)
    partitions = select_partitions(
        Subscribe((topic,)), {} if described is None else {topic: described.partitions}
    )
    if described is None or not partitions:
        raise TopicNotFoundError(f"topic {topic!r} is not in the brokers' metadata")
    if manifest.topic_id not in (None, described.topic_id):
        _lost(
            f"topic {topic} was deleted and recreated since the last export (its topic id is "
            f"{described.topic_id}, the exported one's {manifest.topic_id})"
        )
    earliest = reader.earliest(partitions)
    latest = reader.latest(partitions)
    done = manifest.next_offsets()
    _check_nothing_lost(topic, done, partitions, earliest, latest)
    starts = resolve_offsets(
        SpecificOffsets({tp: done.get(tp.partition, EARLIEST) for tp in partitions}),
        partitions,
        earliest,
        latest,
        name="startingOffsets",
        fail_on_data_loss=True,
    )
    ranges = offset_ranges(starts, latest, fail_on_data_loss=True)
    return ExportPlan(
        tuple(ExportedRange(r.partition, r.from_offset, r.until_offset) for r in ranges if r.size),
        empty=tuple(
            ExportedRange(r.partition, r.from_offset, r.until_offset)
            for r in ranges
            if not r.size and r.partition not in done
        ),
        topic_id=described.topic_id,
    )


def _check_nothing_lost(
    topic: str,
    done: Mapping[int, int],
    partitions: Sequence[TopicPartition],
    earliest: Mapping[TopicPartition, int],
    latest: Mapping[TopicPartition, int],
) -> None:
    """Spark's ``failOnDataLoss``, said in the export's terms (``kafka_plan`` would also fail,
    naming the source option the export does not take)."""
    found = {tp.partition: tp for tp in partitions}
    for unknown in partitions:
        # Once the topic was exported, a partition the manifest does not know (empty then, or
        # added since) starts at offset 0: a later log start means records were removed.
        if done and unknown.partition not in done and earliest[unknown] > 0:
            _lost(
                f"offsets 0..{earliest[unknown] - 1} of {unknown} were removed from the log (it "
                f"starts at {earliest[unknown]}) before they were exported"
            )
    for partition, exported_to in sorted(done.items()):
        tp = found.get(partition)
        if tp is None:
            _lost(f"partition {topic}-{partition} is gone (exported up to offset {exported_to})")
        elif earliest[tp] > exported_to:
            _lost(
                f"offsets {exported_to}..{earliest[tp] - 1} of {tp} were removed from the log "
                f"(it starts at {earliest[tp]}) before they were exported"
            )
        elif latest[tp] < exported_to:
            _lost(
                f"{tp} ends at offset {latest[tp]}, before the {exported_to} already exported "
                "(was the topic recreated?)"
            )


def _lost(what: str) -> None:
    raise DataLossError(
        f"{what}: some data may have been lost; nothing was exported or committed. Export to "
        "another --out directory to start from the log start offsets"
    )


def source_options(
    bootstrap_servers: str,
    client_properties: Mapping[str, str],
    isolation_level: IsolationLevel,
) -> dict[str, str]:
    """``pykraft-kafka``'s connection options: the client properties (Kafka's names, as in a
    ``--command-config`` file) in librdkafka's names, each as ``kafka.*``."""
    config = librdkafka_config(bootstrap_servers, client_properties)
    options = {f"kafka.{key}": str(value) for key, value in config.items()}
    options[ISOLATION_LEVEL_OPTION] = isolation_level.value
    return options


def export_columns(df: Any) -> Any:
    """The Kafka rows as the export's columns: the one mapping between the two."""
    from pyspark.sql import functions as F

    ours_to_kafka = {ours: kafka for kafka, ours in KAFKA_COLUMNS.items()}
    return df.select(*[F.col(ours_to_kafka.get(name, name)).alias(name) for name in EXPORT_COLUMNS])


@attrs.frozen
class KafkaExportSource:
    """``export-topic --bootstrap-server``: what ``export_topic_job`` plans and reads with."""

    name: ClassVar[str] = KAFKA_SOURCE
    bootstrap_servers: str
    client_properties: Mapping[str, str] = attrs.field(factory=dict, repr=False)

    def where(self, topic: str) -> str:
        return f"offsets of {topic} at {self.bootstrap_servers}"

    def options(self, isolation_level: IsolationLevel) -> dict[str, str]:
        return source_options(self.bootstrap_servers, self.client_properties, isolation_level)

    def plan(
        self, manifest: Manifest, topic: str, isolation_level: IsolationLevel
    ) -> tuple[ExportPlan, tuple[ExportedRange, ...]]:
        """The plan and the ranges held back for an open transaction (not known here: the
        high watermark is not asked for, so none are reported)."""
        from pykraft.export.kafka_client import KafkaOffsetReader

        # The source's own option parsing, so the driver's client is configured as its own.
        parsed = parse_batch_options(
            {key.lower(): value for key, value in self.options(isolation_level).items()}
            | {"subscribe": topic}
        )
        reader = KafkaOffsetReader(parsed.consumer_config, parsed.isolation_level)
        return plan_kafka_export(manifest, topic, reader), ()

    def read(
        self, spark: Any, topic: str, plan: ExportPlan, isolation_level: IsolationLevel
    ) -> Any:
        """Exactly the planned ranges, as the export's columns."""
        from pykraft.export.kafka_source import KAFKA_FORMAT

        partitions = [r.partition for r in plan.ranges]
        starting = {topic: {str(r.partition): r.start_offset for r in plan.ranges}}
        ending = {topic: {str(r.partition): r.end_offset for r in plan.ranges}}
        df = (
            spark.read.format(KAFKA_FORMAT)
            .options(**self.options(isolation_level))
            .option("assign", json.dumps({topic: partitions}))
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
            .option("includeHeaders", "true")
            .load()
        )
        return export_columns(df)
