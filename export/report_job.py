"""``report``: a cluster health report from a controller's metadata snapshot.

From the typed views of ``pykraft-metadata`` at one snapshot (default: the latest) it computes,
with Spark SQL, and writes as Parquet under ``OUT/``:

* ``broker_load``: leaders, replicas and preferred leaders per broker, and Kafka's leader
  imbalance ratio (partitions whose preferred replica — the first — is the broker but whose leader
  is not, over the partitions it is preferred for: ``KafkaController``'s auto-rebalance check);
* ``broker_skew``: min, max, mean and max/mean of leaders and replicas over unfenced brokers;
* ``under_replicated`` (a leader but fewer ISR members than replicas) and ``offline`` (no leader,
  or a leader that is fenced or not registered: Kafka's OfflinePartitionsCount);
* ``topics``: partitions, replication factor, under-replicated, offline and config overrides;
* ``isr_changes``: the ISR history of the retained metadata log's PartitionChange records.

It also prints a summary table and draws ``broker_load.png`` (leaders and replicas per broker).
Runs as ``pykraft spark report SNAPSHOT_DIR --out DIR`` or with ``spark-submit
export/report_job.py SNAPSHOT_DIR --out DIR``.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F

from pykraft.export.job_args import add_report_arguments, run_job
from pykraft.export.spark_sources import METADATA_FORMAT

TABLES = (
    "broker_load",
    "broker_skew",
    "partitions",
    "under_replicated",
    "offline",
    "topics",
    "isr_changes",
)
# Tables small enough to collect (one row per broker, topic, unhealthy partition or change).
SMALL_TABLES = (
    "broker_load",
    "broker_skew",
    "topics",
    "under_replicated",
    "offline",
    "isr_changes",
)
CHART_FILE = "broker_load.png"


add_arguments = add_report_arguments


def _view(spark: SparkSession, root: Path, view: str, snapshot: str) -> DataFrame:
    reader = spark.read.format(METADATA_FORMAT).option("view", view).option("snapshot", snapshot)
    return reader.load(str(root))


def compute(spark: SparkSession, root: Path, snapshot: str = "latest") -> dict[str, DataFrame]:
    """The report's tables (lazy DataFrames)."""
    partitions = _view(spark, root, "partitions", snapshot).cache()
    brokers = _view(spark, root, "brokers", snapshot).select("broker_id", "fenced").cache()
    live = brokers.where(~F.col("fenced")).select(F.col("broker_id").alias("leader"))
    has_live_leader = partitions.join(live, "leader", "left_semi")
    offline = partitions.join(
        has_live_leader.select("topic", "partition"), ["topic", "partition"], "left_anti"
    )
    under = has_live_leader.where(F.size("isr") < F.size("replicas"))
    load = _broker_load(partitions, brokers)
    return {
        "broker_load": load,
        "broker_skew": _skew(load.where(~F.col("fenced"))),
        "partitions": partitions,
        "under_replicated": under,
        "offline": offline,
        "topics": _topics(spark, root, snapshot, partitions, under, offline),
        "isr_changes": _isr_changes(spark, root, snapshot),
    }


def _broker_load(partitions: DataFrame, brokers: DataFrame) -> DataFrame:
    replicas = (
        partitions.select(F.explode("replicas").alias("broker_id"))
        .groupBy("broker_id")
        .agg(F.count("*").alias("replicas"))
    )
    leaders = (
        partitions.where(F.col("leader") >= 0)
        .groupBy(F.col("leader").alias("broker_id"))
        .agg(F.count("*").alias("leaders"))
    )
    preferred = (
        partitions.select(
            F.col("replicas")[0].alias("broker_id"),
            (F.col("leader") != F.col("replicas")[0]).alias("moved"),
        )
        .groupBy("broker_id")
        .agg(
            F.count("*").alias("preferred_leaders"),
            F.sum(F.col("moved").cast("int")).alias("not_preferred_leader"),
        )
    )
    # Brokers that are registered, plus any replica placed on one that is not.
    ids = brokers.select("broker_id").union(replicas.select("broker_id")).distinct()
    load = (
        ids.join(brokers, "broker_id", "left")
        .join(leaders, "broker_id", "left")
        .join(replicas, "broker_id", "left")
        .join(preferred, "broker_id", "left")
        .fillna(0, ["leaders", "replicas", "preferred_leaders", "not_preferred_leader"])
        .withColumn("registered", F.col("fenced").isNotNull())
        .fillna(True, ["fenced"])
    )
    imbalance = F.when(
        F.col("preferred_leaders") > 0, F.col("not_preferred_leader") / F.col("preferred_leaders")
    )
    return (
        load.withColumn("leader_imbalance", imbalance)
        .select(
            "broker_id",
            "registered",
            "fenced",
            "leaders",
            "replicas",
            "preferred_leaders",
            "leader_imbalance",
        )
        .orderBy("broker_id")
    )


def _skew(load: DataFrame) -> DataFrame:
    rows = [
        load.agg(
            F.lit(metric).alias("metric"),
            F.min(metric).alias("min"),
            F.max(metric).alias("max"),
            F.avg(metric).alias("mean"),
        )
        for metric in ("leaders", "replicas")
    ]
    skew = rows[0].union(rows[1])
    return skew.withColumn("max_over_mean", F.when(F.col("mean") > 0, F.col("max") / F.col("mean")))


