"""``export-topic``: a topic's committed records as Parquet, partitioned by partition.

Incremental: ``OUT/_pykraft_manifest.json`` lists the offset ranges already exported, so a rerun
reads only what is new (see ``export.manifest`` for the run states and crash recovery). ``OUT``
is any URI Spark can write (``hdfs://``, ``s3a://``, ``file:``; a bare path is qualified as
Spark qualifies it): the Parquet files are written by Spark's writers on the executors, and the
driver reaches the output only through Hadoop's filesystem API (``export.output_store``). A
run is recorded in the manifest only after Spark's output commit succeeded and the rows found
in the committed files equal the rows the run read, per partition (``export.output_check``):
otherwise it fails, saying why, and commits nothing — a later run exports those offsets.

Runs as ``pykraft spark export-topic --log-dirs … --topic T --out URI [--master URL]``, which
ships pykraft to the executors itself (``export.shipping``), or under ``spark-submit``. With
``--bootstrap-server HOST:PORT [--command-config FILE]`` instead of ``--log-dirs`` it plans and
reads through the Kafka protocol (``export.kafka_export_plan``): one pipeline, two sources, each
an ``ExportSource`` (its planner and its reader).

One run at a time per output: a run holds ``OUT/_pykraft_lock`` (created only if absent,
naming the driver attempt, when it started, its host and process id: ``export.output_lock``)
from before recovery until it ends however it ends, and a second run (a cron overrun) fails at
once with ``ExportLockedError``, touching nothing, saying whether the holder is alive when it
ran on the same host. A driver killed outright leaves its lock behind: the next run on the same
host sees that process gone and takes the lock over (``output_lock.acquire_lock``: one taker per
dead holder), then finishes or discards what was left. A lock from another host cannot be judged
from here: once no export-topic driver for ``OUT`` is alive, the operator deletes
``OUT/_pykraft_lock`` and reruns.

``--isolation-level read_committed`` (the default) exports what a read_committed consumer
reads: no aborted transaction's records, nothing from the first still-open transaction on (that
waits for a later run, reported as held back); ``read_uncommitted`` exports everything below
the high watermark (``export.isolation``). Control records are never rows.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import sys
import uuid
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

import attrs

from pykraft.client_properties import load_client_properties
from pykraft.export.export_source import ExportArgumentError, ExportSource
from pykraft.export.isolation import (
    DEFAULT_ISOLATION_LEVEL,
    ISOLATION_LEVEL_OPTION,
    IsolationLevel,
)
from pykraft.export.job_args import add_export_topic_arguments, run_job
from pykraft.export.kafka_export_plan import KafkaExportSource
from pykraft.export.log_dirs import parse_log_dirs
from pykraft.export.log_scan import LogFilter, discover_partitions
from pykraft.export.manifest import (
    LOG_DIRS_SOURCE,
    MANIFEST_FILE,
    STAGING_DIR,
    ExportedRange,
    ExportPlan,
    Manifest,
    begin_run,
    commit_run,
    encode_manifest,
    manifest_from_bytes,
    plan_export,
    staging_dir,
    unpublished_partitions,
)
from pykraft.export.output_check import checked_ranges
from pykraft.export.output_lock import (
    acquire_lock,
    holder_alive,
    lock_text,
    locked_message,
    release_lock,
)
from pykraft.export.output_store import OutputStore
from pykraft.export.txn_scan import read_txn_state
from pykraft.storage.system_clock import SystemClock

SUCCESS_MARKER = "_SUCCESS"  # Spark's output committer writes it when the job commit is done


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


class ExportLockedError(RuntimeError):
    """Another run holds the output's lock; says how to clear a stale one."""


class RecoveryError(RuntimeError):
    """A pending run cannot be committed: some of its files are gone."""


def _save(store: OutputStore, manifest: Manifest) -> None:
    store.write_replacing(MANIFEST_FILE, encode_manifest(manifest))


def _quiet(line: str) -> None:
    del line


def recover(store: OutputStore, manifest: Manifest) -> tuple[Manifest, int | None]:
    """Finish a pending run (move its staged files, commit) and drop orphaned staging dirs."""
    pending = manifest.pending_run()
    recovered = None
    if pending is not None:
        _publish(store, pending.run_id, pending.staging_dir)
        published = {
            r.partition: store.list_files(f"partition={r.partition}", ".parquet")
            for r in pending.ranges
        }
        missing = unpublished_partitions(pending, published)
        if missing:
            raise RecoveryError(
                f"run {pending.run_id} is pending in {store.uri}/{MANIFEST_FILE}, but partitions "
                f"{missing} have none of its files (staged in {pending.staging_dir}, published "
                f"as partition=N/run-{pending.run_id}-*): not committing it. Restore the files, "
                f"or remove run {pending.run_id} from the manifest and every "
                f"partition=*/run-{pending.run_id}-* file, so the next run exports its offsets"
            )
        manifest = commit_run(manifest, pending.run_id)
        _save(store, manifest)
        recovered = pending.run_id
    # Attempts that never reached PENDING (of this run id or older ones): nothing refers to them.
    store.delete(STAGING_DIR)
    return manifest, recovered


