"""``pykraft-kafka`` on a Spark standalone cluster against a real Kafka-protocol cluster
(issue 15): 3 controllers + 3 brokers (``pykraft dev``) and a Spark master with two workers
(``tests/export/spark_cluster.py``), each started once for this module, always stopped.

The driver is this test process (it has pykraft); the tasks run on the workers' executors, whose
Python is a venv without pykraft but with the third-party libraries, confluent-kafka among them
(a compiled wheel, as a cluster's image would carry it): pykraft reaches them only through the
zip ``export.shipping`` adds. The driver-side planner of the source runs that Python too.

What must hold: a batch read returns exactly what the brokers acknowledged, field by field
(keys, values, headers, timestamps, offsets) through gzip, lz4 and zstd batches from
confluent-kafka; ``read_committed`` (the default) hides an aborted transaction and its markers
while ``read_uncommitted`` shows it (Kafka's ``TransactionsTest`` shape); Spark's offset options
and split sizing bound what is read; and a streaming query into Spark's file sink whose driver
process (its own, on the same cluster) is killed mid-run, restarted from its checkpoint, writes
every record exactly once (``KafkaMicroBatchSourceSuite``'s restart cases, with
``maxOffsetsPerTrigger``).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor, wait
from pathlib import Path
from typing import Any

import attrs
import pytest
from confluent_kafka import TopicPartition as ClientTopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.cimpl import NewPartitions, NewTopic

from tests.clients.conftest import DevCluster
from tests.clients.support import Message, Placed, check_read_back, keyed_messages
from tests.clients.test_transactions_confluent import TrackedProducer, TransactionalProducer
from tests.export.kafka_stream_driver import MAX_OFFSETS_PER_TRIGGER, start_stream
from tests.export.spark_cluster import (
    SparkStandalone,
    start_cluster,
    start_driver_session,
    stop_processes,
)
from tests.integration.conftest import ROOT

pytestmark = [pytest.mark.integration, pytest.mark.slow, pytest.mark.timeout(600)]

TIMEOUT_S = 30.0
CODECS = ("gzip", "lz4", "zstd")
PER_CODEC = 200
FIRST_STREAM_RECORDS = 200  # four micro-batches of MAX_OFFSETS_PER_TRIGGER; killed after two


@attrs.frozen
class Clusters:
    kafka: DevCluster
    spark_standalone: SparkStandalone
    session: Any  # this process's SparkSession, its tasks on spark_standalone


@pytest.fixture(scope="module")
def clusters(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Clusters]:
    """Both clusters for the module, started side by side (the Spark side in a thread: its
    JVMs start while the Kafka side's processes elect and register), always stopped.

    The workers have room for two apps (``apps=2``): the stream test's driver process gets an
    executor while this process's session keeps its own, so nothing restarts after the kill."""
    dev = DevCluster(tmp_path_factory.mktemp("kafka-source") / "cluster")
    spark_dir = tmp_path_factory.mktemp("spark-standalone")
    processes: list[subprocess.Popen[bytes]] = []

    def start_spark() -> tuple[SparkStandalone, Any]:
        standalone = start_cluster(spark_dir, processes, apps=2)
        return standalone, start_driver_session(standalone, "kafka-source-live")

    with ThreadPoolExecutor(max_workers=1) as pool:
        starting = pool.submit(start_spark)
        try:
            dev.start()
            dev.wait_ready()
            standalone, session = starting.result()
            yield Clusters(dev, standalone, session)
        finally:
            wait([starting])  # a start that failed is reported by result() above
            if starting.exception() is None:
                starting.result()[1].stop()
            stop_processes(processes)
            dev.stop()


@pytest.fixture(scope="module")
def cluster(clusters: Clusters) -> DevCluster:
    return clusters.kafka


@pytest.fixture(scope="module")
def spark_standalone(clusters: Clusters) -> SparkStandalone:
    return clusters.spark_standalone


@pytest.fixture(scope="module")
def spark(clusters: Clusters) -> Any:
    """This module's session: driven from here, its tasks on the standalone cluster."""
    return clusters.session


def create_topic(cluster: DevCluster, prefix: str, partitions: int) -> str:
    topic = f"{prefix}-{uuid.uuid4().hex[:8]}"
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=partitions, replication_factor=3)],
        operation_timeout=TIMEOUT_S,
        request_timeout=TIMEOUT_S,
    )
    futures[topic].result(timeout=TIMEOUT_S)
    cluster.wait_for_topic(topic, partitions)
    return topic


