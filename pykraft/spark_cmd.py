"""``pykraft spark …``: the Spark jobs over snapshots and segment files.

    pykraft spark report SNAPSHOT_DIR --out URI [--snapshot ID] [--log-dirs DIRS] [SPARK OPTIONS]
    pykraft spark export-topic (--log-dirs DIRS | --bootstrap-server HOST:PORT[,...]
                               [--command-config FILE]) --topic T --out URI
                               [--isolation-level read_committed|read_uncommitted] [SPARK OPTIONS]
    SPARK OPTIONS: --master URL --conf KEY=VALUE --py-files FILES --archives ARCHIVES

``--master`` runs the same job on a real cluster (``spark://host:7077``, ``yarn``; pykraft is
shipped to the executors); the default is ``local[*]``. The jobs are ``export.report_job`` and
``export.export_topic_job``, also runnable with ``spark-submit``. A problem with the input (a
corrupt snapshot or segment, a missing directory, another topic's manifest) is one line on
stderr and exit status 1, never a traceback; an error inside a Python worker is shown by its
exception line (``ModuleNotFoundError: No module named 'x'``), not by the traceback's first line.
"""

from __future__ import annotations

import argparse
import importlib
import re
import sys
from collections.abc import Callable

from pykraft.export.job_args import (
    add_export_topic_arguments,
    add_report_arguments,
    session_options,
)

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
    "OutputCommitError",
)
# The line of a Python traceback that names the exception: ``pkg.mod.SomeError: message``.
_EXCEPTION_LINE = re.compile(
    r"^(?:[A-Za-z_][\w]*\.)*[A-Za-z_]\w*(?:Error|Exception|Exit)\b(?::.*)?$"
)


# job -> (module run lazily: it imports pyspark, arguments, one-line help)
_JOBS: dict[str, tuple[str, Callable[[argparse.ArgumentParser], None], str]] = {
    "report": (
        "pykraft.export.report_job",
        add_report_arguments,
        "leaders, replicas, skew, under-replicated and offline partitions, ISR "
        "history and partition sizes as tables, charts and one HTML page",
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
    cause = python_exception_line(text)
    if cause is not None:
        return cause
    return text.strip().splitlines()[0] if text.strip() else type(error).__name__


def python_exception_line(text: str) -> str | None:
    """The exception line of the last Python traceback in ``text`` (a Spark error quoting a
    Python worker's), or None if it quotes none."""
    lines = text.splitlines()
    # Spark may put the header at the end of its own message line.
    header = "Traceback (most recent call last):"
    starts = [n for n, line in enumerate(lines) if line.rstrip().endswith(header)]
    if not starts:
        return None
    found = None
    for line in lines[starts[-1] + 1 :]:
        if line.startswith((" ", "\t")):
            continue  # a frame, its source line, or the JVM's stack
        if _EXCEPTION_LINE.match(line.strip()):
            found = line.strip()
    return found


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
            args.master or DEFAULT_MASTER,
            f"pykraft {args.spark_job}",
            log_level="OFF",
            progress=True,
            **session_options(args),
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
