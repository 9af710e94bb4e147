"""The pykraft-log and pykraft-metadata Spark data sources against the project's own readers."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from pykraft.export.metadata_journal import retained_image
from pykraft.export.metadata_rows import (
    BROKER_COLUMNS,
    CONFIG_COLUMNS,
    PARTITION_COLUMNS,
    RECORD_COLUMNS,
    STRUCT_RECORD_CLASSES,
    TOPIC_COLUMNS,
    broker_rows,
    config_rows,
    partition_rows,
    record_fields,
    struct_column_name,
    topic_rows,
)
from pykraft.export.segment_reader import LOG_COLUMNS
from pykraft.export.spark_schemas import LOG_SCHEMA, VIEW_SCHEMAS
from pykraft.export.spark_sources import JOURNAL_VIEW_ID
from pykraft.metadata.snapshot import load_snapshot, read_snapshot
from tests.export.fixtures import (
    LogFixture,
    MetadataFixture,
    build_fresh_metadata_dir,
    build_log_dirs,
    build_metadata_dir,
    expected_log_records,
    expected_log_rows,
)

pytestmark = pytest.mark.slow

LOG_SELECT = [*LOG_COLUMNS[:3], "unix_millis(timestamp) AS timestamp", *LOG_COLUMNS[4:]]


@pytest.fixture(scope="module")
def logs(tmp_path_factory: pytest.TempPathFactory) -> LogFixture:
    return build_log_dirs(tmp_path_factory.mktemp("logs"))


@pytest.fixture(scope="module")
def meta(tmp_path_factory: pytest.TempPathFactory) -> MetadataFixture:
    return build_metadata_dir(tmp_path_factory.mktemp("meta"))


def plain(value: Any) -> Any:
    """Spark Rows and lists as tuples, so they compare with the readers' values."""
    if isinstance(value, list | tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def log_rows(spark: Any, logs: LogFixture, where: str = "true", **options: str) -> list[Any]:
    df = spark.read.format("pykraft-log").options(**options).load(logs.log_dirs_option)
    rows = df.where(where).selectExpr(*LOG_SELECT).collect()
    return sorted(plain(row) for row in rows)


def test_schemas_match_the_pure_column_lists() -> None:
    assert tuple(LOG_SCHEMA.fieldNames()) == LOG_COLUMNS
    for view, columns in (
        ("records", RECORD_COLUMNS),
        ("brokers", BROKER_COLUMNS),
        ("topics", TOPIC_COLUMNS),
        ("partitions", PARTITION_COLUMNS),
        ("configs", CONFIG_COLUMNS),
    ):
        assert tuple(VIEW_SCHEMAS[view].fieldNames()) == columns


def test_log_rows_equal_storage_reader_all_codecs(spark: Any, logs: LogFixture) -> None:
    assert log_rows(spark, logs) == sorted(expected_log_rows(logs))
    everything = log_rows(spark, logs, ignoreHighWatermark="true")
    assert everything == sorted(expected_log_rows(logs, ignore_high_watermark=True))


def test_log_pushdown_prunes_and_stays_exact(spark: Any, logs: LogFixture) -> None:
    where = "topic = 'orders' AND partition IN (0, 2) AND offset >= 3 AND offset < 12"
    df = spark.read.format("pykraft-log").load(logs.log_dirs_option).where(where)
    expected = sorted(
        r
        for r in expected_log_rows(logs)
        if r[0] == "orders" and r[1] in (0, 2) and 3 <= int(str(r[2])) < 12
    )
    assert sorted(plain(r) for r in df.selectExpr(*LOG_SELECT).collect()) == expected
    # One input split per surviving segment: the pushed filters pruned the others.
    all_splits = spark.read.format("pykraft-log").load(logs.log_dirs_option).rdd
    assert df.rdd.getNumPartitions() < all_splits.getNumPartitions()


def test_register_works_on_a_plain_session(spark: Any, logs: LogFixture) -> None:
    """Issue 15: ``register`` on a session without Python filter pushdown left every filtered
    read failing with DATA_SOURCE_PUSHDOWN_DISABLED; registering twice is no error."""
    from pykraft.export.spark_sources import PUSHDOWN_CONF, register

    def filtered_count() -> int:
        df = spark.read.format("pykraft-log").load(logs.log_dirs_option)
        return int(df.where("topic = 'orders' AND partition = 1").count())

    spark.conf.set(PUSHDOWN_CONF, "false")
    try:
        with pytest.raises(Exception, match="DATA_SOURCE_PUSHDOWN_DISABLED"):
            filtered_count()
        register(spark)
        expected = sum(1 for r in expected_log_rows(logs) if r[0] == "orders" and r[1] == 1)
        assert filtered_count() == expected
    finally:
        spark.conf.set(PUSHDOWN_CONF, "true")


def test_metadata_views_of_a_fresh_cluster_come_from_its_journal(
    spark: Any, tmp_path: Path
) -> None:
    root = build_fresh_metadata_dir(tmp_path / "meta")
    image = retained_image(root, root / "snapshots")
    assert image is not None
    df = spark.read.format("pykraft-metadata").option("view", "partitions").load(str(root))
    got = sorted(plain(r) for r in df.collect())
    assert got == sorted(plain(r) for r in partition_rows(image, JOURNAL_VIEW_ID))
    records = spark.read.format("pykraft-metadata").option("includeLog", "true")
    assert records.load(str(root)).count() == image.offset + 1


def test_corrupt_segment_names_file_and_position(
    spark: Any, logs: LogFixture, tmp_path: Path
) -> None:
    source = sorted(logs.partitions[min(logs.partitions)][0].glob("*.log"))[0]
    broken = tmp_path / "logs" / "orders-0"
    broken.mkdir(parents=True)
    data = bytearray(source.read_bytes())
    data[200] ^= 0xFF  # inside the first batches' bodies: a CRC mismatch
    target = broken / source.name
    target.write_bytes(bytes(data))
    df = spark.read.format("pykraft-log").option("ignoreHighWatermark", "true")
    with pytest.raises(Exception, match=f"segment {target} at byte \\d+: crc"):
        df.load(str(tmp_path / "logs")).collect()


def test_metadata_records_equal_read_snapshot_and_the_retained_log(
    spark: Any, meta: MetadataFixture
) -> None:
    df = (
        spark.read.format("pykraft-metadata")
        .option("includeLog", "true")
        .option("recordsPerSplit", "5")
        .load(str(meta.metadata_dir))
    )
    got = df.selectExpr("*", "unix_millis(timestamp) AS ms").collect()
    struct_of = {cls.__name__: struct_column_name(cls) for cls in STRUCT_RECORD_CLASSES}
    snapshot_rows = sorted(
        (
            r.snapshot_id,
            r.record_index,
            r.record_type,
            r.end_offset,
            r.ms,
            plain(r[struct_of[r.record_type]]),
        )
        for r in got
        if r.source == "snapshot"
    )
    expected = []
    for path in meta.snapshot_paths:
        header, records = read_snapshot(path)
        for index, record in enumerate(records):
            expected.append(
                (
                    path.name.removesuffix(".checkpoint"),
                    index,
                    type(record).__name__,
                    header.end_offset,
                    header.created_ms,
                    plain(record_fields(record)),
                )
            )
    assert snapshot_rows == sorted(expected)
    log = sorted((r.offset, r.epoch, r.ms, r.record_type) for r in got if r.source == "log")
    reference = expected_log_records(meta)
    assert log == [(o, e, ms, _type_of(line)) for o, e, ms, line in reference]


def test_metadata_views_equal_the_image(spark: Any, meta: MetadataFixture) -> None:
    path = meta.snapshot_paths[-1]
    image = load_snapshot(path)
    snapshot_id = path.name.removesuffix(".checkpoint")
    for view, rows in (
        ("brokers", broker_rows),
        ("topics", topic_rows),
        ("partitions", partition_rows),
        ("configs", config_rows),
    ):
        df = spark.read.format("pykraft-metadata").option("view", view)
        got = sorted(plain(r) for r in df.load(str(meta.metadata_dir)).collect())
        assert got == sorted(plain(r) for r in rows(image, snapshot_id)), view


def test_corrupt_snapshot_names_file_and_line(
    spark: Any, meta: MetadataFixture, tmp_path: Path
) -> None:
    source = meta.snapshot_paths[-1]
    lines = source.read_bytes().split(b"\n")
    lines[7] = lines[7].replace(b'"isr":', b'"isx":')
    (tmp_path / source.name).write_bytes(b"\n".join(lines))
    with pytest.raises(Exception, match=f"snapshot {tmp_path / source.name}, line 8"):
        spark.read.format("pykraft-metadata").load(str(tmp_path)).collect()


def _type_of(line: str) -> str:
    return line.split('"type":"', 1)[1].split('"', 1)[0]
