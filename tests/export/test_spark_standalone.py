"""``pykraft spark`` against a Spark standalone cluster whose workers lack pykraft (issue 15).

One cluster for the module (``tests/export/spark_cluster.py``); each test runs the real CLI as
the driver process, with pykraft shipped by the command itself. What each shows:

* the silent loss: executors that write an output the driver cannot see (the driver runs in
  its own mount namespace, with an empty filesystem over ``--out``, as a driver on another
  machine would) made ``export-topic`` exit 0 with "exported 0 records" and commit the
  manifest; now it fails naming the counts and commits nothing, and a rerun exports it all;
* the driver killed at each stage of a run (planning, writing, after the output commit, after
  the manifest's PENDING) and then rerun: every record exported exactly once, contents equal
  to the log's, relative ``--log-dirs`` resolved by the driver;
* the report on a fresh controller (a Raft journal, no snapshot yet).
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from pykraft.export.manifest import MANIFEST_FILE, RunState, load_manifest
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import PartitionChangeRecord
from pykraft.storage.topic_partition import TopicPartition
from tests.export.fixtures import (
    LogFixture,
    append_and_commit,
    build_fresh_metadata_dir,
    build_log_dirs,
    cluster_records,
    expected_log_rows,
    journal_batches,
)
from tests.export.spark_cluster import SparkStandalone

# Each test starts Spark drivers (seconds each, minutes on a loaded machine).
pytestmark = [pytest.mark.slow, pytest.mark.timeout(900)]

ROOT = Path(__file__).resolve().parents[2]
DRIVER_TIMEOUT_S = 240.0
TOPIC = "orders"


def driver_command(cluster: SparkStandalone, *args: str, executors: int = 2) -> list[str]:
    """The CLI as a driver; ``executors=1`` saves a JVM per run where one executor shows as
    much (each --conf given later wins)."""
    return [
        sys.executable,
        "-m",
        "pykraft.cli",
        "spark",
        *args,
        "--master",
        cluster.master_url,
        *cluster.conf_args(),
        "--conf",
        f"spark.cores.max={executors}",
    ]


def driver_env(cluster: SparkStandalone) -> dict[str, str]:
    env = cluster.driver_env()
    env["PYTHONPATH"] = str(ROOT)  # the driver has pykraft; the workers do not
    return env


def export_args(log_dirs: str, out: str) -> list[str]:
    return ["export-topic", "--log-dirs", log_dirs, "--topic", TOPIC, "--out", out]


def run_driver(
    cluster: SparkStandalone, command: list[str], cwd: Path
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        command,
        cwd=cwd,
        env=driver_env(cluster),
        capture_output=True,
        text=True,
        timeout=DRIVER_TIMEOUT_S,
        check=False,
    )


def kill_driver_at(cluster: SparkStandalone, command: list[str], cwd: Path, marker: str) -> str:
    """Run the driver until it prints a progress line containing ``marker``, then SIGKILL its
    process group (the Python driver and its JVM); returns what it printed."""
    driver = subprocess.Popen(
        command,
        cwd=cwd,
        env=driver_env(cluster),
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
        start_new_session=True,
    )
    printed = []
    try:
        assert driver.stdout is not None
        for line in driver.stdout:
            printed.append(line)
            if marker in line:
                os.killpg(driver.pid, signal.SIGKILL)
                break
    finally:
        if driver.poll() is None:
            os.killpg(driver.pid, signal.SIGKILL)
        driver.wait(timeout=DRIVER_TIMEOUT_S)
    text = "".join(printed)
    assert marker in text, text
    return text


def exported_rows(out: Path) -> list[tuple[Any, ...]]:
    """Every exported row as ``(topic, partition, offset, value)``, read with pyarrow."""
    import pyarrow.dataset as ds  # type: ignore[import-untyped, unused-ignore]

    dataset = ds.dataset(str(out), format="parquet", partitioning="hive")
    table = dataset.to_table(columns=["topic", "partition", "offset", "value"])
    return sorted(
        zip(
            table.column("topic").to_pylist(),
            [int(p) for p in table.column("partition").to_pylist()],
            table.column("offset").to_pylist(),
            table.column("value").to_pylist(),
            strict=True,
        )
    )


def expected_rows(logs: LogFixture) -> list[tuple[Any, ...]]:
    return sorted((r[0], r[1], r[2], r[6]) for r in expected_log_rows(logs) if r[0] == TOPIC)


def assert_exported_once(logs: LogFixture, out: Path) -> None:
    rows = exported_rows(out)
    twice = [key for key, n in Counter((r[1], r[2]) for r in rows).items() if n > 1]
    assert twice == []
    assert rows == expected_rows(logs)
    manifest = load_manifest(out, TOPIC)
    assert {run.state for run in manifest.runs} == {RunState.COMMITTED}
    assert sum(r.records for run in manifest.runs for r in run.ranges) == len(rows)
    assert not (out / "_staging").exists()


def unshare_works() -> bool:
    if shutil.which("unshare") is None:
        return False
    done = subprocess.run(["unshare", "-Urm", "true"], capture_output=True, check=False, timeout=10)
    return done.returncode == 0


def test_executors_output_the_driver_cannot_see_fails_loudly_and_commits_nothing(
    spark_standalone: SparkStandalone, tmp_path: Path
) -> None:
    if not unshare_works():
        pytest.skip("needs unshare -Urm (user and mount namespaces) to hide --out from the driver")
    logs = build_log_dirs(tmp_path / "logs")
    out = tmp_path / "out"
    out.mkdir()
    (tmp_path / "driver").mkdir()
    command = driver_command(spark_standalone, *export_args(logs.log_dirs_option, str(out)))
    # The driver's view of OUT is an empty tmpfs; the executors write the real directory.
    hidden = [
        "unshare",
        "-Urm",
        "sh",
        "-c",
        'mount -t tmpfs driver-only "$0" || exit 97; "$@"; code=$?; '
        'echo "driver sees: $(ls -A "$0" | tr "\\n" " ")"; exit $code',
        str(out),
        *command,
    ]
    done = run_driver(spark_standalone, hidden, tmp_path / "driver")
    assert done.returncode == 1, done.stdout + done.stderr
    expected = expected_rows(logs)
    per_partition = Counter(row[1] for row in expected)
    details = ", ".join(
        f"partition {p}: read {n}, found 0" for p, n in sorted(per_partition.items())
    )
    # Each driver attempt stages in its own directory, run-1-<attempt>.
    staged = re.escape(f"file:{out}/_staging/run-1-")
    assert re.search(
        rf"pykraft spark export-topic: the rows in {staged}[0-9a-f]{{16}} differ from the "
        rf"rows read \({re.escape(details)}\); nothing committed",
        done.stderr,
    ), done.stderr
    assert "exported 0 records" not in done.stdout
    assert MANIFEST_FILE not in done.stdout.split("driver sees:")[-1]
    # The executors' files are stranded in _temporary: never committed, never counted.
    assert not (out / MANIFEST_FILE).exists()
    assert not list(out.glob("partition=*"))
    # Seen whole, the same output is exported completely by the next run.
    rerun = run_driver(spark_standalone, command, tmp_path / "driver")
    assert rerun.returncode == 0, rerun.stderr
    assert f"exported {len(expected)} records" in rerun.stdout
    assert_exported_once(logs, out)


ALL_STAGES = (
    "planning:",
    "writing",
    "output committed",
    "pending in the manifest",
)
# Each stage is one more driver JVM on the cluster (about 20 s here). CI kills the driver at every
# stage, as issue 15 asks; PYKRAFT_SPARK_CRASH_STAGES=pending, for a quicker local run, only once
# its run is pending in the manifest (the stage whose rerun must finish a half-committed run).
STAGES = (
    ("pending in the manifest",)
    if os.environ.get("PYKRAFT_SPARK_CRASH_STAGES") == "pending"
    else ALL_STAGES
)


def test_driver_killed_at_each_stage_then_rerun_exports_every_record_once(
    spark_standalone: SparkStandalone, tmp_path: Path
) -> None:
    logs = build_log_dirs(tmp_path / "logs")
    driver_dir = tmp_path / "driver"
    driver_dir.mkdir()
    out = tmp_path / "out"
    # Relative --log-dirs: the driver makes them absolute; the executors' cwd is elsewhere.
    relative = ",".join(os.path.relpath(d, driver_dir) for d in logs.log_dirs)
    command = driver_command(spark_standalone, *export_args(relative, f"file://{out}"), executors=1)
    orders0 = TopicPartition(TOPIC, 0)
    for n, stage in enumerate(STAGES):
        append_and_commit(logs, orders0, 3 + n)  # something new for every run
        printed = kill_driver_at(spark_standalone, command, driver_dir, stage)
        assert "Traceback" not in printed
        if (out / MANIFEST_FILE).exists():  # what a killed run committed is never partial
            manifest = load_manifest(out, TOPIC)
            assert all(run.ranges for run in manifest.runs)
    done = run_driver(spark_standalone, command, driver_dir)
    assert done.returncode == 0, done.stderr
    assert_exported_once(logs, out)


def test_report_on_a_fresh_cluster_reads_the_raft_journal(
    spark_standalone: SparkStandalone, tmp_path: Path
) -> None:
    """No snapshot yet (a controller writes its first after 20,000 records): the report's
    views come from the journal's image; relative paths are the driver's."""
    import pyarrow.parquet as pq  # type: ignore[import-untyped, unused-ignore]

    build_fresh_metadata_dir(tmp_path / "meta")
    records = cluster_records() + [r for batch in journal_batches() for r in batch]
    image = apply_records(MetadataImage.EMPTY, records, offset=len(records) - 1, epoch=3)
    command = driver_command(spark_standalone, "report", "meta", "--out", "report", executors=1)
    done = run_driver(spark_standalone, command, tmp_path)
    assert done.returncode == 0, done.stderr
    assert f"pykraft report: snapshot journal (end offset {len(records)})" in done.stdout
    partitions = [p for t in image.topics.by_name.values() for p in t.partitions.values()]
    leaders = Counter(p.leader for p in partitions if p.leader >= 0)
    replicas = Counter(b for p in partitions for b in p.replicas)
    load = pq.read_table(tmp_path / "report" / "broker_load").to_pylist()
    assert {row["broker_id"]: (row["leaders"], row["replicas"]) for row in load} == {
        b: (leaders[b], replicas[b]) for b in image.cluster.brokers
    }
    changes = pq.read_table(tmp_path / "report" / "isr_changes").to_pylist()
    expected = [n for n, r in enumerate(records) if isinstance(r, PartitionChangeRecord)]
    assert [row["offset"] for row in changes] == expected
    assert "report: [1/9] computing broker_load" in done.stderr  # a line per step, as it starts
    assert "report: [9/9] writing report.html and summary.txt" in done.stderr
    assert_report_page(tmp_path / "report", image)


def assert_report_page(out: Path, image: MetadataImage) -> None:
    """report.html names every broker and every under-replicated partition; its charts are
    PNGs that decode."""
    from matplotlib import image as png_image

    page = (out / "report.html").read_text()
    for broker_id in image.cluster.brokers:
        assert f'<tr><td class="number">{broker_id}</td>' in page
    live = {b.id for b in image.cluster.brokers.values() if not b.fenced}
    under = [
        (t.name, n)
        for t in image.topics.by_name.values()
        for n, p in t.partitions.items()
        if p.leader in live and len(p.isr) < len(p.replicas)
    ]
    section = page.split('<h3 id="under_replicated">')[1].split("<h3")[0]
    assert under and all(f'<td>{t}</td><td class="number">{n}</td>' in section for t, n in under)
    for chart in ("broker_load.png", "isr_changes.png"):
        assert png_image.imread(out / chart).shape[0] > 0
    print(f"the report's page and charts: {out / 'report.html'}")
