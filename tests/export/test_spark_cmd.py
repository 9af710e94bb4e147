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
        Path.cwd() / "snap",
        "o",  # Spark qualifies it (any Hadoop URI)
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
    assert (args.log_dirs, args.topic, args.master) == (
        f"{Path.cwd() / 'a'},{Path.cwd() / 'b'}",
        "t",
        "spark://h:7077",
    )
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
    from pykraft.export.report_html import format_table

    table = format_table(
        ("topic", "partitions", "imbalance", "fenced"),
        [["clicks", 3, 0.5, False], ["orders", 16, None, True]],
    )
    assert table.splitlines() == [
        "topic   partitions  imbalance  fenced",
        "clicks           3       0.50  no",
        "orders          16          -  yes",
    ]


def test_spark_submit_options_and_absolute_inputs(tmp_path: Path) -> None:
    """spark-submit's --conf/--py-files/--archives shapes; inputs absolute on the driver
    (executors run elsewhere); --out left for Spark to qualify (any Hadoop URI)."""
    args = parse(
        [
            "export-topic",
            "--log-dirs",
            "logs/a, /data/b",
            "--topic",
            "t",
            "--out",
            "s3a://bucket/exports/t",
            "--conf",
            "spark.executor.memory=2g",
            "--conf",
            "spark.x=a=b",
            "--py-files",
            "deps.zip,more.py",
            "--archives",
            "env.tar.gz#env",
        ]
    )
    assert args.log_dirs == f"{Path.cwd() / 'logs/a'},/data/b"
    assert args.out == "s3a://bucket/exports/t"
    assert args.conf == [("spark.executor.memory", "2g"), ("spark.x", "a=b")]
    assert (args.py_files, args.archives) == (["deps.zip", "more.py"], ["env.tar.gz#env"])
    report = parse(["report", "snap", "--out", "o"])
    assert (report.snapshot_dir, report.out, report.log_dirs) == (Path.cwd() / "snap", "o", None)
    report = parse(["report", "snap", "--out", "hdfs://nn/r", "--log-dirs", "l1,/l2"])
    assert (report.out, report.log_dirs) == ("hdfs://nn/r", f"{Path.cwd() / 'l1'},/l2")
    assert (report.conf, report.py_files, report.archives) == ([], [], [])


def test_conf_needs_key_equals_value(capsys: pytest.CaptureFixture[str]) -> None:
    for bad in ("spark.executor.memory", "=2g"):
        with pytest.raises(SystemExit):
            parse(["report", "snap", "--out", "o", "--conf", bad])
        assert "--conf takes KEY=VALUE" in capsys.readouterr().err


def test_user_message_shows_a_python_workers_exception_not_its_traceback_header() -> None:
    """Issue 15: the error shown was "Traceback (most recent call last):"."""
    spark_text = (
        "[PYTHON_DATA_SOURCE_ERROR] Failed to create Python data source instance: "
        "Traceback (most recent call last):\n"
        '  File "/w/pyspark.zip/pyspark/serializers.py", line 193, in _read_with_length\n'
        "    return self.loads(obj)\n"
        "           ^^^^^^^^^^^^^^^\n"
        "ModuleNotFoundError: No module named 'pykraft'\n"
        "\tat org.apache.spark.api.python.BasePythonRunner.handlePythonException\n"
        "\tat java.base/java.lang.Thread.run(Thread.java:840)"
    )
    assert spark_cmd.user_message(RuntimeError(spark_text)) == (
        "ModuleNotFoundError: No module named 'pykraft'"
    )
    chained = (
        "Traceback (most recent call last):\n  File \"a.py\", line 1\nKeyError: 'x'\n\n"
        "During handling of the above exception, another exception occurred:\n\n"
        'Traceback (most recent call last):\n  File "b.py", line 2\n'
        "pyspark.errors.exceptions.base.PySparkRuntimeError: [X] boom\n"
    )
    assert spark_cmd.python_exception_line(chained) == (
        "pyspark.errors.exceptions.base.PySparkRuntimeError: [X] boom"
    )
    assert spark_cmd.python_exception_line("Traceback (most recent call last):\n") is None
    assert spark_cmd.python_exception_line("no traceback here") is None


def test_package_zip_imports_where_pykraft_is_not_installed(tmp_path: Path) -> None:
    from pykraft.export.shipping import package_zip

    zipped = package_zip(tmp_path)
    assert package_zip(tmp_path) == zipped  # same package, same zip
    code = (
        "import sys\nsys.path.insert(0, sys.argv[1])\n"
        "import pykraft.export.spark_sources, pykraft.storage.record_walk\n"
        "assert pykraft.__file__.startswith(sys.argv[1]), pykraft.__file__\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, str(zipped)],
        cwd=tmp_path,
        env={"PATH": "/usr/bin:/bin"},
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
