"""``pykraft transactions`` against the real cluster (3 brokers, RF 3), with confluent-kafka's
transactional producer and read_committed consumer: an operator finds a hanging transaction with
``find-hanging``, aborts it with ``abort``, and read_committed consumers get past it.

How a transaction is left hanging: a confluent-kafka producer commits a transaction, then a
late write of that producer (same id and epoch, the next sequence, a batch dated 20 minutes back
— a zombie's retry) reaches the partition after the commit. The coordinator's transaction for the
id is over and lists no partition, so nothing will ever end the write's transaction: the last
stable offset stays at it. KIP-890 part 1 closes this hole — the leader verifies the write with
the coordinator first and refuses it (INVALID_TXN_STATE), shown on the session cluster — so the
hanging transaction is made on a cluster of its own (1 controller, 1 broker) with
``transaction.partition.verification.enable=false``, as on a broker before Kafka 3.6.

A transaction its coordinator still lists is *not* hanging — the coordinator will end it — so
``find-hanging`` leaves out an open confluent-kafka transaction that was simply never committed
(Kafka's ``testFindHangingFilterByTransactionInProgressWithSamePartition``, live).
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from confluent_kafka import Consumer, IsolationLevel, Producer, TopicPartition
from confluent_kafka.admin import AdminClient
from confluent_kafka.admin._listoffsets import OffsetSpec
from confluent_kafka.cimpl import NewTopic
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from pykraft import cli
from pykraft.protocol.api_keys import ApiKey
from pykraft.storage.records import SimpleRecord, build_batch
from tests.clients.conftest import SESSION_ARGS, DevCluster
from tests.clients.support import _exchange, metadata, unique_topic

pytestmark = pytest.mark.clients
UNVERIFIED_ARGS = (
    *SESSION_ARGS,
    "--broker-property",
    "transaction.partition.verification.enable=false",
)
INVALID_TXN_STATE = 48

ROOT = Path(__file__).resolve().parents[2]
TIMEOUT_S = 30.0
MINUTE_MS = 60_000
LATE_BY_MS = 20 * MINUTE_MS  # older than find-hanging's default 15 minutes
FIND_HANGING_HEADERS = [
    "Topic", "Partition", "ProducerId", "ProducerEpoch", "CoordinatorEpoch", "StartOffset",
    "LastTimestamp", "Duration(min)",
]  # fmt: skip


def tool(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str], *argv: str
) -> tuple[int, list[list[str]]]:
    """``pykraft transactions --bootstrap-server ... argv``: exit status and the table's rows."""
    capsys.readouterr()
    status = cli.main(["transactions", "--bootstrap-server", cluster.bootstrap_servers, *argv])
    captured = capsys.readouterr()
    assert status == 0 or captured.err, "a failure says why on stderr"
    return status, [line.split("\t")[:-1] for line in captured.out.splitlines()]


def cells(rows: list[list[str]]) -> list[list[str]]:
    return [[cell.strip() for cell in row] for row in rows]


def create_topic(cluster: DevCluster, prefix: str) -> str:
    topic = unique_topic(prefix)
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    replicas = min(3, len(cluster.brokers))
    futures = admin.create_topics(
        [NewTopic(topic, num_partitions=1, replication_factor=replicas)], request_timeout=TIMEOUT_S
    )
    assert futures[topic].result(timeout=TIMEOUT_S) is None
    cluster.wait_for_topic(topic, 1)
    return topic


def transactional_producer(cluster: DevCluster, transactional_id: str) -> Producer:
    producer = Producer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "transactional.id": transactional_id,
            "transaction.timeout.ms": 900_000,  # transaction.max.timeout.ms: the coordinator waits
        }
    )
    producer.init_transactions(TIMEOUT_S)
    return producer


def last_stable_offset(cluster: DevCluster, topic: str) -> tuple[int, int]:
    """(read_committed latest = the LSO, read_uncommitted latest = the high watermark)."""
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap_servers})
    tp = TopicPartition(topic, 0)
    offsets = []
    for level in (IsolationLevel.READ_COMMITTED, IsolationLevel.READ_UNCOMMITTED):
        answers = admin.list_offsets(
            {tp: OffsetSpec.latest()},  # type: ignore[no-untyped-call]
            isolation_level=level,
            request_timeout=TIMEOUT_S,
        )
        offsets.append(answers[tp].result(timeout=TIMEOUT_S).offset)
    return offsets[0], offsets[1]