def _topics(
    spark: SparkSession,
    root: Path,
    snapshot: str,
    partitions: DataFrame,
    under: DataFrame,
    offline: DataFrame,
) -> DataFrame:
    topics = (
        _view(spark, root, "topics", snapshot)
        .select("topic", "topic_id", "partitions", "replication_factor")
        .cache()
    )
    configs = (
        _view(spark, root, "configs", snapshot)
        .where("resource_type_name = 'topic'")
        .groupBy(F.col("resource_name").alias("topic"))
        .agg(F.count("*").alias("config_overrides"))
    )
    counts = [
        frame.groupBy("topic").agg(F.count("*").alias(name))
        for frame, name in ((under, "under_replicated"), (offline, "offline"))
    ]
    result = topics
    for frame in (*counts, configs):
        result = result.join(frame, "topic", "left")
    return result.fillna(0, ["under_replicated", "offline", "config_overrides"]).orderBy("topic")


def _isr_changes(spark: SparkSession, root: Path, snapshot: str) -> DataFrame:
    records = (
        spark.read.format(METADATA_FORMAT)
        .option("snapshot", snapshot)
        .option("includeLog", "true")
        .load(str(root))
    )
    changes = records.where("source = 'log' AND record_type = 'PartitionChangeRecord'")
    names = _view(spark, root, "topics", snapshot).select("topic", "topic_id")
    return (
        changes.select(
            "offset",
            "epoch",
            "timestamp",
            "partition_change.topic_id",
            F.col("partition_change.partition_id").alias("partition"),
            F.col("partition_change.isr").alias("isr"),
            F.col("partition_change.leader").alias("leader"),
        )
        .join(names, "topic_id", "left")
        .orderBy("offset")
    )


def write_tables(
    spark: SparkSession,
    tables: dict[str, DataFrame],
    collected: dict[str, list[Any]],
    out_dir: Path,
) -> None:
    """Write every table; the small ones from their collected rows (no second computation)."""
    for name in TABLES:
        frame = tables[name]
        if name in collected:
            frame = spark.createDataFrame(collected[name], frame.schema)
        frame.coalesce(1).write.mode("overwrite").parquet(str(out_dir / name))


def format_table(columns: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A plain aligned text table (what the summary prints)."""
    cells = [[_cell(value) for value in row] for row in rows]
    widths = [max([len(c), *(len(row[i]) for row in cells)]) for i, c in enumerate(columns)]
    # Numbers align right, text left (decided by the first row's values).
    right = [bool(rows) and _is_number(rows[0][i]) for i in range(len(columns))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(
            v.rjust(w) if r else v.ljust(w) for v, w, r in zip(values, widths, right, strict=True)
        ).rstrip()

    return "\n".join([line(columns), *(line(row) for row in cells)])


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _cell(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def draw_chart(load: Sequence[Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")  # files only, never a window
    import matplotlib.pyplot as plt

    ids = [str(row["broker_id"]) for row in load]
    positions = range(len(ids))
    figure, axes = plt.subplots(figsize=(max(4.0, 1.2 * len(ids) + 2), 3.5))
    axes.bar([p - 0.2 for p in positions], [row["leaders"] for row in load], 0.4, label="leaders")
    axes.bar([p + 0.2 for p in positions], [row["replicas"] for row in load], 0.4, label="replicas")
    axes.set_xticks(list(positions), ids)
    axes.set_xlabel("broker")
    axes.set_ylabel("partitions")
    axes.set_title("Leaders and replicas per broker")
    tallest = max([row["replicas"] for row in load] + [1])
    axes.set_ylim(0, tallest * 1.3)  # room for the legend above the bars
    axes.legend(loc="upper center", ncols=2)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    plt.close(figure)


def run_report(
    spark: SparkSession, root: Path, out_dir: Path, snapshot: str = "latest"
) -> dict[str, list[Any]]:
    """Compute, write and summarise; returns the small tables as collected rows."""
    tables = compute(spark, root, snapshot)
    out_dir.mkdir(parents=True, exist_ok=True)
    collected = {name: tables[name].collect() for name in SMALL_TABLES}
    write_tables(spark, tables, collected, out_dir)
    draw_chart(collected["broker_load"], out_dir / CHART_FILE)
    print(
        summary(
            tables["partitions"].select("snapshot_id", "end_offset").first(), collected, out_dir
        )
    )
    return collected


def summary(position: Any, collected: dict[str, list[Any]], out_dir: Path) -> str:
    snapshot = (
        "no partitions"
        if position is None
        else (f"snapshot {position['snapshot_id']} (end offset {position['end_offset']})")
    )
    load_columns = (
        "broker_id",
        "fenced",
        "leaders",
        "replicas",
        "preferred_leaders",
        "leader_imbalance",
    )
    topic_columns = (
        "topic",
        "partitions",
        "replication_factor",
        "under_replicated",
        "offline",
        "config_overrides",
    )
    skew_columns = ("metric", "min", "max", "mean", "max_over_mean")
    parts = [
        f"pykraft report: {snapshot}",
        format_table(
            load_columns, [[row[c] for c in load_columns] for row in collected["broker_load"]]
        ),
        format_table(
            skew_columns, [[row[c] for c in skew_columns] for row in collected["broker_skew"]]
        ),
        format_table(
            topic_columns, [[row[c] for c in topic_columns] for row in collected["topics"]]
        ),
        f"under-replicated partitions: {len(collected['under_replicated'])}   "
        f"offline partitions: {len(collected['offline'])}   "
        f"ISR changes in the retained log: {len(collected['isr_changes'])}",
        f"wrote {', '.join(TABLES)} (Parquet) and {CHART_FILE} to {out_dir}",
    ]
    return "\n\n".join(parts)


def run(spark: SparkSession, args: argparse.Namespace) -> int:
    run_report(spark, args.snapshot_dir, args.out, args.snapshot)
    return 0


def main(argv: list[str] | None = None) -> int:
    """spark-submit entry point."""
    return run_job(
        argv,
        prog="report_job",
        description=__doc__,
        add_arguments=add_arguments,
        app_name="pykraft report",
        run=run,
    )


if __name__ == "__main__":
    sys.exit(main())
