"""``examples/spark_live_cluster.py`` end to end: a real ``pykraft dev`` cluster (1 controller,
3 brokers), kafka-python producing with acks=all, a controller snapshot, a clean stop, then the
``report`` and ``export-topic`` Spark jobs on the files left behind.

What must hold (issue 6): the report at the snapshot sees the live cluster (every broker
unfenced, the topic whole); export-topic over all the brokers' log dirs writes exactly the
acknowledged records, each once, per partition; after a restart and more records, a rerun
exports only the new offsets (the manifest's ranges continue where the first run stopped); and
no process the example started outlives it, also when a step fails.
"""

from __future__ import annotations

import importlib.util
import json
from pathlib import Path
from types import ModuleType
from typing import Any

import pyarrow.parquet as pq
import pytest

from pykraft.dev import runs_config
from tests.integration.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow]

RECORDS = 2000
MORE_RECORDS = 300


def load_example() -> ModuleType:
    path = ROOT / "examples" / "spark_live_cluster.py"
    spec = importlib.util.spec_from_file_location("spark_live_cluster", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


example = load_example()


def started_nodes(cluster_dir: Path) -> list[dict[str, Any]]:
    info: dict[str, Any] = json.loads((cluster_dir / "cluster.json").read_text())
    assert info["state"] == "stopped"
    nodes: list[dict[str, Any]] = info["controllers"] + info["brokers"]
    return nodes


def assert_all_stopped(cluster_dir: Path) -> None:
    for node in started_nodes(cluster_dir):
        assert node["pid"] and not runs_config(node["pid"], node["config"]), node


def test_live_cluster_example(tmp_path: Path) -> None:
    result = example.run_example(
        tmp_path, records=RECORDS, more_records=MORE_RECORDS, master="local[2]"
    )
    first, second = result.acknowledged
    first_export, second_export = result.exports

    # Every record was acknowledged, and each export holds exactly them, partition by partition.
    assert sum(first.values()) == RECORDS and sum(second.values()) == MORE_RECORDS
    assert example.exported_by_partition(first_export) == first
    assert example.exported_by_partition(second_export) == second
    assert first_export.run_id == 1 and second_export.run_id == 2
    # The rerun starts each partition where the first run ended: only the new offsets.
    ends = {r.partition: r.end_offset for r in first_export.ranges}
    for r in second_export.ranges:
        assert r.start_offset == ends[r.partition], (r, ends)
    assert result.total_rows == RECORDS + MORE_RECORDS

    # Each produced record is in the Parquet output exactly once, with its key and header.
    table = pq.read_table(tmp_path / example.TOPIC).to_pylist()
    numbers = sorted(json.loads(row["value"])["n"] for row in table)
    assert numbers == list(range(RECORDS + MORE_RECORDS))
    assert all(
        row["key"] == f"user-{json.loads(row['value'])['n'] % 100}".encode() for row in table
    )
    assert all(
        row["headers"] == [{"key": "source", "value": b"spark_live_cluster"}] for row in table
    )
    # Written by an idempotent producer: one producer id per round, sequence-checked batches.
    assert len({row["producer_id"] for row in table}) == 2
    assert all(row["producer_id"] >= 0 and row["producer_epoch"] == 0 for row in table)

    # The report read the snapshot taken while the cluster ran: brokers up, topic whole.
    snapshots = tmp_path / "cluster" / "controller-1" / "snapshots"
    assert (snapshots / f"{result.snapshot_id}.checkpoint").is_file()
    [topic] = result.report["topics"]
    assert (topic["topic"], topic["partitions"], topic["replication_factor"]) == (
        example.TOPIC,
        example.PARTITIONS,
        1,
    )
    assert (topic["under_replicated"], topic["offline"]) == (0, 0)
    load = result.report["broker_load"]
    assert [row["broker_id"] for row in load] == [10, 11, 12]
    assert not any(row["fenced"] for row in load)
    assert sum(row["leaders"] for row in load) == example.PARTITIONS
    assert (tmp_path / "report" / "broker_load.png").is_file()

    assert_all_stopped(tmp_path / "cluster")


def test_a_failing_step_still_stops_every_process(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Kafka refuses a topic of 0 partitions (INVALID_PARTITIONS): the example's step fails
    # while the cluster runs, and leaving the block must still stop every node.
    monkeypatch.setattr(example, "PARTITIONS", 0)
    cluster_dir = tmp_path / "cluster"
    with (
        pytest.raises(example.ExampleError, match="creating 'clicks' failed: 400"),
        example.running_cluster(cluster_dir, 1) as info,
    ):
        assert info["state"] == "running"
        example.ensure_topic(info["admin_url"])
    assert_all_stopped(cluster_dir)
    assert len(started_nodes(cluster_dir)) == 2
