"""Spark jobs over the files of a live pykraft cluster: start it, produce, snapshot, export.

1. ``pykraft dev`` starts 1 controller and 3 brokers on free ports under ``DATA/cluster``, with
   ``metadata.log.max.records.between.snapshots`` set low so the controller snapshots its
   metadata every few seconds (its NoOpRecords alone count 2 records a second);
2. the topic ``clicks`` (6 partitions, replication factor 1) is created through the admin API
   and kafka-python's idempotent producer writes keyed records with ``acks=all``;
3. the example waits for a controller snapshot that contains everything committed so far, then
   stops the cluster (SIGTERM: brokers shut down under control and checkpoint their high
   watermarks) — the jobs read files, never a live process;
4. one local Spark session runs ``report`` on the controller's ``metadata.log.dir`` at that
   snapshot and ``export-topic`` on every broker's ``log.dirs``, and checks that the exported
   rows per partition are exactly the acknowledged records;
5. the cluster restarts on the same data, more records are produced, it stops again, and a
   second ``export-topic`` exports only the new records.

Every process is stopped on the way out, also after a failure or Ctrl-C. The same steps by
hand (cluster.json names the admin URL, the bootstrap servers and the data directories):

    pykraft dev --controllers 1 --brokers 3 --base-port 0 --data-dir DATA/cluster \\
        --controller-property metadata.log.max.records.between.snapshots=20
    pykraft topics --bootstrap-controller ADMIN_URL --create --topic clicks --partitions 6
    (produce, then Ctrl-C pykraft dev)
    pykraft spark report DATA/cluster/controller-1 --out DATA/report --snapshot ID
    pykraft spark export-topic --topic clicks --out DATA/clicks \\
        --log-dirs DATA/cluster/broker-10,DATA/cluster/broker-11,DATA/cluster/broker-12

The example uses replication factor 1. With RF > 1, ``export-topic`` reads each partition from
one replica: the one with the highest checkpointed high watermark (``export/replica_choice.py``).

Run: ``.venv/bin/python examples/spark_live_cluster.py [--data-dir DIR] [--records N]``
"""

from __future__ import annotations

import argparse
import collections
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Iterator, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from types import FrameType
from typing import Any

import attrs
from kafka import KafkaProducer
from kafka.errors import KafkaError

from pykraft.dev import read_cluster_json, stop_dev_process
from pykraft.export.export_topic_job import ExportResult, export_topic, print_result
from pykraft.export.report_job import run_report
from pykraft.export.session import DEFAULT_MASTER, build_session
from pykraft.storage.system_clock import SystemClock

ROOT = Path(__file__).resolve().parents[1]

TOPIC = "clicks"
PARTITIONS = 6
BROKERS = 3
CONTROLLER_PROPERTIES = {
    # Kafka snapshots by bytes and at most hourly; an example wants one within seconds.
    "metadata.log.max.records.between.snapshots": "20",
    # ...and keeps the one it reports on while newer ones are written during shutdown.
    "metadata.log.retained.snapshots": "1000",
}
READY_TIMEOUT_S = 90.0
STOP_TIMEOUT_S = 90.0  # pykraft dev's own bounds: brokers 45 s, then controllers 15 s
SNAPSHOT_TIMEOUT_S = 60.0
PRODUCE_TIMEOUT_S = 60.0
POLL_S = 0.2


class ExampleError(Exception):
    """A step of the example failed; the message says which and where to look."""


# ---- the cluster: `pykraft dev` as a child process ----


class DevProcess:
    """``pykraft dev`` on free ports; ``stop`` ends it and every node it started."""

    def __init__(self, data_dir: Path, brokers: int) -> None:
        self.data_dir = data_dir
        self.output = data_dir.parent / f"{data_dir.name}.out"
        properties = [
            arg
            for key, value in CONTROLLER_PROPERTIES.items()
            for arg in ("--controller-property", f"{key}={value}")
        ]
        self.command = [
            sys.executable,
            "-m",
            "pykraft.dev",
            "--controllers",
            "1",
            "--brokers",
            str(brokers),
            "--base-port",
            "0",
            "--data-dir",
            str(data_dir),
            *properties,
        ]
        self.process: subprocess.Popen[bytes] | None = None

    def start(self) -> dict[str, Any]:
        """Start and wait until every broker is RUNNING; returns cluster.json."""
        self.data_dir.mkdir(parents=True, exist_ok=True)
        (self.data_dir / "cluster.json").unlink(missing_ok=True)  # a stale "stopped" one
        with open(self.output, "ab") as output:
            self.process = subprocess.Popen(
                self.command,
                cwd=ROOT,
                stdout=output,
                stderr=subprocess.STDOUT,
                stdin=subprocess.DEVNULL,
                env=dict(os.environ, PYTHONPATH=str(ROOT)),
            )
        deadline = time.monotonic() + READY_TIMEOUT_S
        while (info := self.info()).get("state") != "running":
            if self.process.poll() is not None:
                raise ExampleError(
                    f"pykraft dev exited with {self.process.returncode}:\n" + self.output_tail()
                )
            if time.monotonic() > deadline:
                raise ExampleError(
                    f"the cluster was not ready after {READY_TIMEOUT_S:.0f} s:\n"
                    + self.output_tail()
                )
            time.sleep(POLL_S)
        return info

    def info(self) -> dict[str, Any]:
        return read_cluster_json(self.data_dir)

    def output_tail(self, lines: int = 20) -> str:
        try:
            return "\n".join(self.output.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no output)"

    def stop(self) -> None:
        """SIGTERM (brokers stop under control, then the controller); SIGKILL after the
        timeout, and to any node still running afterwards: pykraft dev starts each node in a
        session of its own, so a killed pykraft dev would leave them behind."""
        if self.process is not None:
            stop_dev_process(self.process, self.data_dir, STOP_TIMEOUT_S)
        self.process = None