def late_write(
    cluster: DevCluster, topic: str, transactional_id: str, producer_id: int, epoch: int,
    sequence: int, expected_error: int = 0,
) -> int:  # fmt: skip
    """A transactional batch of the producer, dated ``LATE_BY_MS`` back, straight to the
    partition's leader (a zombie's Produce); returns its offset (-1 when refused)."""
    [answer] = metadata(cluster.broker_ports[0], [topic]).topics
    [partition] = answer.partitions
    batch = build_batch(
        [SimpleRecord(value=b"late", timestamp=int(time.time() * 1000) - LATE_BY_MS)],
        producer_id=producer_id,
        producer_epoch=epoch,
        base_sequence=sequence,
        is_transactional=True,
    )
    data = ProduceRequest.TopicProduceData
    request = ProduceRequest(
        version=8, transactional_id=transactional_id, acks=-1, timeout_ms=5000,
        topic_data=[data(name=topic, partition_data=[
            data.PartitionProduceData(index=0, records=batch)
        ])],
    )  # fmt: skip
    port = cluster.brokers[partition.leader_id][1]
    body = _exchange(port, ApiKey.PRODUCE, 8, bytes(request.encode(version=8)))
    [written] = ProduceResponse.decode(body, version=8).responses[0].partition_responses
    assert written.error_code == expected_error, written
    return int(written.base_offset)


def read_committed(cluster: DevCluster, topic: str, count: int) -> list[bytes]:
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap_servers,
            "group.id": f"txn-tool-{uuid.uuid4().hex[:8]}",
            "enable.auto.commit": False,
            "isolation.level": "read_committed",
        }
    )
    try:
        consumer.assign([TopicPartition(topic, 0, 0)])
        values: list[bytes] = []
        deadline = time.monotonic() + TIMEOUT_S
        while len(values) < count and time.monotonic() < deadline:
            record = consumer.poll(0.5)
            if record is not None:
                assert record.error() is None, record.error()
                value = record.value()
                assert isinstance(value, bytes)
                values.append(value)
        assert consumer.poll(1.0) is None, "more than the committed records"
        return values
    finally:
        consumer.close()


