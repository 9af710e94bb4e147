"""Command-line arguments of the Spark jobs, kept free of pyspark.

``pykraft`` builds its whole parser at start-up; importing pyspark there would slow every
command and break them all where the ``spark`` extra is not installed. The job modules and
``pykraft spark`` share these definitions.
"""

from __future__ import annotations

import argparse
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykraft.export.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVEL_NAMES

MASTER_HELP = "Spark master URL (default local[*]; under spark-submit, spark-submit's own)"


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "snapshot_dir",
        type=Path,
        metavar="SNAPSHOT_DIR",
        help="a controller's metadata.log.dir, or a directory of snapshots",
    )
    parser.add_argument("--out", required=True, type=Path, help="output directory")
    parser.add_argument(
        "--snapshot", default="latest", help="snapshot id or end offset (default: the latest)"
    )
    parser.add_argument("--master", default=None, help=MASTER_HELP)


def add_export_topic_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--log-dirs",
        required=True,
        help="comma-separated log.dirs of every broker holding the topic "
        "(each partition is read from its replica with the highest "
        "high watermark)",
    )
    parser.add_argument("--topic", required=True, help="the topic to export")
    parser.add_argument(
        "--out", required=True, type=Path, help="output directory (Parquet files and the manifest)"
    )
    parser.add_argument(
        "--isolation-level",
        choices=ISOLATION_LEVEL_NAMES,
        default=DEFAULT_ISOLATION_LEVEL.value,
        help="read_committed (default): what a read_committed Kafka consumer reads — no "
        "records of aborted transactions, and nothing from the first transaction still open "
        "on (a later run exports it once it ends); read_uncommitted: every record below the "
        "high watermark. An output directory keeps the level of its first run",
    )
    parser.add_argument("--master", default=None, help=MASTER_HELP)


def run_job(
    argv: list[str] | None,
    *,
    prog: str,
    description: str | None,
    add_arguments: Callable[[argparse.ArgumentParser], None],
    app_name: str,
    run: Callable[[Any, argparse.Namespace], int],
) -> int:
    """A job's spark-submit entry: parse ``argv``, run on a fresh session, always stop it."""
    # Imported here: this module stays free of pyspark (see the module docstring).
    from pykraft.export.session import build_session

    parser = argparse.ArgumentParser(prog=prog, description=description)
    add_arguments(parser)
    args = parser.parse_args(argv)
    spark = build_session(args.master, app_name)
    try:
        return run(spark, args)
    finally:
        spark.stop()
