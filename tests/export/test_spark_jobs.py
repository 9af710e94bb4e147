"""The report and export-topic jobs, checked against the project's own readers."""

from __future__ import annotations

import json
import re
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pykraft.export.export_topic_job import ExportLockedError, RecoveryError
from pykraft.export.isolation import IsolationLevel
from pykraft.export.manifest import (
    LOCK_FILE,
    MANIFEST_FILE,
    ExportedRange,
    load_manifest,
)
from pykraft.export.output_lock import lock_text
from pykraft.export.report_job import (
    CHART_FILE,
    HTML_FILE,
    SIZES_TABLE,
    SUMMARY_FILE,
    TABLES,
    run_report,
)
from pykraft.metadata.snapshot import load_snapshot
from pykraft.storage.topic_partition import TopicPartition
from tests.export.fixtures import (
    build_log_dirs,
    build_metadata_dir,
    expected_log_records,
    expected_log_rows,
    export_now,
)
from tests.export.txn_fixtures import TxnPartition, kafka_mixed_transactions

pytestmark = pytest.mark.slow


def test_report_matches_the_image(
    spark: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    meta = build_metadata_dir(tmp_path / "meta")
    logs = build_log_dirs(tmp_path / "logs")
    out = tmp_path / "report"
    steps: list[str] = []
    # A file: URI goes through the Hadoop store (export.output_store) as hdfs:// or s3a:// would.
    collected = run_report(
        spark,
        meta.metadata_dir,
        f"file://{out}",
        log_dirs=logs.log_dirs_option,
        progress=steps.append,
    )
    image = load_snapshot(meta.snapshot_paths[-1])
    partitions = {
        (t.name, p): reg for t in image.topics.by_name.values() for p, reg in t.partitions.items()
    }
    live = {b.id for b in image.cluster.brokers.values() if not b.fenced}
    leaders = Counter(r.leader for r in partitions.values() if r.leader >= 0)
    replicas = Counter(b for r in partitions.values() for b in r.replicas)
    load = {
        row["broker_id"]: (row["leaders"], row["replicas"], row["fenced"])
        for row in collected["broker_load"]
    }
    assert load == {
        b: (leaders[b], replicas[b], image.cluster.brokers[b].fenced) for b in image.cluster.brokers
    }
    offline = {k for k, r in partitions.items() if r.leader not in live}
    under = {k for k, r in partitions.items() if r.leader in live and len(r.isr) < len(r.replicas)}
    assert {(r["topic"], r["partition"]) for r in collected["offline"]} == offline
    assert {(r["topic"], r["partition"]) for r in collected["under_replicated"]} == under
    assert offline == {("payments", 2)} and under == {("payments", 1)}
    changes = [
        (o, line)
        for o, _, _, line in expected_log_records(meta)
        if '"type":"PartitionChangeRecord"' in line
    ]
    assert [r["offset"] for r in collected["isr_changes"]] == [o for o, _ in changes]
    assert all(r["topic"] == "orders" for r in collected["isr_changes"])
    # journal_batches: orders-0 shrinks to [1, 2] and expands back; orders-1 changes leader only.
    assert [
        (r["partition"], r["isr_before"], r["isr"], r["shrink"], r["expand"])
        for r in collected["isr_changes"]
    ] == [
        (0, [1, 2, 3], [1, 2], True, False),
        (0, [1, 2], [1, 2, 3], False, True),
        (1, [2, 3, 1], None, False, False),
        (2, [3, 1, 2], [1, 2], True, False),
    ]
    sizes = {(r["topic"], r["partition"]): r["size"] for r in collected[SIZES_TABLE]}
    assert sizes == {
        (tp.topic, tp.partition): sum(p.stat().st_size for p in d.glob("*.log"))
        for tp, (d, *_) in logs.partitions.items()
    }
    for name in (*TABLES, SIZES_TABLE):
        assert list((out / name).glob("*.parquet")), name
    for chart in (CHART_FILE, "isr_changes.png", "partition_sizes.png"):
        assert (out / chart).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    page = (out / HTML_FILE).read_text()
    assert page.count("data:image/png;base64,") == 3
    assert '<td>payments</td><td class="number">1</td>' in page  # the under-replicated one
    assert "<td>audit-log</td>" in page  # a partition size
    printed = capsys.readouterr().out
    assert "under-replicated partitions: 1   offline partitions: 1" in printed
    assert (out / SUMMARY_FILE).read_text() == printed
    assert len(steps) == 10 and steps[-1] == "[10/10] writing report.html and summary.txt"
    print(f"the report's page and charts: {out / HTML_FILE}")


def parquet_rows(spark: Any, out: Path) -> list[tuple[Any, ...]]:
    df = spark.read.parquet(str(out))
    rows = df.selectExpr("topic", "partition", "offset", "value").collect()
    return sorted((r[0], r[1], r[2], None if r[3] is None else bytes(r[3])) for r in rows)


def expected_rows(logs: Any, topic: str) -> list[tuple[Any, ...]]:
    return sorted((r[0], r[1], r[2], r[6]) for r in expected_log_rows(logs) if r[0] == topic)


def test_export_topic_finishes_an_interrupted_run(spark: Any, tmp_path: Path) -> None:
    logs = build_log_dirs(tmp_path / "logs")
    out = tmp_path / "out"
    export_now(spark, logs.log_dirs_option, "orders", out)
    # Replay the crash window: the manifest says PENDING and the files are still staged, in
    # the directory the manifest names (issue 15: run-1-<attempt>; a manifest from before
    # has none, meaning run-1: test_manifest.py).
    document = json.loads((out / MANIFEST_FILE).read_text())
    [run] = document["runs"]
    assert re.fullmatch(r"_staging/run-1-[0-9a-f]{16}", run["staging"]), run
    run["state"] = "PENDING"
    (out / MANIFEST_FILE).write_text(json.dumps(document))
    staged = out / run["staging"]
    published = sorted(out.glob("partition=*/run-1-*.parquet"))
    for file in published:
        target = staged / file.parent.name / file.name.removeprefix("run-1-")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.move(file, target)
    # A task of another (killed) driver attempt of run 1 left a file in its own directory:
    # never published, deleted with it.
    zombie = out / "_staging" / "run-1-0123456789abcdef" / published[0].parent.name
    zombie.mkdir(parents=True)
    shutil.copy(next(staged.glob("partition=*/*.parquet")), zombie / "part-zombie.parquet")
    result = export_now(spark, logs.log_dirs_option, "orders", out)
    assert result.recovered_run == 1 and result.run_id is None
    assert parquet_rows(spark, out) == expected_rows(logs, "orders")
    assert not list(out.glob("partition=*/*zombie*"))
    assert not (out / "_staging").exists()


def test_export_topic_runs_alone_and_never_commits_a_run_whose_files_are_gone(
    spark: Any, tmp_path: Path
) -> None:
    """Review of issue 15, findings 3 and 4: a second run on the same output while one holds
    its lock (a cron overrun) touches nothing; a pending run missing a partition's files is
    not committed (its records would be lost)."""
    logs = build_log_dirs(tmp_path / "logs")
    out = tmp_path / "out"
    export_now(spark, logs.log_dirs_option, "orders", out)
    assert not (out / LOCK_FILE).exists()  # released
    document = json.loads((out / MANIFEST_FILE).read_text())
    [run] = document["runs"]
    run["state"] = "PENDING"
    (out / MANIFEST_FILE).write_text(json.dumps(document))
    live = out / run["staging"] / "partition=0" / "part-live.parquet"
    live.parent.mkdir(parents=True)
    live.write_bytes(b"a live run's file")
    (out / LOCK_FILE).write_bytes(lock_text("feedfacefeedface", 1_700_000_000_000))
    message = (
        f"{out}/{LOCK_FILE} is held by export-topic attempt feedfacefeedface since "
        f"2023-11-14 22:13:20 UTC: .* delete {LOCK_FILE} and run again"
    )
    with pytest.raises(ExportLockedError, match=message):
        export_now(spark, logs.log_dirs_option, "orders", out)
    assert live.exists() and json.loads((out / MANIFEST_FILE).read_text()) == document
    # The operator removes the stale lock; the files of partition 1 are gone.
    (out / LOCK_FILE).unlink()
    live.unlink()
    lost = [r for r in run["ranges"] if r["partition"] == 1 and r["records"] > 0]
    assert lost
    for file in out.glob("partition=1/run-1-*.parquet"):
        file.unlink()
    with pytest.raises(RecoveryError, match=r"run 1 is pending .* partitions \[1\] have none"):
        export_now(spark, logs.log_dirs_option, "orders", out)
    pending = load_manifest(out, "orders").pending_run()
    assert pending is not None and pending.run_id == 1
    assert not (out / LOCK_FILE).exists()


def test_export_topic_exports_committed_transactions_once_they_end(
    spark: Any, tmp_path: Path
) -> None:
    """Issue 12: aborted records never surface through export-topic; a transaction open at
    the high watermark holds its offsets back until a later run, which exports them once."""
    partition = TxnPartition(tmp_path / "logs", TopicPartition("payments", 0))
    kafka_mixed_transactions(partition)
    hw = partition.checkpoint()
    log_dirs, out = str(partition.log_dir), tmp_path / "out"

    def exported() -> list[int]:
        rows = spark.read.parquet(str(out)).select("offset").collect()
        return sorted(int(row["offset"]) for row in rows)

    first = export_now(spark, log_dirs, "payments", out)
    assert first.ranges == (ExportedRange(0, 0, 16, 5),)
    assert first.held_back == (ExportedRange(0, 16, hw),)
    assert exported() == [2, 3, 9, 14, 15]
    partition.end(3, commit=True)
    partition.end(1, commit=False)
    partition.plain()
    hw = partition.checkpoint()
    second = export_now(spark, log_dirs, "payments", out)
    assert second.ranges == (ExportedRange(0, 16, hw, 6),) and second.held_back == ()
    assert exported() == partition.committed_offsets(hw)
    assert not set(exported()) & set(partition.aborted_offsets())
    assert load_manifest(out, "payments").isolation_level is IsolationLevel.READ_COMMITTED
    # The source reads everything below the high watermark when asked, by the option name
    # Spark's Kafka source uses.
    df = spark.read.format("pykraft-log").option("kafka.isolation.level", "read_uncommitted")
    rows = df.load(log_dirs).select("offset").collect()
    assert sorted(int(row["offset"]) for row in rows) == partition.uncommitted_offsets(hw)
