"""``pykraft console-producer``, ``console-consumer``, ``producer-perf-test`` and
``consumer-perf-test`` against the session's real cluster (``conftest.cluster``, no cluster of
their own), through confluent-kafka: records produced from lines with keys and headers come back
printed in Kafka's ``DefaultMessageFormatter`` layout, a ``--group`` consume leaves lag 0 in
``pykraft consumer-groups --describe``, ``--isolation-level read_committed`` hides an aborted
transaction, and the perf tools print Kafka's lines for 2,000 records (parsed and checked)."""

from __future__ import annotations

import io
import re
import time

import pytest
from confluent_kafka import Producer

from pykraft.cli import main
from tests.clients.conftest import DevCluster
from tests.clients.support import unique_topic
from tests.clients.test_kafka_python import create_topic

pytestmark = pytest.mark.clients

LINES = ["h1:v1,h2:v2\tk1\tvalue-1", "h3:v3\tk2\tvalue-2", "NO:HEADERS_HERE\tk3\tvalue-3"]
PRINT_ALL = [
    "--property", "print.key=true", "--property", "print.partition=true",
    "--property", "print.offset=true", "--property", "print.headers=true",
    "--property", "print.timestamp=true",
]  # fmt: skip
PERF_RECORDS = 2000
PERF_RECORD_SIZE = 100


def stdin(text: str) -> io.TextIOWrapper:
    """Standard input as a process has it: bytes underneath (the producer reads those)."""
    return io.TextIOWrapper(io.BytesIO(text.encode()), encoding="utf-8")


def tool(capsys: pytest.CaptureFixture[str], *argv: str, code: int = 0) -> tuple[str, str]:
    capsys.readouterr()
    assert main(list(argv)) == code
    captured = capsys.readouterr()
    return captured.out, captured.err


def produce_lines(
    cluster: DevCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str],
    topic: str, lines: list[str], *properties: str,
) -> str:  # fmt: skip
    monkeypatch.setattr("sys.stdin", stdin("".join(f"{line}\n" for line in lines)))
    _, err = tool(
        capsys, "console-producer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--request-required-acks", "all", *properties,
    )  # fmt: skip
    return err


@pytest.fixture(scope="module")
def keyed_topic(cluster: DevCluster) -> str:
    topic = create_topic(cluster, partitions=1)
    cluster.wait_for_topic(topic, 1)
    return topic