@pytest.fixture(scope="module")
def compressed(cluster: DevCluster) -> tuple[str, list[Placed]]:
    """Keyed records with headers (a null value, null header values), one producer per codec."""
    topic = create_topic(cluster, "codecs", 3)
    placed: list[Placed] = []
    messages = keyed_messages(PER_CODEC * len(CODECS), payload_bytes=100)
    for n, codec in enumerate(CODECS):
        producer = TrackedProducer(cluster, **{"compression.type": codec, "acks": "all"})
        placed += producer.send(topic, messages[n * PER_CODEC : (n + 1) * PER_CODEC])
    return topic, placed


@pytest.fixture(scope="module")
def transactional(cluster: DevCluster) -> tuple[str, list[Placed], list[Placed]]:
    """Commit 40, abort 25, commit 15 (one partition, so the abort sits between commits)."""
    topic = create_topic(cluster, "txn", 1)
    producer = TransactionalProducer(cluster, f"kafkasrc-{uuid.uuid4().hex[:8]}")
    messages = keyed_messages(80, null_header_values=False)
    first = producer.transaction(topic, messages[:40], commit=True)
    aborted = producer.transaction(topic, messages[40:65], commit=False)
    last = producer.transaction(topic, messages[65:], commit=True)
    return topic, first + last, aborted


def kafka_read(spark: Any, cluster: DevCluster, **options: str) -> Any:
    reader = spark.read.format("pykraft-kafka").option(
        "kafka.bootstrap.servers", cluster.bootstrap_servers
    )
    for name, value in options.items():
        reader = reader.option(name, value)
    return reader.load()


def as_placed(rows: Sequence[Any]) -> list[Placed]:
    placed = []
    for row in rows:
        headers = tuple(
            (h["key"], None if h["value"] is None else bytes(h["value"]))
            for h in row["headers"] or ()
        )
        message = Message(
            None if row["key"] is None else bytes(row["key"]),
            None if row["value"] is None else bytes(row["value"]),
            headers,
            row["timestamp_ms"],
        )
        placed.append(Placed(row["partition"], row["offset"], message))
    return placed


SELECT = ["key", "value", "topic", "partition", "offset", "unix_millis(timestamp) AS timestamp_ms"]


def where_tasks_run(_: Iterator[Any]) -> Iterator[tuple[str, str, str | None]]:
    """A task's Python, working directory and where it imports ``pykraft`` from."""
    import importlib.util
    import os
    import sys

    spec = importlib.util.find_spec("pykraft")
    yield sys.executable, os.getcwd(), None if spec is None else spec.origin


def test_tasks_run_on_the_workers_pythons_with_pykraft_only_shipped(
    spark: Any, spark_standalone: SparkStandalone
) -> None:
    """What the checks below prove things on: executors in the workers' own directories, in
    the venv without pykraft, importing it from the shipped zip only."""
    from pyspark import cloudpickle

    this_module = sys.modules[__name__]  # not shipped: its probe travels by value
    cloudpickle.register_pickle_by_value(this_module)  # type: ignore[no-untyped-call]
    try:
        tasks = spark.sparkContext.parallelize(range(4), 4).mapPartitions(where_tasks_run)
        found = tasks.collect()
    finally:
        cloudpickle.unregister_pickle_by_value(this_module)  # type: ignore[no-untyped-call]
    assert {python for python, _, _ in found} == {str(spark_standalone.worker_python)}
    for _, cwd, origin in found:
        assert any(Path(cwd).is_relative_to(d) for d in spark_standalone.worker_dirs), cwd
        assert origin is not None and ".zip/pykraft/" in origin, origin


def test_batch_reads_every_acknowledged_record_through_every_codec(
    spark: Any, cluster: DevCluster, compressed: tuple[str, list[Placed]]
) -> None:
    topic, placed = compressed
    df = kafka_read(spark, cluster, subscribe=topic, includeHeaders="true")
    assert df.columns == [
        "key", "value", "topic", "partition", "offset", "timestamp", "timestampType", "headers",
    ]  # fmt: skip
    rows = df.selectExpr(*SELECT, "headers", "timestampType").collect()
    assert {row["topic"] for row in rows} == {topic}
    assert {row["timestampType"] for row in rows} == {0}  # CREATE_TIME
    check_read_back(placed, as_placed(rows))
    # Without includeHeaders: Spark's seven columns.
    assert "headers" not in kafka_read(spark, cluster, subscribe=topic).columns