def new_attempt() -> str:
    """A name for this driver attempt's staging directory, unique to it."""
    return uuid.uuid4().hex[:16]


def _staged_files(store: OutputStore, run_name: str) -> list[str]:
    """The run's committed Parquet files in staging directory ``run_name`` (``_temporary``
    and other hidden paths left out, as Spark's readers leave them out)."""
    return [
        name
        for name in store.list_files(run_name, ".parquet")
        if not any(part.startswith(("_", ".")) for part in name[len(run_name) + 1 :].split("/"))
    ]


def _publish(store: OutputStore, run_id: int, run_name: str) -> None:
    """Rename the run's staged Parquet files into ``partition=N/`` (idempotent: a file moved
    already is not staged any more)."""
    for staged in _staged_files(store, run_name):
        *_, partition_dir, file_name = staged.split("/")
        store.rename(staged, f"{partition_dir}/run-{run_id}-{file_name}")


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


@attrs.frozen
class LogDirsSource:
    """``--log-dirs``: the brokers' disks, planned here and read by ``pykraft-log``."""

    name: ClassVar[str] = LOG_DIRS_SOURCE
    log_dirs: str

    def where(self, topic: str) -> str:
        return f"offsets of {topic} in {self.log_dirs}"

    def plan(
        self, manifest: Manifest, topic: str, isolation_level: IsolationLevel
    ) -> tuple[ExportPlan, tuple[ExportedRange, ...]]:
        ends = available_offsets(self.log_dirs, topic, isolation_level)
        return plan_export(manifest, readable(ends)), held_back(ends)

    def read(
        self, spark: Any, topic: str, plan: ExportPlan, isolation_level: IsolationLevel
    ) -> Any:
        """Exactly the planned ranges. (The scan plans again: its last stable offset is at
        least the plan's, which ends the ranges, so it reads exactly them.)"""
        from pykraft.export.spark_sources import LOG_FORMAT

        starting = {topic: {str(r.partition): r.start_offset for r in plan.ranges}}
        ending = {topic: {str(r.partition): r.end_offset for r in plan.ranges}}
        return (
            spark.read.format(LOG_FORMAT)
            .option("startingOffsets", json.dumps(starting))
            .option("endingOffsets", json.dumps(ending))
            .option(ISOLATION_LEVEL_OPTION, isolation_level.value)
            .load(self.log_dirs)
        )


def export_topic(
    spark: Any,
    source: str | ExportSource,
    topic: str,
    out: str | Path,
    *,
    wall_clock_ms: Callable[[], int],
    isolation_level: IsolationLevel = DEFAULT_ISOLATION_LEVEL,
    progress: Callable[[str], None] = _quiet,
    attempt: Callable[[], str] = new_attempt,
) -> ExportResult:
    """Export what is new from ``source`` (a string: ``log.dirs``); ``wall_clock_ms`` dates
    the run in the manifest; ``progress`` is told each step as it starts; ``attempt`` names this
    driver attempt's staging directory."""
    if isinstance(source, str):
        source = LogDirsSource(source)
    store = OutputStore(spark, str(out))
    try:
        store.mkdirs()
        name = attempt()
        lock = lock_text(name, wall_clock_ms(), socket.gethostname(), os.getpid())
        held = acquire_lock(store, lock, progress)
        if held is not None:
            raise ExportLockedError(locked_message(store.uri, held, holder_alive(held)))
        try:
            result = _export(
                spark, source, topic, store, wall_clock_ms, isolation_level, progress, name
            )
        except BaseException:
            release_lock(store, lock, quiet=True)  # the run's own error is the one to show
            raise
        release_lock(store, lock)
        return result
    finally:
        store.close()