@pytest.fixture(scope="module")
def unverified(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """A cluster whose leaders do not verify transactional writes (KIP-890 off)."""
    dev = DevCluster(
        tmp_path_factory.mktemp("unverified") / "cluster", 1, 1, extra_args=UNVERIFIED_ARGS
    )
    try:
        dev.start()
        dev.wait_ready()
        yield dev
    finally:
        dev.stop()


def test_a_late_write_is_refused_when_leaders_verify_it(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """KIP-890 part 1, live: the zombie's write below is refused and nothing hangs."""
    topic = create_topic(cluster, "verified")
    transactional_id = f"verified-{uuid.uuid4().hex[:8]}"
    producer = transactional_producer(cluster, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    del producer
    status, rows = tool(cluster, capsys, "describe", "--transactional-id", transactional_id)
    [described] = cells(rows[1:])
    producer_id, epoch = int(described[2]), int(described[3])
    status, rows = tool(cluster, capsys, "describe-producers", "--topic", topic, "--partition", "0")
    [state] = [row for row in cells(rows[1:]) if row[0] == str(producer_id)]
    committed_end = last_stable_offset(cluster, topic)
    late_write(
        cluster, topic, transactional_id, producer_id, epoch, int(state[3]) + 1,
        expected_error=INVALID_TXN_STATE,
    )  # fmt: skip
    assert last_stable_offset(cluster, topic) == committed_end  # nothing written, nothing stuck
    status, rows = tool(cluster, capsys, "find-hanging", "--topic", topic)
    assert (status, cells(rows)) == (0, [FIND_HANGING_HEADERS])


def test_find_hanging_then_abort_lets_read_committed_consumers_past(
    unverified: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = unverified
    topic = create_topic(cluster, "hanging")
    transactional_id = f"hanging-{uuid.uuid4().hex[:8]}"
    producer = transactional_producer(cluster, transactional_id)
    producer.begin_transaction()
    producer.produce(topic, value=b"committed", partition=0)
    producer.commit_transaction(TIMEOUT_S)
    del producer  # the producer stops; its zombie's write arrives later

    status, rows = tool(cluster, capsys, "describe", "--transactional-id", transactional_id)
    assert status == 0
    [described] = cells(rows[1:])
    assert (described[1], described[4]) == (transactional_id, "CompleteCommit")
    assert described[8] == ""  # no partitions: the transaction is over
    producer_id, epoch = int(described[2]), int(described[3])

    status, rows = tool(cluster, capsys, "describe-producers", "--topic", topic, "--partition", "0")
    [state] = [row for row in cells(rows[1:]) if row[0] == str(producer_id)]
    assert state[5] == "None"  # no open transaction yet
    offset = late_write(cluster, topic, transactional_id, producer_id, epoch, int(state[3]) + 1)
    plain = Producer({"bootstrap.servers": cluster.bootstrap_servers})
    plain.produce(topic, value=b"after", partition=0)
    assert plain.flush(TIMEOUT_S) == 0
    assert last_stable_offset(cluster, topic) == (offset, offset + 2)  # stuck at the late write

    status, rows = tool(
        cluster, capsys, "find-hanging", "--topic", topic, "--max-transaction-timeout", "30"
    )
    assert (status, cells(rows)) == (0, [FIND_HANGING_HEADERS])  # younger than 30 minutes
    status, rows = tool(cluster, capsys, "find-hanging", "--topic", topic)
    assert status == 0 and cells(rows[:1]) == [FIND_HANGING_HEADERS]
    [hanging] = cells(rows[1:])
    assert hanging[:4] == [topic, "0", str(producer_id), str(epoch)]
    assert hanging[5] == str(offset) and hanging[7] == str(LATE_BY_MS // MINUTE_MS)
    leader = metadata(cluster.broker_ports[0], [topic]).topics[0].partitions[0].leader_id
    status, rows = tool(cluster, capsys, "find-hanging", "--broker-id", str(leader))
    assert hanging in cells(rows[1:])  # every topic with a replica on the broker

    status, _ = tool(cluster, capsys, "abort", "--topic", topic, "--partition", "0",
                     "--start-offset", str(offset))  # fmt: skip
    assert status == 0
    # the ABORT marker follows "after": the LSO passes both
    assert last_stable_offset(cluster, topic) == (offset + 3, offset + 3)
    assert read_committed(cluster, topic, 2) == [b"committed", b"after"]
    status, rows = tool(cluster, capsys, "find-hanging", "--topic", topic)
    assert (status, cells(rows)) == (0, [FIND_HANGING_HEADERS])


def test_an_open_transaction_its_coordinator_lists_is_not_hanging(
    cluster: DevCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    topic = create_topic(cluster, "open")
    transactional_id = f"open-{uuid.uuid4().hex[:8]}"
    producer = transactional_producer(cluster, transactional_id)
    producer.begin_transaction()
    five_minutes_ago = int(time.time() * 1000) - 5 * MINUTE_MS
    producer.produce(topic, value=b"open", partition=0, timestamp=five_minutes_ago)
    assert producer.flush(TIMEOUT_S) == 0
    try:
        status, rows = tool(cluster, capsys, "list")
        assert status == 0
        assert cells(rows[:1]) == [["TransactionalId", "Coordinator", "ProducerId",
                                    "TransactionState"]]  # fmt: skip
        [listed] = [row for row in cells(rows[1:]) if row[0] == transactional_id]
        assert listed[3] == "Ongoing"
        status, rows = tool(cluster, capsys, "describe", "--transactional-id", transactional_id)
        [described] = cells(rows[1:])
        assert (described[0], described[2]) == (listed[1], listed[2])  # coordinator, producer
        assert (described[4], described[8]) == ("Ongoing", f"{topic}-0")
        status, rows = tool(
            cluster, capsys, "describe-producers", "--topic", topic, "--partition", "0"
        )
        [state] = cells(rows[1:])
        assert (state[0], state[4], state[5]) == (listed[2], str(five_minutes_ago), "0")
        status, rows = tool(
            cluster, capsys, "find-hanging", "--topic", topic, "--max-transaction-timeout", "1"
        )
        assert (status, cells(rows)) == (0, [FIND_HANGING_HEADERS])
    finally:
        producer.abort_transaction(TIMEOUT_S)
    # EndTxn answers once PrepareAbort is written; the markers complete it after.
    deadline = time.monotonic() + TIMEOUT_S
    while True:
        status, rows = tool(cluster, capsys, "describe", "--transactional-id", transactional_id)
        current = cells(rows[1:])[0][4]
        if current == "CompleteAbort" or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert current == "CompleteAbort"


def test_the_command_line_entry_point(cluster: DevCluster) -> None:
    """``python -m pykraft.cli transactions``: an unknown id fails with Kafka's message, exit 1."""
    done = subprocess.run(
        [sys.executable, "-m", "pykraft.cli", "transactions", "--bootstrap-server",
         cluster.bootstrap_servers, "describe", "--transactional-id", "no-such-id"],
        capture_output=True, text=True, timeout=TIMEOUT_S * 2, cwd=ROOT,
        env=dict(os.environ, PYTHONPATH=str(ROOT)),
    )  # fmt: skip
    assert done.returncode == 1, done
    assert done.stdout == ""
    assert done.stderr.strip() == (
        "Failed to describe transaction state of transactional-id `no-such-id`: "
        "TRANSACTIONAL_ID_NOT_FOUND"
    )
