"""The two PySpark Python Data Sources: ``pykraft-log`` and ``pykraft-metadata``.

Thin by design: planning, pushdown decisions and decoding live in the pure modules
(``log_scan``, ``segment_reader``, ``snapshot_scan``, ``metadata_journal``,
``metadata_rows``); these classes only translate Spark's options and filters, return one
``InputPartition`` per split, and turn rows into Arrow batches, which Spark takes without
converting row by row. Workers import this module from the installed package.

``register(spark)`` registers both. Options (case-insensitive, all optional):

pykraft-log, ``load("dir1,dir2")`` (``log.dirs`` syntax; every broker's log dirs may be given:
a partition with several replicas is read from the one with the highest high watermark, see
``export.replica_choice``):
  ``topic``                   comma-separated topics to read (same as a topic filter)
  ``startingOffsets`` / ``endingOffsets``  the Kafka source's JSON ``{"t": {"0": 5}}``
  ``ignoreHighWatermark``     ``true`` also reads records at or above the high watermark (from
                              the replica with the largest log end offset)
  ``isolation.level``         ``read_committed`` (default): no aborted transaction's records and
                              nothing at or past the last stable offset (``export.isolation``);
                              ``read_uncommitted``: everything below the high watermark. Also
                              accepted as ``kafka.isolation.level``, Spark's Kafka source's name
pykraft-metadata, ``load(DIR)`` (a ``metadata.log.dir`` or a snapshot directory):
  ``view``       ``records`` (default), ``brokers``, ``topics``, ``partitions``, ``configs``
  ``snapshot``   ``all`` (records default), ``latest`` (views default), an id or end offset;
                 with no snapshot yet (a fresh cluster), ``latest`` and ``all`` read the Raft
                 journal: the views show the image at its end (``snapshot_id`` ``journal``)
                 and ``includeLog`` reads every retained record
  ``includeLog`` ``true`` adds the retained log's committed records after the last snapshot
  ``recordsPerSplit``  snapshot lines per input split (default 50,000)
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import attrs
from pyspark.sql import SparkSession
from pyspark.sql.datasource import (
    DataSource,
    DataSourceReader,
    EqualTo,
    Filter,
    GreaterThan,
    GreaterThanOrEqual,
    In,
    InputPartition,
    LessThan,
    LessThanOrEqual,
)
from pyspark.sql.types import StructType

from pykraft.export import metadata_rows
from pykraft.export.kafka_source import PykraftKafkaDataSource
from pykraft.export.log_dirs import LogScanError, parse_log_dirs
from pykraft.export.log_scan import (
    LogFilter,
    Op,
    Predicate,
    discover_partitions,
    isolation_level_option,
    parse_offset_ranges,
    plan_splits,
)
from pykraft.export.metadata_journal import RAFT_SUBDIR, read_retained_log, retained_image
from pykraft.export.metadata_rows import SOURCE_LOG, RecordPosition, record_row
from pykraft.export.segment_reader import (
    MAX_CHUNK_RECORDS,
    SegmentChunk,
    SegmentSplit,
    read_segment_chunks,
)
from pykraft.export.snapshot_scan import (
    DEFAULT_RECORDS_PER_SPLIT,
    MetadataScanError,
    SnapshotSplit,
    plan_snapshot_splits,
    select_snapshots,
    snapshot_directory,
    snapshot_split_rows,
)
from pykraft.export.spark_schemas import LOG_SCHEMA, VIEW_SCHEMAS
from pykraft.metadata.snapshot import list_snapshots, load_snapshot

LOG_FORMAT = "pykraft-log"
METADATA_FORMAT = "pykraft-metadata"
_OPS = {
    EqualTo: Op.EQ,
    In: Op.IN,
    GreaterThan: Op.GT,
    GreaterThanOrEqual: Op.GE,
    LessThan: Op.LT,
    LessThanOrEqual: Op.LE,
}


PUSHDOWN_CONF = "spark.sql.python.filterPushdown.enabled"


def register(spark: SparkSession) -> None:
    """Make ``spark.read.format("pykraft-log")``, ``"pykraft-metadata"`` and ``"pykraft-kafka"``
    (also ``spark.readStream``) available, on any session: Spark 4 refuses a Python source that
    takes filters (``pushFilters``) unless Python filter pushdown is on
    (DATA_SOURCE_PUSHDOWN_DISABLED), so this turns it on."""
    spark.conf.set(PUSHDOWN_CONF, "true")
    _register_once(spark, PykraftLogDataSource)
    _register_once(spark, PykraftMetadataDataSource)
    _register_once(spark, PykraftKafkaDataSource)


def _register_once(spark: SparkSession, source: type[DataSource]) -> None:
    """Register ``source`` unless the application has it already (its sessions share their
    data sources): calling ``register`` again, or on another session, is no error."""
    from pyspark.errors import AnalysisException

    try:
        spark.dataSource.register(source)
    except AnalysisException as error:
        if error.getCondition() != "DATA_SOURCE_ALREADY_EXISTS":
            raise


def _options(options: Any) -> dict[str, str]:
    """Spark hands options case-insensitively (lower-cased keys); look them up lower-cased."""
    return {str(key).lower(): str(value) for key, value in dict(options).items()}


def _flag(options: dict[str, str], name: str) -> bool:
    value = options.get(name.lower(), "false").strip().lower()
    if value not in ("true", "false"):
        raise ValueError(f"option {name} must be true or false, got {value!r}")
    return value == "true"


def _path(options: dict[str, str], source: str) -> str:
    path = options.get("path")
    if not path:
        raise ValueError(f"{source} needs a path: spark.read.format({source!r}).load(PATH)")
    return path


# ---------------------------------------------------------------------------- pykraft-log


class PykraftLogDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return LOG_FORMAT

    def schema(self) -> StructType:
        return LOG_SCHEMA

    def reader(self, schema: StructType) -> DataSourceReader:
        return LogReader(_options(self.options), schema)


class LogReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.log_dirs = parse_log_dirs(_path(options, LOG_FORMAT))
        self.schema = schema
        topics = options.get("topic")
        self.log_filter = LogFilter(
            topics=frozenset(t.strip() for t in topics.split(",")) if topics else None
        )
        self.ignore_high_watermark = _flag(options, "ignoreHighWatermark")
        self.offset_ranges = parse_offset_ranges(
            options.get("startingoffsets"), options.get("endingoffsets")
        )
        self.isolation_level = isolation_level_option(options)

    def pushFilters(self, filters: list[Filter]) -> Iterator[Filter]:
        for spark_filter in filters:
            narrowed = None
            op = _OPS.get(type(spark_filter))
            attribute: tuple[str, ...] = getattr(spark_filter, "attribute", ())
            if op is not None and len(attribute) == 1:
                value = spark_filter.value  # type: ignore[attr-defined]
                values = tuple(value) if op is Op.IN else (value,)
                narrowed = self.log_filter.push(Predicate(attribute[0], op, values))
            if narrowed is None:
                yield spark_filter  # Spark evaluates it after the scan
            else:
                self.log_filter = narrowed

    def partitions(self) -> Sequence[InputPartition]:
        splits = plan_splits(
            discover_partitions(self.log_dirs, ignore_high_watermark=self.ignore_high_watermark),
            self.log_filter,
            ignore_high_watermark=self.ignore_high_watermark,
            offset_ranges=self.offset_ranges,
            isolation_level=self.isolation_level,
        )
        return [InputPartition(split) for split in splits] or [InputPartition(None)]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        split: SegmentSplit | None = partition.value
        if split is None:
            return
        import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        for chunk in read_segment_chunks(split):
            yield _arrow_batch(pa, arrow_schema, chunk)


def _arrow_batch(pa: Any, schema: Any, chunk: SegmentChunk) -> Any:
    import pyarrow.compute as pc  # type: ignore[import-untyped, unused-ignore]

    count = len(chunk)
    timestamps = pc.multiply(pa.array(chunk.timestamp, pa.int64()), 1000)
    columns = [
        pa.array([chunk.topic] * count, pa.string()),
        pa.array([chunk.partition] * count, pa.int32()),
        pa.array(chunk.offset, pa.int64()),
        timestamps.cast(schema.field("timestamp").type),
        pa.array(chunk.timestamp_type, pa.int32()),
        pa.array(chunk.key, pa.binary()),
        pa.array(chunk.value, pa.binary()),
        pa.array(chunk.headers, schema.field("headers").type),
        pa.array(chunk.leader_epoch, pa.int32()),
        pa.array(chunk.producer_id, pa.int64()),
        pa.array(chunk.producer_epoch, pa.int32()),
        pa.array(chunk.is_transactional, pa.bool_()),
    ]
    return pa.RecordBatch.from_arrays(columns, schema=schema)


# ----------------------------------------------------------------------- pykraft-metadata


class PykraftMetadataDataSource(DataSource):
    @classmethod
    def name(cls) -> str:
        return METADATA_FORMAT

    def schema(self) -> StructType:
        view = _options(self.options).get("view", "records")
        if view not in VIEW_SCHEMAS:
            raise MetadataScanError(f"view must be one of {sorted(VIEW_SCHEMAS)}, got {view!r}")
        return VIEW_SCHEMAS[view]

    def reader(self, schema: StructType) -> DataSourceReader:
        return MetadataReader(_options(self.options), schema)


@attrs.frozen
class _ViewTask:
    """Build a typed view of one snapshot's image."""

    view: str
    path: str