@contextmanager
def running_cluster(data_dir: Path, brokers: int) -> Iterator[dict[str, Any]]:
    dev = DevProcess(data_dir, brokers)
    try:
        yield dev.start()
    finally:
        dev.stop()


# ---- the admin API ----


def admin(method: str, url: str, body: Any = None) -> tuple[int, Any]:
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(
        url, data=data, method=method, headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read() or b"{}")


def ensure_topic(admin_url: str) -> None:
    """Create the topic (a rerun on the same data finds it) and wait for its leaders."""
    status, answer = admin(
        "POST",
        f"{admin_url}/v1/topics",
        {"name": TOPIC, "partitions": PARTITIONS, "replication_factor": 1},
    )
    if status == 201:
        print(f"created topic {TOPIC!r}: {PARTITIONS} partitions, replication factor 1")
    elif answer.get("error") == "TOPIC_ALREADY_EXISTS":
        print(f"topic {TOPIC!r} already exists (a rerun on the same data)")
    else:
        raise ExampleError(f"creating {TOPIC!r} failed: {status} {answer}")
    deadline = time.monotonic() + READY_TIMEOUT_S
    while True:
        status, answer = admin("GET", f"{admin_url}/v1/topics/{TOPIC}")
        if status == 200 and all(p["leader"] >= 0 for p in answer["partitions"]):
            return
        if time.monotonic() > deadline:
            raise ExampleError(f"{TOPIC!r} has partitions without a leader: {answer}")
        time.sleep(POLL_S)


def wait_for_snapshot(admin_url: str) -> str:
    """The id of a snapshot holding every metadata record committed by now."""
    _, quorum = admin("GET", f"{admin_url}/v1/quorum")
    committed = int(quorum["committed_offset"])
    deadline = time.monotonic() + SNAPSHOT_TIMEOUT_S
    while time.monotonic() < deadline:
        _, listing = admin("GET", f"{admin_url}/v1/metadata/snapshots")
        # A snapshot's end offset is exclusive (Kafka's OffsetAndEpoch of a snapshot id).
        done = [s for s in listing["snapshots"] if s["end_offset"] > committed]
        if done:
            snapshot_id: str = done[0]["id"]
            print(f"controller snapshot {snapshot_id} holds metadata offsets 0..{committed}")
            return snapshot_id
        time.sleep(POLL_S)
    raise ExampleError(
        f"no snapshot past metadata offset {committed} after {SNAPSHOT_TIMEOUT_S:.0f} s"
    )


# ---- producing ----


def produce(bootstrap_servers: str, count: int, first: int) -> dict[int, int]:
    """``count`` keyed records with acks=all; returns acknowledged records per partition."""
    # kafka-python's default idempotent producer (InitProducerId first): a batch retried after
    # a lost answer is not written twice, so acknowledged records are exactly the log's records.
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers.split(","),
        acks="all",
        linger_ms=5,
        enable_idempotence=True,
        delivery_timeout_ms=int(PRODUCE_TIMEOUT_S * 1000),
    )
    try:
        futures = [
            producer.send(
                TOPIC,
                key=f"user-{n % 100}".encode(),
                value=json.dumps({"n": n, "page": f"/p/{n % 37}"}).encode(),
                headers=[("source", b"spark_live_cluster")],
            )
            for n in range(first, first + count)
        ]
        producer.flush(PRODUCE_TIMEOUT_S)
        acknowledged: collections.Counter[int] = collections.Counter()
        failures = 0
        for future in futures:
            try:
                acknowledged[future.get(PRODUCE_TIMEOUT_S).partition] += 1
            except KafkaError:
                failures += 1
    finally:
        producer.close(timeout=5)
    print(f"produced {count} records: {sum(acknowledged.values())} acknowledged, {failures} failed")
    return dict(acknowledged)


# ---- the example ----


