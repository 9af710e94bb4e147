"""``pykraft spark``: argument parsing and one-line errors (no Spark started here)."""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

import pytest

from pykraft import spark_cmd


def parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pykraft spark")
    spark_cmd.add_arguments(parser)
    return parser.parse_args(argv)


def test_parser_builds_without_importing_pyspark() -> None:
    # `pykraft` builds every subcommand's parser at start-up; pyspark is an optional extra.
    code = (
        "import argparse, sys\nfrom pykraft import spark_cmd\n"
        "spark_cmd.add_arguments(argparse.ArgumentParser())\n"
        "sys.exit('pyspark' in sys.modules)"
    )
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
    args = parse(["report", "snap", "--out", "o"])
    assert (args.spark_job, args.snapshot_dir, args.out, args.snapshot, args.master) == (
        "report",
        Path("snap"),
        Path("o"),
        "latest",
        None,
    )
    args = parse(
        [
            "export-topic",
            "--log-dirs",
            "a,b",
            "--topic",
            "t",
            "--out",
            "o",
            "--master",
            "spark://h:7077",
        ]
    )
    assert (args.log_dirs, args.topic, args.master) == ("a,b", "t", "spark://h:7077")
    assert args.isolation_level == "read_committed"  # the default: no aborted records
    with pytest.raises(SystemExit):
        parse(["export-topic", "--topic", "t", "--out", "o"])  # --log-dirs is required


def test_export_topic_isolation_level_takes_kafkas_two_values(
    capsys: pytest.CaptureFixture[str],
) -> None:
    base = ["export-topic", "--log-dirs", "a", "--topic", "t", "--out", "o"]
    args = parse([*base, "--isolation-level", "read_uncommitted"])
    assert args.isolation_level == "read_uncommitted"
    with pytest.raises(SystemExit):
        parse([*base, "--isolation-level", "READ_COMMITTED"])
    assert "invalid choice: 'READ_COMMITTED'" in capsys.readouterr().err


def test_user_message_finds_our_error_inside_a_spark_traceback() -> None:
    spark_text = (
        "An exception was thrown from the Python worker:\nTraceback (most recent call last):\n"
        '  File "x.py", line 3, in read\n'
        "export.segment_reader.SegmentReadError: segment /d/t-0/0.log at byte 61: crc: bad\n"
        "\tat org.apache.spark.api.python.BasePythonRunner"
    )
    assert spark_cmd.user_message(RuntimeError(spark_text)) == (
        "SegmentReadError: segment /d/t-0/0.log at byte 61: crc: bad"
    )
    plain = "SnapshotError: snapshot /s/x.checkpoint, line 8: checksum mismatch"
    assert spark_cmd.user_message(RuntimeError(plain)) == plain
    assert spark_cmd.user_message(RuntimeError("boom\nmore")) == "boom"


def test_summary_table_alignment() -> None:
    from pykraft.export.report_job import format_table

    table = format_table(
        ("topic", "partitions", "imbalance", "fenced"),
        [["clicks", 3, 0.5, False], ["orders", 16, None, True]],
    )
    assert table.splitlines() == [
        "topic   partitions  imbalance  fenced",
        "clicks           3       0.50  no",
        "orders          16          -  yes",
    ]