def test_console_round_trip_prints_kafkas_format(
    cluster: DevCluster, keyed_topic: str, monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:  # fmt: skip
    before_ms = int(time.time() * 1000)
    err = produce_lines(
        cluster, monkeypatch, capsys, keyed_topic, LINES,
        "--property", "parse.key=true", "--property", "parse.headers=true",
    )  # fmt: skip
    assert err == ""
    out, err = tool(
        capsys, "console-consumer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", keyed_topic, "--from-beginning", "--max-messages", "3", *PRINT_ALL,
    )  # fmt: skip
    assert err.splitlines()[-1] == "Processed a total of 3 messages"
    rows = [line.split("\t") for line in out.splitlines()]
    timestamps = [int(row[0].removeprefix("CreateTime:")) for row in rows]
    assert all(before_ms - 1000 <= ts <= int(time.time() * 1000) for ts in timestamps)
    assert [row[1:] for row in rows] == [
        ["Partition:0", "Offset:0", "h1:v1,h2:v2", "k1", "value-1"],
        ["Partition:0", "Offset:1", "h3:v3", "k2", "value-2"],
        ["Partition:0", "Offset:2", "NO:HEADERS_HERE", "k3", "value-3"],
    ]
    # --partition/--offset, another key.separator; --timeout-ms ends a wait for a 3rd record.
    out, err = tool(
        capsys, "console-consumer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", keyed_topic, "--partition", "0", "--offset", "1", "--timeout-ms", "1500",
        "--property", "print.key=true", "--property", "key.separator=|",
    )  # fmt: skip
    assert out == "k2|value-2\nk3|value-3\n"
    assert err.splitlines() == [
        "ERROR Error processing message, terminating consumer process: "
        "org.apache.kafka.common.errors.TimeoutException",
        "Processed a total of 2 messages",
    ]


def test_a_line_without_the_key_separator_stops_the_producer(
    cluster: DevCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = unique_topic("bad-line")  # auto-created (auto.create.topics.enable), 1 partition
    monkeypatch.setattr("sys.stdin", stdin("a:1\nno separator\nb:2\n"))
    _, err = tool(
        capsys, "console-producer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--property", "parse.key=true", "--property", "key.separator=:",
        code=1,
    )  # fmt: skip
    assert err.splitlines()[-1] == (
        "org.apache.kafka.common.KafkaException: No key separator found on line number 2: "
        "'no separator'"
    )
    # The line before the bad one was delivered; nothing after it was sent.
    out, _ = tool(
        capsys, "console-consumer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--partition", "0", "--offset", "earliest", "--timeout-ms", "1000",
        "--property", "print.key=true",
    )  # fmt: skip
    assert out == "a\t1\n"


def test_a_group_consume_commits_so_lag_is_zero(
    cluster: DevCluster, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = create_topic(cluster, partitions=2)
    cluster.wait_for_topic(topic, 2)
    produce_lines(
        cluster, monkeypatch, capsys, topic, [f"key-{i}:v{i}" for i in range(10)],
        "--property", "parse.key=true", "--property", "key.separator=:",
    )  # fmt: skip
    group = unique_topic("console-group")
    out, _ = tool(
        capsys, "console-consumer", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--group", group, "--from-beginning", "--max-messages", "10",
    )  # fmt: skip
    assert sorted(out.splitlines()) == sorted(f"v{i}" for i in range(10))
    described, _ = tool(
        capsys, "consumer-groups", "--bootstrap-server", cluster.bootstrap_servers,
        "--describe", "--group", group,
    )  # fmt: skip
    rows = [line.split() for line in described.splitlines()[2:] if line.strip()]
    assert [row[:3] for row in rows] == [[group, topic, "0"], [group, topic, "1"]]
    assert sum(int(row[3]) for row in rows) == 10  # CURRENT-OFFSET
    assert [row[3] == row[4] and row[5] == "0" for row in rows] == [True, True]  # LAG 0


def test_read_committed_hides_an_aborted_transaction(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = create_topic(cluster, partitions=1)
    cluster.wait_for_topic(topic, 1)
    producer = Producer(
        {"bootstrap.servers": cluster.bootstrap_servers, "transactional.id": unique_topic("txn")}
    )
    producer.init_transactions(30)
    for value, commit in (("committed-1", True), ("aborted", False), ("committed-2", True)):
        producer.begin_transaction()
        producer.produce(topic, value.encode())
        assert producer.flush(30) == 0  # librdkafka's abort would purge an unsent record
        producer.commit_transaction(30) if commit else producer.abort_transaction(30)
    common = [
        "console-consumer", "--bootstrap-server", cluster.bootstrap_servers, "--topic", topic,
        "--from-beginning", "--timeout-ms", "1500",
    ]  # fmt: skip
    committed, _ = tool(
        capsys, *common, "--max-messages", "2", "--isolation-level", "read_committed"
    )
    assert committed.splitlines() == ["committed-1", "committed-2"]
    everything, _ = tool(capsys, *common, "--max-messages", "3")
    assert everything.splitlines() == ["committed-1", "aborted", "committed-2"]


PRODUCER_TOTAL = re.compile(
    r"(\d+) records sent, (\d+\.\d{6}) records/sec \((\d+\.\d{2}) MB/sec\), (\d+\.\d{2}) ms avg "
    r"latency, (\d+\.\d{2}) ms max latency, (\d+) ms 50th, (\d+) ms 95th, (\d+) ms 99th, "
    r"(\d+) ms 99\.9th\.$"
)
PRODUCER_WINDOW = re.compile(
    r"\d+ records sent, \d+\.\d records/sec \(\d+\.\d{2} MB/sec\), \d+\.\d ms avg latency, "
    r"\d+\.\d ms max latency\.$"
)
DATE = r"\d{4}-\d\d-\d\d \d\d:\d\d:\d\d:\d{3}"
CONSUMER_TOTAL = re.compile(
    rf"({DATE}), ({DATE}), (\d+\.\d{{4}}), (\d+\.\d{{4}}), (\d+), (\d+\.\d{{4}}), (\d+), (-?\d+), "
    r"(\S+), (\S+)$"
)


def test_perf_tests_print_kafkas_lines(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = create_topic(cluster, partitions=2)
    cluster.wait_for_topic(topic, 2)
    out, _ = tool(
        capsys, "producer-perf-test", "--topic", topic, "--num-records", str(PERF_RECORDS),
        "--record-size", str(PERF_RECORD_SIZE), "--throughput", "-1",
        "--producer-props", f"bootstrap.servers={cluster.bootstrap_servers}", "acks=all",
        "--print-metrics",
    )  # fmt: skip
    lines = out.splitlines()
    metrics_at = lines.index("")  # ToolsUtils.printMetrics starts with an empty line
    *windows, total = lines[:metrics_at]
    assert lines[metrics_at + 1].split() == ["Metric", "Name", "Value"]
    metrics = {
        name.rstrip(): value
        for name, value in (line.split(" : ") for line in lines[metrics_at + 2 :])
    }
    tags = "{client-id=perf-producer-client}"
    assert metrics[f"producer-metrics:record-send-total:{tags}"] == f"{PERF_RECORDS}.000"
    assert metrics[f"producer-metrics:record-error-total:{tags}"] == "0.000"
    assert float(metrics[f"producer-metrics:request-total:{tags}"]) >= 1
    assert all(PRODUCER_WINDOW.match(line) for line in windows), windows
    match = PRODUCER_TOTAL.match(total)
    assert match, total
    sent, per_sec, mb_per_sec, avg, peak, p50, p95, p99, p999 = match.groups()
    assert int(sent) == PERF_RECORDS and float(per_sec) > 0
    assert float(mb_per_sec) == pytest.approx(float(per_sec) * PERF_RECORD_SIZE / 2**20, abs=0.006)
    assert int(p50) <= int(p95) <= int(p99) <= int(p999) <= float(peak)
    assert 0 <= float(avg) <= float(peak)

    out, _ = tool(
        capsys, "consumer-perf-test", "--bootstrap-server", cluster.bootstrap_servers,
        "--topic", topic, "--messages", str(PERF_RECORDS), "--timeout", "10000",
    )  # fmt: skip
    header, line = out.splitlines()
    assert header == (
        "start.time, end.time, data.consumed.in.MB, MB.sec, data.consumed.in.nMsg, nMsg.sec, "
        "rebalance.time.ms, fetch.time.ms, fetch.MB.sec, fetch.nMsg.sec"
    )
    match = CONSUMER_TOTAL.match(line)
    assert match, line
    start, end, mb, _, messages, _, rebalance_ms, fetch_ms, _, _ = match.groups()
    assert start <= end
    assert (mb, int(messages)) == (f"{PERF_RECORDS * PERF_RECORD_SIZE / 2**20:.4f}", PERF_RECORDS)
    assert int(rebalance_ms) >= 0 and int(fetch_ms) >= 0
