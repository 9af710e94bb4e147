"""Command-line arguments of the Spark jobs, kept free of pyspark.

``pykraft`` builds its whole parser at start-up; importing pyspark there would slow every
command and break them all where the ``spark`` extra is not installed. The job modules and
``pykraft spark`` share these definitions.

Spark options are ``spark-submit``'s: ``--master``, ``--conf KEY=VALUE`` (repeatable),
``--py-files`` and ``--archives`` (comma-separated). Input paths are made absolute here, on the
driver: executors run in their own working directories, where a relative path names something
else. ``--out`` stays as given: Spark qualifies it (``export.output_store``).
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from pykraft.export.isolation import DEFAULT_ISOLATION_LEVEL, ISOLATION_LEVEL_NAMES

MASTER_HELP = "Spark master URL (default local[*]; under spark-submit, spark-submit's own)"


def absolute_path(text: str) -> Path:
    """A local input path, absolute against the driver's working directory."""
    return Path(os.path.abspath(text))


def absolute_log_dirs(text: str) -> str:
    """``log.dirs`` syntax (comma-separated), each directory made absolute."""
    return ",".join(os.path.abspath(d.strip()) for d in text.split(",") if d.strip())


def spark_conf_pair(text: str) -> tuple[str, str]:
    """``KEY=VALUE``, as ``spark-submit --conf`` takes it."""
    key, sep, value = text.partition("=")
    if not sep or not key.strip():
        raise argparse.ArgumentTypeError(f"--conf takes KEY=VALUE, got {text!r}")
    return key.strip(), value


def comma_list(text: str) -> list[str]:
    return [item.strip() for item in text.split(",") if item.strip()]


def add_spark_arguments(parser: argparse.ArgumentParser) -> None:
    """spark-submit's options that a job's driver applies itself."""
    parser.add_argument("--master", default=None, help=MASTER_HELP)
    parser.add_argument(
        "--conf",
        action="append",
        type=spark_conf_pair,
        default=[],
        metavar="KEY=VALUE",
        help="a Spark configuration property, as spark-submit's --conf (repeatable)",
    )
    parser.add_argument(
        "--py-files",
        type=comma_list,
        default=[],
        metavar="FILES",
        help="comma-separated .zip, .egg or .py files for the executors' Python path "
        "(pykraft itself is shipped to a cluster without being named)",
    )
    parser.add_argument(
        "--archives",
        type=comma_list,
        default=[],
        metavar="ARCHIVES",
        help="comma-separated archives unpacked in each executor's working directory "
        "(ARCHIVE#NAME names the directory), as spark-submit's --archives",
    )


def add_report_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "snapshot_dir",
        type=absolute_path,
        metavar="SNAPSHOT_DIR",
        help="a controller's metadata.log.dir, or a directory of snapshots",
    )
    parser.add_argument(
        "--out",
        required=True,
        help="output directory or URI (hdfs://, s3a://, file:…) for the Parquet tables, the "
        "charts, report.html and summary.txt",
    )
    parser.add_argument(
        "--snapshot", default="latest", help="snapshot id or end offset (default: the latest)"
    )
    parser.add_argument(
        "--log-dirs",
        type=absolute_log_dirs,
        default=None,
        help="comma-separated log.dirs of the brokers (optional): adds each replica's size on "
        "disk, as kafka-log-dirs --describe reports it; the driver reads them",
    )
    add_spark_arguments(parser)


def add_export_topic_arguments(parser: argparse.ArgumentParser) -> None:
    source = parser.add_mutually_exclusive_group(required=True)
    source.add_argument(
        "--log-dirs",
        type=absolute_log_dirs,
        help="comma-separated log.dirs of every broker holding the topic "
        "(each partition is read from its replica with the highest "
        "high watermark); the driver and the executors read them",
    )
    source.add_argument(
        "--bootstrap-server",
        metavar="HOST1:PORT1,...,HOST3:PORT3",
        help="read through the Kafka protocol instead: the brokers to connect to (the driver "
        "and every executor must reach them; their Python needs confluent-kafka)",
    )
    parser.add_argument(
        "--command-config",
        type=absolute_path,
        metavar="FILE",
        help="with --bootstrap-server: a Kafka client properties file (security.protocol, "
        "ssl.*, sasl.*) for the driver's and the executors' clients",
    )
    parser.add_argument("--topic", required=True, help="the topic to export")
    parser.add_argument(
        "--out",
        required=True,
        help="output directory or URI (hdfs://, s3a://, file:…) for the Parquet files and "
        "the manifest; every executor and the driver must reach it",
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
    add_spark_arguments(parser)


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
    spark = build_session(args.master, app_name, **session_options(args))
    try:
        return run(spark, args)
    finally:
        spark.stop()


def session_options(args: argparse.Namespace) -> dict[str, Any]:
    """``build_session``'s keyword arguments from the Spark options."""
    return {
        "extra_conf": dict(args.conf),
        "py_files": tuple(args.py_files),
        "archives": tuple(args.archives),
    }
