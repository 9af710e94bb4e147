"""``pykraft spark …``: the Spark jobs over snapshots and segment files.

    pykraft spark report SNAPSHOT_DIR --out DIR [--snapshot ID] [--master URL]
    pykraft spark export-topic --log-dirs DIRS --topic T --out DIR
                               [--isolation-level read_committed|read_uncommitted] [--master URL]

``--master`` runs the same job on a real cluster (``spark://host:7077``, ``yarn``); the default
is ``local[*]``. The jobs are ``export.report_job`` and ``export.export_topic_job``, also
runnable with ``spark-submit``. A problem with the input (a corrupt snapshot or segment, a
missing directory, another topic's manifest) is one line on stderr and exit status 1, never a
traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable

from pykraft.export.job_args import add_export_topic_arguments, add_report_arguments

EXIT_OK = 0
EXIT_FAILED = 1
# Our typed errors, as they appear (possibly inside a Spark worker's traceback).
_ERROR_NAMES = (
    "SnapshotError",
    "SegmentReadError",
    "LogScanError",
    "MetadataScanError",
    "JournalError",
    "CheckpointError",
    "ManifestError",
    "CorruptRecordError",
)


# job -> (module run lazily: it imports pyspark, arguments, one-line help)
_JOBS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], str]] = {
    "report": (
        "pykraft.export.report_job",
        add_report_arguments,
        "leaders, replicas, skew, under-replicated and offline partitions and ISR "
        "history from a metadata snapshot",
    ),
    "export-topic": (
        "pykraft.export.export_topic_job",
        add_export_topic_arguments,
        "a topic's committed records as Parquet, incrementally (read_committed by "
        "default: no aborted or still-open transactions)",
    ),
}


def add_arguments(parser: argparse.ArgumentParser) -> None:
    jobs = parser.add_subparsers(dest="spark_job", required=True, metavar="JOB")
    for name, (module_name, add_job_arguments, help_text) in _JOBS.items():
        sub = jobs.add_parser(name, help=help_text, description=help_text)
        add_job_arguments(sub)
        sub.set_defaults(_spark_module=module_name)


def user_message(error: BaseException) -> str:
    """The line naming our typed error, out of a Spark exception's long text if need be."""
    text = str(error)
    for line in text.splitlines():
        stripped = line.strip()
        for name in _ERROR_NAMES:
            if stripped.startswith(f"{name}:") or f".{name}: " in stripped:
                return stripped[stripped.index(name) :]
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def run(args: argparse.Namespace) -> int:
    try:
        from pykraft.export.session import DEFAULT_MASTER, build_session

        module = importlib.import_module(args._spark_module)
    except ImportError as error:
        print(
            f"pykraft spark: {error.name} is not installed: pip install 'pykraft[spark]'",
            file=sys.stderr,
        )
        return EXIT_FAILED
    try:
        spark = build_session(
            args.master or DEFAULT_MASTER, f"pykraft {args.spark_job}", log_level="OFF"
        )
    except Exception as error:  # no Java, bad master URL: say so, no traceback
        print(f"pykraft spark: cannot start Spark: {user_message(error)}", file=sys.stderr)
        return EXIT_FAILED
    try:
        code: int = module.run(spark, args)
        return code
    except Exception as error:
        print(f"pykraft spark {args.spark_job}: {user_message(error)}", file=sys.stderr)
        return EXIT_FAILED
    finally:
        spark.stop()