def _export(
    spark: Any,
    source: ExportSource,
    topic: str,
    store: OutputStore,
    wall_clock_ms: Callable[[], int],
    isolation_level: IsolationLevel,
    progress: Callable[[str], None],
    attempt: str,
) -> ExportResult:
    stored = manifest_from_bytes(
        store.read_bytes(MANIFEST_FILE), store.uri, topic, isolation_level, source.name
    )
    manifest, recovered = recover(store, stored)
    progress(f"planning: {source.where(topic)}")
    plan, waiting = source.plan(manifest, topic, isolation_level)
    if not plan.ranges:
        return ExportResult(None, (), plan.skipped, recovered, waiting)
    run_id = manifest.next_run_id()
    run_name = staging_dir(run_id, attempt)
    offsets = sum(r.end_offset - r.start_offset for r in plan.ranges)
    progress(
        f"run {run_id}: writing {offsets} offsets of {len(plan.ranges)} partitions "
        f"to {store.location(run_name)}"
    )
    ranges = _write_run(spark, source, topic, plan, store, run_id, run_name, isolation_level)
    progress(f"run {run_id}: output committed, {sum(r.records for r in ranges)} rows checked")
    manifest = begin_run(
        _with_topic_id(manifest, plan), run_id, tuple(sorted((*ranges, *plan.empty))),
        wall_clock_ms(), run_name,
    )  # fmt: skip
    _save(store, manifest)
    progress(f"run {run_id}: pending in the manifest; moving its files into place")
    _publish(store, run_id, run_name)
    _save(store, commit_run(manifest, run_id))
    store.delete(STAGING_DIR)
    progress(f"run {run_id}: committed")
    return ExportResult(run_id, ranges, plan.skipped, recovered, waiting)


def _with_topic_id(manifest: Manifest, plan: ExportPlan) -> Manifest:
    """The manifest recording the topic id the plan was made against (planning refused another)."""
    if plan.topic_id is None:
        return manifest
    return attrs.evolve(manifest, topic_id=plan.topic_id)


def _write_run(
    spark: Any,
    source: ExportSource,
    topic: str,
    plan: ExportPlan,
    store: OutputStore,
    run_id: int,
    run_name: str,
    isolation_level: IsolationLevel,
) -> tuple[ExportedRange, ...]:
    """Spark reads exactly the planned ranges and writes them; returns the ranges with their
    row counts once the committed output is checked to hold every row read."""
    from pyspark.sql import Observation
    from pyspark.sql import functions as F

    df = source.read(spark, topic, plan, isolation_level)
    # Rows per planned partition, counted by the write job itself (no second read).
    observation = Observation(f"pykraft-export-run-{run_id}")
    counts = [
        F.count_if(F.col("partition") == r.partition).alias(str(r.partition)) for r in plan.ranges
    ]
    location = store.location(run_name)
    observed = df.observe(observation, *counts)
    observed.write.mode("overwrite").partitionBy("partition").parquet(location)
    read = {int(name): int(count) for name, count in observation.get.items()}
    found = _found_rows(spark, store, run_name, location)
    committed = store.exists(f"{run_name}/{SUCCESS_MARKER}")
    return checked_ranges(plan.ranges, read, found, location, committed=committed)


def _found_rows(spark: Any, store: OutputStore, run_name: str, location: str) -> dict[int, int]:
    """Rows per partition in the run's committed files, as the driver lists them (Parquet
    footers only: no column is read)."""
    files = [store.location(name) for name in _staged_files(store, run_name)]
    if not files:
        return {}
    written = spark.read.option("basePath", location).parquet(*files)
    rows = written.groupBy("partition").count().collect()
    return {int(row["partition"]): int(row["count"]) for row in rows}


def print_result(result: ExportResult, topic: str, out_dir: str | Path) -> None:
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


def _progress(line: str) -> None:
    print(f"export-topic: {line}", flush=True)


def source_of(args: argparse.Namespace) -> ExportSource:
    """``--log-dirs``, or ``--bootstrap-server`` with ``--command-config`` (the parser lets
    exactly one of the two sources through)."""
    if args.bootstrap_server is None:
        if args.command_config is not None:
            raise ExportArgumentError(
                "--command-config configures the Kafka client of --bootstrap-server; "
                "--log-dirs reads files"
            )
        return LogDirsSource(args.log_dirs)
    properties = load_client_properties(args.command_config)
    return KafkaExportSource(args.bootstrap_server, properties)


def run(spark: Any, args: argparse.Namespace) -> int:
    """The job's entry point (``pykraft spark export-topic`` or ``spark-submit``): a
    composition root, so it builds the clock."""
    result = export_topic(
        spark,
        source_of(args),
        args.topic,
        args.out,
        wall_clock_ms=SystemClock().wall_clock_ms,
        isolation_level=IsolationLevel(args.isolation_level),
        progress=_progress,
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
