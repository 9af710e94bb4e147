"""``export-topic``: a topic's committed records as Parquet, partitioned by partition.

Incremental: ``OUT/_pykraft_manifest.json`` lists the offset ranges already exported, so a rerun
reads only what is new (see ``export.manifest`` for the run states and crash recovery). Runs as
``pykraft spark export-topic --log-dirs … --topic T --out DIR`` or, on a cluster, as
``spark-submit export/export_topic_job.py --log-dirs … --topic T --out DIR`` (with
``PYSPARK_PYTHON`` pointing at a Python that has pykraft installed).

``--isolation-level read_committed`` (the default) exports what a read_committed consumer
reads: no aborted transaction's records, nothing from the first still-open transaction on (that
waits for a later run, reported as held back); ``read_uncommitted`` exports everything below
the high watermark (``export.isolation``). Control records are never rows.
"""

from __future__ import annotations

import argparse
import json
import shutil
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import attrs

from pykraft.export.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_OPTION,
    IsolationLevel,
)
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
from pykraft.export.txn_scan import read_txn_state
from pykraft.storage.atomic_file import write_atomically
from pykraft.storage.system_clock import SystemClock


@attrs.frozen
class ExportResult:
    run_id: int | None  # None: nothing new to export
    ranges: tuple[ExportedRange, ...]
    skipped: tuple[ExportedRange, ...]
    recovered_run: int | None  # a pending run from a crashed export, finished now
    # read_committed: [last stable offset, high watermark) per partition, waiting for the
    # transaction open at its start to end.
    held_back: tuple[ExportedRange, ...] = ()

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


@attrs.frozen
class PartitionEnds:
    """Where a partition's readable offsets start and where a run reading them stops."""

    log_start_offset: int
    high_watermark: int
    end_offset: int  # the last stable offset under read_committed, else the high watermark

    @property
    def held_back(self) -> bool:
        return self.end_offset < self.high_watermark


def available_offsets(
    log_dirs: str, topic: str, isolation_level: IsolationLevel = DEFAULT_ISOLATION_LEVEL
) -> dict[int, PartitionEnds]:
    """Per partition, the offsets of the replica it is read from (the highest high watermark
    among every broker's copy, as the scan chooses); under read_committed a run stops at the
    last stable offset (``export.txn_scan``)."""
    partitions = discover_partitions(parse_log_dirs(log_dirs))
    wanted = LogFilter(topics=frozenset({topic}))
    ends = {}
    for p in partitions:
        if not wanted.admits(p.topic_partition):
            continue
        end_offset = p.high_watermark
        if isolation_level is IsolationLevel.READ_COMMITTED:
            state = read_txn_state(p.directory, p.log_start_offset, p.high_watermark)
            end_offset = state.last_stable_offset
        ends[p.topic_partition.partition] = PartitionEnds(
            p.log_start_offset, p.high_watermark, end_offset
        )
    return ends


def readable(ends: Mapping[int, PartitionEnds]) -> dict[int, tuple[int, int]]:
    """What ``plan_export`` takes: ``partition -> (log start offset, end)``."""
    return {partition: (e.log_start_offset, e.end_offset) for partition, e in ends.items()}


def held_back(ends: Mapping[int, PartitionEnds]) -> tuple[ExportedRange, ...]:
    """The ranges waiting for an open transaction: ``[last stable offset, high watermark)``."""
    return tuple(
        ExportedRange(partition, e.end_offset, e.high_watermark)
        for partition, e in sorted(ends.items())
        if e.held_back
    )


def export_topic(
    spark: Any,
    log_dirs: str,
    topic: str,
    out_dir: Path,
    *,
    wall_clock_ms: Callable[[], int],
    isolation_level: IsolationLevel = DEFAULT_ISOLATION_LEVEL,
) -> ExportResult:
    """Export what is new; ``wall_clock_ms`` dates the run in the manifest."""
    out_dir.mkdir(parents=True, exist_ok=True)
    manifest, recovered = recover(out_dir, load_manifest(out_dir, topic, isolation_level))
    ends = available_offsets(log_dirs, topic, isolation_level)
    plan = plan_export(manifest, readable(ends))
    waiting = held_back(ends)
    if not plan.ranges:
        return ExportResult(None, (), plan.skipped, recovered, waiting)
    run_id = manifest.next_run_id()
    run_dir = _run_dir(out_dir, run_id)
    counts = _write_run(spark, log_dirs, topic, plan, run_dir, isolation_level)
    ranges = tuple(attrs.evolve(r, records=counts.get(r.partition, 0)) for r in plan.ranges)
    manifest = begin_run(manifest, run_id, ranges, wall_clock_ms())
    _save(out_dir, manifest)
    _publish(out_dir, run_id)
    _save(out_dir, commit_run(manifest, run_id))
    shutil.rmtree(out_dir / STAGING_DIR, ignore_errors=True)
    return ExportResult(run_id, ranges, plan.skipped, recovered, waiting)


def _write_run(
    spark: Any,
    log_dirs: str,
    topic: str,
    plan: ExportPlan,
    run_dir: Path,
    isolation_level: IsolationLevel,
) -> dict[int, int]:
    """Spark reads exactly the planned ranges and writes them; returns rows per partition.
    (The scan plans again: its last stable offset is at least the plan's, which ends the
    ranges, so it reads exactly them.)"""
    from pykraft.export.spark_sources import LOG_FORMAT

    starting = {topic: {str(r.partition): r.start_offset for r in plan.ranges}}
    ending = {topic: {str(r.partition): r.end_offset for r in plan.ranges}}
    df = (
        spark.read.format(LOG_FORMAT)
        .option("startingOffsets", json.dumps(starting))
        .option("endingOffsets", json.dumps(ending))
        .option(ISOLATION_LEVEL_OPTION, isolation_level.value)
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
    for r in result.held_back:
        print(
            f"partition {r.partition}: offsets {r.start_offset}..{r.end_offset - 1} wait for "
            f"the transaction open at offset {r.start_offset} (read_committed)"
        )
    if result.run_id is None:
        print(f"{topic}: nothing new to export; {out_dir} is up to date")
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
        spark,
        args.log_dirs,
        args.topic,
        args.out,
        wall_clock_ms=SystemClock().wall_clock_ms,
        isolation_level=IsolationLevel(args.isolation_level),
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