def test_offsets_options_and_split_sizing(
    spark: Any, cluster: DevCluster, compressed: tuple[str, list[Placed]]
) -> None:
    topic, placed = compressed
    counts = {p: sum(1 for x in placed if x.partition == p) for p in range(3)}
    starting = json.dumps({topic: {"0": 10, "1": -2, "2": -2}})
    ending = json.dumps({topic: {"0": 30, "1": 5, "2": -1}})
    df = kafka_read(
        spark, cluster, subscribe=topic, startingOffsets=starting, endingOffsets=ending,
        minPartitions="6",
    )  # fmt: skip
    offsets = sorted(
        (r["partition"], r["offset"]) for r in df.select("partition", "offset").collect()
    )
    expected = (
        [(0, o) for o in range(10, 30)]
        + [(1, o) for o in range(5)]
        + [(2, o) for o in range(counts[2])]
    )
    assert offsets == expected
    assert df.rdd.getNumPartitions() >= 6
    limited = kafka_read(
        spark, cluster, assign=json.dumps({topic: [1]}), maxRecordsPerPartition="50"
    )
    assert limited.rdd.getNumPartitions() == -(-counts[1] // 50)  # ceil: none over 50
    pattern = kafka_read(spark, cluster, subscribePattern=topic.split("-")[0] + "-.*")
    assert pattern.filter(f"topic = '{topic}'").count() == len(placed)


def test_read_committed_hides_the_aborted_transaction(
    spark: Any, cluster: DevCluster, transactional: tuple[str, list[Placed], list[Placed]]
) -> None:
    topic, committed, aborted = transactional
    rows = kafka_read(spark, cluster, subscribe=topic, includeHeaders="true")
    check_read_back(committed, as_placed(rows.selectExpr(*SELECT, "headers").collect()))
    everything = kafka_read(
        spark, cluster, subscribe=topic, includeHeaders="true",
        **{"kafka.isolation.level": "read_uncommitted"},
    )  # fmt: skip
    check_read_back(
        committed + aborted, as_placed(everything.selectExpr(*SELECT, "headers").collect())
    )
    # 80 records and two markers before the last record: the range's last offset, 82, is the
    # final COMMIT marker, never delivered, and the reads above still ended.
    assert committed[-1].offset == 81


def test_fail_on_data_loss_when_the_start_was_deleted(
    spark: Any, cluster: DevCluster, compressed: tuple[str, list[Placed]]
) -> None:
    """Offsets below the log start (DeleteRecords): failOnDataLoss=true (the default) fails
    the query, false reads on from the log start (Spark's KafkaRelation with data loss)."""
    topic = create_topic(cluster, "deleted", 1)
    placed = TrackedProducer(cluster).send(topic, keyed_messages(20))
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    futures = admin.delete_records([ClientTopicPartition(topic, 0, 7)])
    assert [f.result(timeout=TIMEOUT_S).low_watermark for f in futures.values()] == [7]
    starting = json.dumps({topic: {"0": 2}})
    with pytest.raises(Exception, match="failOnDataLoss"):
        kafka_read(spark, cluster, subscribe=topic, startingOffsets=starting).collect()
    rows = kafka_read(
        spark, cluster, subscribe=topic, startingOffsets=starting, failOnDataLoss="false"
    ).collect()
    assert sorted(r["offset"] for r in rows) == [p.offset for p in placed][7:]


def test_stream_driver_killed_and_restarted_writes_each_record_once(
    spark: Any, spark_standalone: SparkStandalone, cluster: DevCluster, tmp_path: Path
) -> None:
    """A driver process with its query on the cluster (one executor: its tasks on a worker
    without pykraft), killed (SIGKILL) mid-stream; the query restarted from its checkpoint (a
    path every process sees) by this process's session on the same cluster, with more records
    produced meanwhile: the file sink's log holds each record once."""
    topic = create_topic(cluster, "stream", 2)
    producer = TrackedProducer(cluster, **{"compression.type": "lz4"})
    first = producer.send(topic, keyed_messages(FIRST_STREAM_RECORDS))
    out, checkpoint = tmp_path / "out", tmp_path / "checkpoint"
    args = [cluster.bootstrap_servers, topic, str(out), str(checkpoint)]
    on_cluster = [
        spark_standalone.master_url,
        *(f"{k}={v}" for k, v in spark_standalone.conf().items()),
    ]
    driver_log = tmp_path / "driver.log"
    with open(driver_log, "wb") as log:
        driver = subprocess.Popen(
            [sys.executable, "-m", "tests.export.kafka_stream_driver", *args, *on_cluster],
            cwd=ROOT, stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
            env=dict(spark_standalone.driver_env(), PYTHONPATH=str(ROOT)),
            start_new_session=True,
        )  # fmt: skip
    try:
        sink_log = out / "_spark_metadata"
        deadline = time.monotonic() + 180
        while not (sink_log / "1").exists():  # two micro-batches committed by the sink
            assert driver.poll() is None, driver_log.read_text(errors="replace")[-3000:]
            assert time.monotonic() < deadline, "no two batches in 180 s"
            time.sleep(0.05)
    finally:
        with contextlib.suppress(ProcessLookupError):  # a driver that died is the failure
            os.killpg(driver.pid, signal.SIGKILL)  # the driver, its JVM and Python workers
        driver.wait(30)
    committed = len([p for p in sink_log.iterdir() if p.name.isdigit()])
    assert committed < FIRST_STREAM_RECORDS / MAX_OFFSETS_PER_TRIGGER  # killed before the end
    # Meanwhile the topic grows a partition: the restarted query reads it from its earliest
    # offset (Spark's KafkaMicroBatchStream with partitions found later).
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    admin.create_partitions([NewPartitions(topic, 3)])[topic].result(timeout=TIMEOUT_S)
    cluster.wait_for_topic(topic, 3)
    producer = TrackedProducer(cluster)  # a client that knows the new partition
    second = producer.send(topic, keyed_messages(30)) + producer.send(
        topic, keyed_messages(20), partition=2
    )
    # Restarted with Trigger.AvailableNow: it reads what is there in capped batches and stops.
    query = start_stream(spark, *args, available_now=True)
    try:
        assert query.awaitTermination(180), "the AvailableNow query did not finish in 180 s"
        assert query.exception() is None, query.exception()
        assert all(p["numInputRows"] <= MAX_OFFSETS_PER_TRIGGER + 2 for p in query.recentProgress)
    finally:
        query.stop()
    read = spark.read.parquet(str(out)).collect()  # through the sink's log: committed files only
    written = sorted((r["partition"], r["offset"]) for r in read)
    assert written == sorted((p.partition, p.offset) for p in first + second)


def test_export_topic_through_the_brokers_exports_each_record_once(
    spark: Any, cluster: DevCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``export-topic --bootstrap-server`` (in this process, its tasks on the workers): a run,
    more records, a second run from the manifest's end, then a rerun with nothing new."""
    from pykraft.export.export_topic_job import export_topic, print_result
    from pykraft.export.kafka_export_plan import EXPORT_COLUMNS, KafkaExportSource

    topic = create_topic(cluster, "export", 2)
    producer = TrackedProducer(cluster, **{"compression.type": "zstd"})
    first = producer.send(topic, keyed_messages(60))
    source, out = KafkaExportSource(cluster.bootstrap_servers), tmp_path / "out"

    def export() -> Any:
        return export_topic(spark, source, topic, out, wall_clock_ms=lambda: 1_000)

    runs = [export()]
    second = producer.send(topic, keyed_messages(40))
    runs.append(export())
    assert [(r.run_id, r.records) for r in runs] == [(1, len(first)), (2, len(second))]
    assert {r.start_offset for r in runs[1].ranges} == {  # each partition from run 1's end
        r.end_offset for r in runs[0].ranges
    }
    written = spark.read.parquet(str(out))
    assert sorted(written.columns) == sorted(EXPORT_COLUMNS)
    rows = written.selectExpr(*SELECT, "headers").collect()
    check_read_back(first + second, as_placed(rows))
    print_result(export(), topic, out)
    assert f"{topic}: nothing new to export; {out} is up to date" in capsys.readouterr().out