@attrs.frozen
class _JournalViewTask:
    """Build a typed view of the image at the end of the retained log (no snapshot yet)."""

    view: str
    metadata_dir: str
    snapshot_dir: str


JOURNAL_VIEW_ID = "journal"  # the views' snapshot_id when they come from the journal


@attrs.frozen
class _LogTask:
    """The retained log's committed records from ``min_end_offset`` on."""

    metadata_dir: str
    snapshot_dir: str
    min_end_offset: int


class MetadataReader(DataSourceReader):
    def __init__(self, options: dict[str, str], schema: StructType) -> None:
        self.schema = schema
        root = Path(_path(options, METADATA_FORMAT))
        self.view = options.get("view", "records")
        self.snapshot_dir = snapshot_directory(root)
        # A metadata.log.dir holds snapshots/ (once the first is written) and raft/.
        is_metadata_dir = self.snapshot_dir != root or (root / RAFT_SUBDIR).is_dir()
        self.metadata_dir = root if is_metadata_dir else root.parent
        default = "all" if self.view == "records" else "latest"
        self.selector = options.get("snapshot", default)
        self.include_log = _flag(options, "includeLog")
        self.records_per_split = int(options.get("recordspersplit", DEFAULT_RECORDS_PER_SPLIT))
        if self.include_log and self.view != "records":
            raise MetadataScanError("includeLog applies to the records view only")

    def partitions(self) -> Sequence[InputPartition]:
        if self.selector in ("latest", "all") and not list_snapshots(self.snapshot_dir):
            return self._journal_partitions()
        snapshots = select_snapshots(self.snapshot_dir, self.selector)
        if self.view != "records":
            return [InputPartition(_ViewTask(self.view, str(path))) for path in snapshots]
        tasks: list[Any] = []
        for path in snapshots:
            tasks.extend(plan_snapshot_splits(path, self.records_per_split))
        if self.include_log:
            end_offset = max(split.end_offset for split in tasks) if tasks else 0
            tasks.append(_LogTask(str(self.metadata_dir), str(self.snapshot_dir), end_offset))
        return [InputPartition(task) for task in tasks] or [InputPartition(None)]

    def _journal_partitions(self) -> list[InputPartition]:
        """A fresh cluster: its whole history is still in the Raft journal."""
        if self.view != "records":
            task = _JournalViewTask(self.view, str(self.metadata_dir), str(self.snapshot_dir))
            return [InputPartition(task)]
        if not self.include_log:
            select_snapshots(self.snapshot_dir, self.selector)  # raises: no snapshot files
        return [InputPartition(_LogTask(str(self.metadata_dir), str(self.snapshot_dir), 0))]

    def read(self, partition: InputPartition) -> Iterator[Any]:
        task = partition.value
        if isinstance(task, SnapshotSplit):
            rows: Iterator[tuple[Any, ...]] = snapshot_split_rows(task)
        elif isinstance(task, _LogTask):
            rows = _log_rows(task)
        elif isinstance(task, _ViewTask):
            rows = _view_rows(task)
        elif isinstance(task, _JournalViewTask):
            rows = _journal_view_rows(task)
        else:
            return
        import pyarrow as pa  # type: ignore[import-untyped, unused-ignore]
        from pyspark.sql.pandas.types import to_arrow_schema

        arrow_schema = to_arrow_schema(self.schema, timezone="UTC")
        chunk: list[tuple[Any, ...]] = []
        for row in rows:
            chunk.append(row)
            if len(chunk) >= MAX_CHUNK_RECORDS:
                yield _rows_to_arrow(pa, arrow_schema, chunk)
                chunk = []
        if chunk:
            yield _rows_to_arrow(pa, arrow_schema, chunk)


