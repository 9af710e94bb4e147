"""pykraft-log and export-topic over every broker's log dirs of an RF=3 topic (Spark).

Each partition is read from one replica: the highest high watermark, never above it
(export.replica_choice); the export writes each offset once, also when a rerun reads another
replica. Expected rows come from storage's own reader over the replica that should be read.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pykraft.export.manifest import ExportedRange
from pykraft.export.segment_reader import LOG_COLUMNS
from pykraft.storage.topic_partition import TopicPartition
from tests.export.fixtures import LogFixture, expected_log_rows, export_now
from tests.export.replica_fixtures import Replicas, catch_up, three_brokers

pytestmark = pytest.mark.slow

TOPIC = "clicks"
CLICKS_0, CLICKS_1 = TopicPartition(TOPIC, 0), TopicPartition(TOPIC, 1)
LOG_SELECT = [*LOG_COLUMNS[:3], "unix_millis(timestamp) AS timestamp", *LOG_COLUMNS[4:]]


def plain(value: Any) -> Any:
    if isinstance(value, list | tuple):
        return tuple(plain(item) for item in value)
    if isinstance(value, bytearray):
        return bytes(value)
    return value


def scan(spark: Any, replicas: Replicas, **options: str) -> list[Any]:
    df = spark.read.format("pykraft-log").options(**options).load(replicas.log_dirs_option)
    return sorted(plain(row) for row in df.selectExpr(*LOG_SELECT).collect())


def exported(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    rows = spark.read.parquet(str(out)).selectExpr("partition", "offset", "value").collect()
    return sorted((r[0], r[1], bytes(r[2])) for r in rows)


def owed(fixture: LogFixture) -> list[tuple[Any, ...]]:
    return sorted((row[1], row[2], row[6]) for row in expected_log_rows(fixture))


def test_rf3_scan_reads_the_highest_high_watermark_replica_below_it(
    spark: Any, tmp_path: Path
) -> None:
    replicas = three_brokers(tmp_path / "logs")
    # clicks-0 from broker 2 (broker 1's longer log has a deposed leader's tail, broker 3 no
    # checkpoint entry), clicks-1 from broker 3: each below its high watermark.
    committed = replicas.as_read_from({CLICKS_0: 1, CLICKS_1: 2})
    assert scan(spark, replicas) == sorted(expected_log_rows(committed))
    # ignoreHighWatermark: the longest logs, to their end, stale tail included.
    longest = replicas.as_read_from({CLICKS_0: 0, CLICKS_1: 1})
    everything = sorted(expected_log_rows(longest, ignore_high_watermark=True))
    assert scan(spark, replicas, ignoreHighWatermark="true") == everything
    assert any(isinstance(row[6], bytes) and b"deposed leader" in row[6] for row in everything)


def test_rf3_export_writes_each_offset_once_across_replicas(spark: Any, tmp_path: Path) -> None:
    replicas = three_brokers(tmp_path / "logs")
    out = tmp_path / "out"
    first = export_now(spark, replicas.log_dirs_option, TOPIC, out)
    first_hw = replicas.replicas[(CLICKS_0, 1)][1]
    assert [(r.partition, r.start_offset, r.end_offset) for r in first.ranges] == [
        (0, 0, first_hw),
        (1, 0, replicas.replicas[(CLICKS_1, 2)][1]),
    ]
    assert exported(spark, out) == owed(replicas.as_read_from({CLICKS_0: 1, CLICKS_1: 2}))
    # Broker 3 catches up on clicks-0 and passes broker 2: the rerun reads broker 3's replica
    # and exports only the offsets past what the manifest says is done.
    new_hw = catch_up(replicas, CLICKS_0, 2, 14)
    second = export_now(spark, replicas.log_dirs_option, TOPIC, out)
    assert second.ranges == (ExportedRange(0, first_hw, new_hw, new_hw - first_hw),)
    rows = exported(spark, out)
    assert Counter(Counter((p, o) for p, o, _ in rows).values()) == {1: len(rows)}
    assert rows == owed(replicas.as_read_from({CLICKS_0: 2, CLICKS_1: 2}))