@attrs.frozen(kw_only=True)
class ExampleResult:
    snapshot_id: str
    report: Mapping[str, list[Any]]  # the report's small tables, as collected rows
    acknowledged: tuple[Mapping[int, int], Mapping[int, int]]  # per partition, per round
    exports: tuple[ExportResult, ExportResult]
    total_rows: int  # rows in the export directory after both runs


def exported_by_partition(result: ExportResult) -> dict[int, int]:
    return {r.partition: r.records for r in result.ranges if r.records}


def produce_round(
    cluster_dir: Path, records: int, first: int, brokers: int, snapshot: bool
) -> tuple[dict[int, int], str | None, list[str]]:
    """Start the cluster, produce, optionally wait for a snapshot, stop; returns the
    acknowledged counts, the snapshot id and the brokers' log dirs."""
    with running_cluster(cluster_dir, brokers) as info:
        print(
            f"cluster up: bootstrap servers {info['bootstrap_servers']}, "
            f"admin URL {info['admin_url']}"
        )
        ensure_topic(info["admin_url"])
        acknowledged = produce(info["bootstrap_servers"], records, first)
        snapshot_id = wait_for_snapshot(info["admin_url"]) if snapshot else None
        log_dirs = [str(cluster_dir / f"broker-{b['node_id']}") for b in info["brokers"]]
        print("stopping the cluster (the jobs read its files, not its processes)")
    return acknowledged, snapshot_id, log_dirs


def export_round(
    spark: Any, log_dirs: list[str], out_dir: Path, acknowledged: Mapping[int, int]
) -> ExportResult:
    started = time.monotonic()
    result = export_topic(
        spark, ",".join(log_dirs), TOPIC, out_dir, wall_clock_ms=SystemClock().wall_clock_ms
    )
    print_result(result, TOPIC, out_dir)
    exported = exported_by_partition(result)
    print(
        f"exported {result.records} rows in {time.monotonic() - started:.1f} s; "
        f"acknowledged {sum(acknowledged.values())}"
    )
    if exported != dict(acknowledged):
        raise ExampleError(
            f"exported rows per partition {exported} are not the "
            f"acknowledged records per partition {dict(acknowledged)}"
        )
    return result


@contextmanager
def spark_started_early(master: str) -> Iterator[Future[Any]]:
    """Spark's JVM takes many seconds to start: start it while the cluster runs. The session
    is stopped on the way out whether or not the example got as far as using it."""
    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="spark-start") as pool:
        starting = pool.submit(build_session, master, "pykraft live-cluster example")
        try:
            yield starting
        finally:
            if starting.exception() is None:  # waits for a start still under way
                starting.result().stop()


def run_example(
    data_dir: Path,
    records: int = 3000,
    more_records: int = 500,
    brokers: int = BROKERS,
    master: str = DEFAULT_MASTER,
) -> ExampleResult:
    cluster_dir, out_dir = data_dir / "cluster", data_dir / TOPIC
    with spark_started_early(master) as starting:
        first, snapshot_id, log_dirs = produce_round(cluster_dir, records, 0, brokers, True)
        assert snapshot_id is not None
        spark = starting.result()
        started = time.monotonic()
        report = run_report(spark, cluster_dir / "controller-1", data_dir / "report", snapshot_id)
        print(f"report took {time.monotonic() - started:.1f} s\n")
        first_export = export_round(spark, log_dirs, out_dir, first)
        print("\nrestarting the cluster on the same data to produce more")
        second, _, log_dirs = produce_round(cluster_dir, more_records, records, brokers, False)
        second_export = export_round(spark, log_dirs, out_dir, second)
        total = spark.read.parquet(str(out_dir)).count()
    print(f"\n{out_dir} holds {total} rows ({first_export.records} + {second_export.records})")
    return ExampleResult(
        snapshot_id=snapshot_id,
        report=report,
        acknowledged=(first, second),
        exports=(first_export, second_export),
        total_rows=total,
    )


def _exit_on_sigterm(signum: int, frame: FrameType | None) -> None:
    raise SystemExit(128 + signum)  # unwinds through every `finally`: processes get stopped


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data-dir",
        type=Path,
        default=None,
        help="where the cluster and the outputs go (default: a new temp dir)",
    )
    parser.add_argument("--records", type=int, default=3000, help="records in the first round")
    parser.add_argument(
        "--more-records", type=int, default=500, help="records produced after the restart"
    )
    parser.add_argument("--brokers", type=int, default=BROKERS, choices=range(1, 11), metavar="N")
    parser.add_argument("--master", default=DEFAULT_MASTER, help="Spark master URL")
    args = parser.parse_args(argv)
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    data_dir = (args.data_dir or Path(tempfile.mkdtemp(prefix="pykraft-live-"))).resolve()
    print(f"data directory: {data_dir}")
    started = time.monotonic()
    try:
        run_example(data_dir, args.records, args.more_records, args.brokers, args.master)
    except ExampleError as error:
        print(f"spark_live_cluster: {error}", file=sys.stderr)
        return 1
    print(f"done in {time.monotonic() - started:.0f} s; every process is stopped")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
