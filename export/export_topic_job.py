"""``export-topic``: a topic's committed records as Parquet, partitioned by partition.

Incremental: ``OUT/_pykraft_manifest.json`` lists the offset ranges already exported, so a rerun
reads only what is new (see ``export.manifest`` for the run states and crash recovery). Runs as
``pykraft spark export-topic --log-dirs … --topic T --out DIR`` or, on a cluster, as
``spark-submit export/export_topic_job.py --log-dirs … --topic T --out DIR`` (with
``PYSPARK_PYTHON`` pointing at a Python that has pykraft installed).
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import attrs

from pykraft.export.job_args import add_export_topic_arguments, run_job
from pykraft.export.log_dirs import parse_log_dirs
from pykraft.export.log_scan import LogFilter, discover_partitions
from pykraft.export.manifest import (
    MANIFEST_FILE,
    STAGING_DIR,
    ExportedRange,
    ExportPlan,
    Manifest,
    begin_run,
    commit_run,
    encode_manifest,
    load_manifest,
    plan_export,
)
from pykraft.storage.atomic_file import write_atomically
from pykraft.storage.system_clock import SystemClock


@attrs.frozen
class ExportResult:
    run_id: int | None  # None: nothing new to export
    ranges: tuple[ExportedRange, ...]
    skipped: tuple[ExportedRange, ...]
    recovered_run: int | None  # a pending run from a crashed export, finished now

    @property
    def records(self) -> int:
        return sum(r.records for r in self.ranges)


add_arguments = add_export_topic_arguments


def _save(out_dir: Path, manifest: Manifest) -> None:
    write_atomically(out_dir / MANIFEST_FILE, encode_manifest(manifest))


def _run_dir(out_dir: Path, run_id: int) -> Path:
    return out_dir / STAGING_DIR / f"run-{run_id}"


def recover(out_dir: Path, manifest: Manifest) -> tuple[Manifest, int | None]:
    """Finish a pending run (move its staged files, commit) and drop orphaned staging dirs."""
    pending = manifest.pending_run()
    recovered = None
    if pending is not None:
        _publish(out_dir, pending.run_id)
        manifest = commit_run(manifest, pending.run_id)
        _save(out_dir, manifest)
        recovered = pending.run_id
    staging = out_dir / STAGING_DIR
    if staging.exists():
        shutil.rmtree(staging)  # runs that never reached PENDING: nothing refers to them
    return manifest, recovered


def _publish(out_dir: Path, run_id: int) -> None:
    """Rename the run's staged Parquet files into ``partition=N/`` (idempotent)."""
    run_dir = _run_dir(out_dir, run_id)
    if not run_dir.exists():
        return
    for staged in sorted(run_dir.glob("partition=*/*.parquet")):
        target_dir = out_dir / staged.parent.name
        target_dir.mkdir(parents=True, exist_ok=True)
        staged.replace(target_dir / f"run-{run_id}-{staged.name}")


def available_offsets(log_dirs: str, topic: str) -> dict[int, tuple[int, int]]:
    """``partition -> (log start offset, high watermark)`` of the replica each partition is
    read from (the highest high watermark among every broker's copy, as the scan chooses)."""
    partitions = discover_partitions(parse_log_dirs(log_dirs))
    wanted = LogFilter(topics=frozenset({topic}))
    return {
        p.topic_partition.partition: (p.log_start_offset, p.high_watermark)
        for p in partitions
        if wanted.admits(p.topic_partition)
    }


def export_topic(
    spark: Any, log_dirs: str, topic: str, out_dir: Path, *, wall_clock_ms: Callable[[], int]
) -> ExportResult:
    """Export what is new; ``wall_clock_ms`` dates the run in the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest, recovered = recover(out_dir, load_manifest(out_dir, topic))
    plan = plan_export(manifest, available_offsets(log_dirs, topic))
    if not plan.ranges:
        return ExportResult(None, (), plan.skipped, recovered)
    run_id = manifest.next_run_id()
    counts = _write_run(spark, log_dirs, topic, plan, _run_dir(out_dir, run_id))
    ranges = tuple(attrs.evolve(r, records=counts.get(r.partition, 0)) for r in plan.ranges)
    manifest = begin_run(manifest, run_id, ranges, wall_clock_ms())
    _save(out_dir, manifest)
    _publish(out_dir, run_id)
    _save(out_dir, commit_run(manifest, run_id))
    shutil.rmtree(out_dir / STAGING_DIR, ignore_errors=True)
    return ExportResult(run_id, ranges, plan.skipped, recovered)


def _write_run(
    spark: Any, log_dirs: str, topic: str, plan: ExportPlan, run_dir: Path
) -> dict[int, int]:
    """Spark reads exactly the planned ranges and writes them; returns rows per partition."""
    from pykraft.export.spark_sources import LOG_FORMAT

    starting = {topic: {str(r.partition): r.start_offset for r in plan.ranges}}
    ending = {topic: {str(r.partition): r.end_offset for r in plan.ranges}}
    df = (
        spark.read.format(LOG_FORMAT)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .load(log_dirs)
    )
    df.write.mode("overwrite").partitionBy("partition").parquet(str(run_dir))
    if not any(run_dir.glob("partition=*/*.parquet")):
        return {}  # the ranges held only control records
    written = spark.read.parquet(str(run_dir)).groupBy("partition").count().collect()
    return {int(row["partition"]): int(row["count"]) for row in written}


def print_result(result: ExportResult, topic: str, out_dir: Path) -> None:
    if result.recovered_run is not None:
        print(f"finished run {result.recovered_run}, left pending by an interrupted export")
    for r in result.skipped:
        print(
            f"partition {r.partition}: offsets {r.start_offset}..{r.end_offset - 1} were "
            "removed from the log before they were exported"
        )
    if result.run_id is None:
        print(f"{topic}: nothing new below the high watermark; {out_dir} is up to date")
        return
    print(f"{topic}: run {result.run_id} exported {result.records} records to {out_dir}")
    for r in result.ranges:
        print(
            f"  partition {r.partition}: offsets {r.start_offset}..{r.end_offset - 1}, "
            f"{r.records} records"
        )


def run(spark: Any, args: argparse.Namespace) -> int:
    """The job's entry point (``pykraft spark export-topic`` or ``spark-submit``): a
    composition root, so it builds the clock."""
    result = export_topic(
        spark, args.log_dirs, args.topic, args.out, wall_clock_ms=SystemClock().wall_clock_ms
    )
    print_result(result, args.topic, args.out)
    return 0


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point."""
    return run_job(
        argv,
        prog="export_topic_job",
        description=__doc__,
        add_arguments=add_arguments,
        app_name="pykraft export-topic",
        run=run,
    )


if __name__ == "__main__":
    sys.exit(main())