def _rows_to_arrow(pa: Any, schema: Any, rows: list[tuple[Any, ...]]) -> Any:
    """Row tuples as one Arrow batch; TIMESTAMP columns arrive as milliseconds."""
    columns = []
    for field, values in zip(schema, zip(*rows, strict=True), strict=True):
        if pa.types.is_timestamp(field.type):  # Spark's Arrow timestamps are microseconds
            columns.append(pa.array([ms * 1000 for ms in values], type=field.type))
        else:
            columns.append(pa.array(values, type=field.type))
    return pa.RecordBatch.from_arrays(columns, schema=schema)


def _log_rows(task: _LogTask) -> Iterator[tuple[Any, ...]]:
    for log_record in read_retained_log(Path(task.metadata_dir), Path(task.snapshot_dir)):
        if log_record.offset + 1 <= task.min_end_offset:
            continue
        position = RecordPosition(
            SOURCE_LOG,
            None,
            log_record.offset + 1,
            log_record.offset,
            log_record.epoch,
            log_record.append_time_ms,
            0,
        )
        yield record_row(log_record.record, position)


_VIEW_ROWS = {
    "brokers": metadata_rows.broker_rows,
    "topics": metadata_rows.topic_rows,
    "partitions": metadata_rows.partition_rows,
    "configs": metadata_rows.config_rows,
}


def _journal_view_rows(task: _JournalViewTask) -> Iterator[tuple[Any, ...]]:
    image = retained_image(Path(task.metadata_dir), Path(task.snapshot_dir))
    if image is None:
        raise MetadataScanError(
            f"no snapshot files and no Raft journal in {task.metadata_dir}: "
            "is it a controller's metadata.log.dir?"
        )
    yield from _VIEW_ROWS[task.view](image, JOURNAL_VIEW_ID)


def _view_rows(task: _ViewTask) -> Iterator[tuple[Any, ...]]:
    path = Path(task.path)
    image = load_snapshot(path)
    yield from _VIEW_ROWS[task.view](image, path.name.removesuffix(".checkpoint"))


__all__ = ["LOG_FORMAT", "METADATA_FORMAT", "LogScanError", "MetadataScanError", "register"]
