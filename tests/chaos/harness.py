"""The chaos harness: a real cluster (3 controllers, 3 brokers), a workload, and faults.

* ``ChaosCluster`` runs the controllers of ``tests.integration.conftest.Cluster`` and the broker
  processes of ``tests.integration.test_broker_process`` on free 127.0.0.1 ports, and adds what
  fault injection needs: kill -9, SIGSTOP/SIGCONT, SIGTERM, restart, and waits on the admin API
  (leaders, ISR) and each broker's ``/v1/partitions`` (log end offsets, high watermarks).
* ``Workload`` runs an idempotent kafka-python producer (``acks=all``, unique values) and a
  consumer in two threads, recording every send and poll as a history in Jepsen's terms
  (``tests.chaos.history``), which ``tests.chaos.history_checker`` judges.

Timeouts are lowered to keep runs short, and said so here: the controllers fence a broker after
``broker.session.timeout.ms`` = 3000 (Kafka: 9000) with heartbeats every 500 ms (Kafka: 2000);
followers leave the ISR after ``replica.lag.time.max.ms`` = 3000 (Kafka: 30000). For the
transactions test, ``__transaction_state`` has 5 partitions (Kafka: 50; fewer to create and to
load on every failover) and the coordinators look for timed-out transactions every 1000 ms
(``transaction.abort.timed.out.transaction.cleanup.interval.ms``; Kafka: 10000).
"""

from __future__ import annotations

import signal
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from kafka import KafkaConsumer, KafkaProducer, TopicPartition
from kafka.protocol.producer.produce import ProduceRequest, ProduceResponse

from pykraft.protocol.api_keys import ApiKey
from tests.broker.wire_client import blocking_exchange, request_frame
from tests.chaos.checker import Placed, encode_value
from tests.chaos.history import Op, OpType, Poll, Recorder, Send
from tests.integration.conftest import Cluster, HttpError, http
from tests.integration.test_broker_process import BrokerProcess

SESSION_TIMEOUT_MS = 3000
HEARTBEAT_INTERVAL_MS = 500
CONTROLLER_PROPERTIES = {
    "broker.session.timeout.ms": str(SESSION_TIMEOUT_MS),
    "broker.heartbeat.interval.ms": str(HEARTBEAT_INTERVAL_MS),
}
TRANSACTION_STATE_PARTITIONS = 5
# The controllers enforce the session; the brokers' copies (last line wins) say the same.
BROKER_PROPERTIES = {
    **CONTROLLER_PROPERTIES,
    "replica.lag.time.max.ms": "3000",
    "replica.fetch.wait.max.ms": "200",
    "replica.fetch.backoff.ms": "200",
    "transaction.state.log.num.partitions": str(TRANSACTION_STATE_PARTITIONS),
    "transaction.abort.timed.out.transaction.cleanup.interval.ms": "1000",
}
BROKER_IDS = (10, 11, 12)
CONVERGE_TIMEOUT_S = 45.0
POLL_S = 0.1
# Bounds on the workload (STYLE.md §7): outstanding sends, and the pace of the producer.
OUTSTANDING_SENDS_MAX = 200
SEND_INTERVAL_S = 0.004


class ChaosBroker(BrokerProcess):
    """A broker process that can also be paused (SIGSTOP) and resumed (SIGCONT)."""

    def __init__(self, root: Path, node_id: int, controller_url: str) -> None:
        super().__init__(root, node_id, controller_url)
        self.data_dir = root / f"broker-{node_id}"
        self.paused = False
        with self.config_path.open("a") as config:
            config.writelines(f"{key}={value}\n" for key, value in BROKER_PROPERTIES.items())

    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def pause(self) -> None:
        assert self.process is not None and self.alive()
        self.process.send_signal(signal.SIGSTOP)
        self.paused = True

    def resume(self) -> None:
        if self.paused and self.alive():
            assert self.process is not None
            self.process.send_signal(signal.SIGCONT)
        self.paused = False

    def kill(self) -> None:
        super().kill()  # SIGKILL ends a stopped process too
        self.paused = False

    def partitions(self, topic: str) -> dict[int, dict[str, Any]]:
        """``/v1/partitions`` rows of ``topic`` by partition ({} while down or paused)."""
        if self.paused:
            return {}
        try:
            rows = http(
                "GET",
                self.http_url + f"/v1/partitions?topic={topic}",
                timeout=2,
                headers=self.http_headers,
            )
        except (OSError, HttpError):
            return {}
        return {row["partition"]: row for row in rows["partitions"]}


class ChaosCluster:
    def __init__(self, root: Path) -> None:
        self.root = root
        self.controllers = Cluster(root / "controllers", 3, CONTROLLER_PROPERTIES)
        url = self.controllers.controllers[0].url
        self.brokers = [ChaosBroker(root, node_id, url) for node_id in BROKER_IDS]
        # Every broker knows every controller (it follows NOT_CONTROLLER to the leader).
        voters = ",".join(c.url.removeprefix("http://") for c in self.controllers.controllers)
        for broker in self.brokers:
            text = broker.config_path.read_text()
            broker.config_path.write_text(
                text.replace(
                    f"controller.quorum.bootstrap.servers={url.removeprefix('http://')}",
                    f"controller.quorum.bootstrap.servers={voters}",
                )
            )

    # ------------------------------------------------------------------ processes

    def start(self) -> None:
        self.controllers.start()
        self.controllers.wait_for_leader()
        for broker in self.brokers:
            broker.start()
        for broker in self.brokers:
            broker.wait_running()

    def stop(self) -> None:
        for broker in self.brokers:
            broker.kill()
        for controller in self.controllers.controllers:
            controller.kill()

    def broker(self, node_id: int) -> ChaosBroker:
        return next(b for b in self.brokers if b.node_id == node_id)

    def restart(self, broker: ChaosBroker) -> None:
        assert not broker.alive()
        broker.start()
        broker.wait_running()

    def ensure_running(self) -> None:
        """Resume paused brokers, start dead ones, and wait until all are RUNNING."""
        for broker in self.brokers:
            broker.resume()
            if not broker.alive():
                broker.start()
        for broker in self.brokers:
            broker.wait_running()

    @property
    def bootstrap_servers(self) -> list[str]:
        return [b.bootstrap for b in self.brokers]

    # ------------------------------------------------------------------ admin API

    def request(self, method: str, path: str, body: Any = None) -> Any:
        """Through the active controller, so a read follows the write before it."""
        leader = self.controllers.wait_for_leader()
        return self.controllers.request(method, path, body, via=leader)

    def create_topic(
        self,
        name: str,
        partitions: int,
        replication_factor: int = 3,
        configs: dict[str, str] | None = None,
        assignments: dict[str, list[int]] | None = None,
    ) -> None:
        body: dict[str, Any] = {"name": name, "configs": configs or {}}
        if assignments:
            body["assignments"] = assignments
        else:
            body.update(partitions=partitions, replication_factor=replication_factor)
        self.request("POST", "/v1/topics", body)
        self.eventually(
            lambda: all(p["leader"] >= 0 for p in self.topic(name)), f"{name} has leaders"
        )
        self.eventually(lambda: self.in_sync(name), f"every replica of {name} is in sync")

    def topic(self, name: str) -> list[dict[str, Any]]:
        """The partitions of ``name`` as the admin API describes them (leader, epoch, ISR)."""
        partitions: list[dict[str, Any]] = self.request("GET", f"/v1/topics/{name}")["partitions"]
        return partitions

    def leaders(self, name: str) -> dict[int, int]:
        return {p["partition"]: p["leader"] for p in self.topic(name)}

    # ------------------------------------------------------------------ replica state

    def in_sync(self, name: str) -> bool:
        """Every replica is in the ISR, and all have the same log end offset and high
        watermark, equal to each other (nothing left to replicate or to commit)."""
        partitions = self.topic(name)
        views = {b.node_id: b.partitions(name) for b in self.brokers}
        for partition in partitions:
            if partition["leader"] < 0 or sorted(partition["isr"]) != sorted(partition["replicas"]):
                return False
            rows = [views[r].get(partition["partition"]) for r in partition["replicas"]]
            if any(row is None for row in rows):
                return False
            ends = {(row["log_end_offset"], row["high_watermark"]) for row in rows if row}
            if len(ends) != 1 or len({*next(iter(ends))}) != 1:
                return False
        return True

    def eventually(
        self, condition: Callable[[], bool], what: str, timeout_s: float = CONVERGE_TIMEOUT_S
    ) -> float:
        """Poll ``condition`` until true; returns the seconds it took."""
        start = time.monotonic()
        while not condition():
            if time.monotonic() - start > timeout_s:
                raise AssertionError(f"{what}: not within {timeout_s}s\n{self.describe()}")
            time.sleep(POLL_S)
        return time.monotonic() - start

    def describe(self) -> str:
        """Process states and log tails, for a failure message."""
        lines = []
        for broker in self.brokers:
            state = "paused" if broker.paused else ("alive" if broker.alive() else "dead")
            lines.append(f"--- broker {broker.node_id} ({state})\n{broker.log_tail(20)}")
        for controller in self.controllers.controllers:
            lines.append(f"--- controller {controller.node_id}\n{controller.log_tail(10)}")
        return "\n".join(lines)


class Workload:
    """A producer and a consumer of ``topic`` in two threads, until ``stop()``, recording every
    operation in a history (``tests.chaos.history``): each send (invoked, then ok with where it
    landed, fail if the client refused it, info if no acknowledgement came) and each poll."""

    def __init__(self, bootstrap_servers: list[str], topic: str, partitions: int) -> None:
        self.topic = topic
        self.partitions = partitions
        self.bootstrap_servers = bootstrap_servers
        self.recorder = Recorder(wall=time.time, monotonic=time.monotonic)
        self.failures: list[str] = []
        self._sent = 0
        self._acknowledged = 0
        self._lock = threading.Lock()
        self._outstanding = threading.BoundedSemaphore(OUTSTANDING_SENDS_MAX)
        self._stop = threading.Event()
        self._threads = [
            threading.Thread(target=self._produce, name="chaos-producer"),
            threading.Thread(target=self._consume, name="chaos-consumer"),
        ]

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def stop(self) -> None:
        self._stop.set()
        for thread in self._threads:
            thread.join(60)
            assert not thread.is_alive(), f"{thread.name} did not stop"

    def acknowledged_count(self) -> int:
        with self._lock:
            return self._acknowledged

    def history(self, final_log: Mapping[int, Sequence[Placed]]) -> list[Op]:
        """The run's history, closed by a read of every partition's final log (once: asked
        again with the same log, the same history)."""
        self.recorder.final_read(
            {k: [Poll(p.partition, p.offset, p.value) for p in log] for k, log in final_log.items()}
        )
        return self.recorder.history()

    def _produce(self) -> None:
        producer = KafkaProducer(
            bootstrap_servers=self.bootstrap_servers,
            acks="all",
            # Idempotent (kafka-python 3's default): up to 5 requests in flight, kept in order
            # and free of retry duplicates by the brokers' producer state (KIP-98).
            enable_idempotence=True,
            max_in_flight_requests_per_connection=5,
            linger_ms=5,
            request_timeout_ms=4000,
            delivery_timeout_ms=30_000,
            retry_backoff_ms=100,
            reconnect_backoff_max_ms=1000,
            max_block_ms=2000,
            metadata_max_age_ms=5000,
        )
        try:
            while not self._stop.is_set():
                if not self._outstanding.acquire(timeout=0.5):
                    continue
                value = encode_value(self._sent)
                self._sent += 1
                # The partitioner chooses the partition inside send(): unknown until acknowledged.
                invocation = self.recorder.invoke("producer", "send", [Send(None, value)])
                try:
                    future = producer.send(self.topic, value=value)
                except Exception as error:  # metadata unavailable: the send never happened
                    self._outstanding.release()
                    self.recorder.complete(invocation, OpType.FAIL)
                    self._failed(value, error)
                    continue
                future.add_callback(self._acknowledged_at, invocation)
                future.add_errback(self._send_failed, invocation)
                time.sleep(SEND_INTERVAL_S)
            producer.flush(timeout=40)
        finally:
            producer.close(timeout=10)

    def _acknowledged_at(self, invocation: Op, metadata: Any) -> None:
        [send] = invocation.sends
        landed = Send(metadata.partition, send.value, metadata.offset)
        self.recorder.complete(invocation, OpType.OK, [landed])
        with self._lock:
            self._acknowledged += 1
        self._outstanding.release()

    def _send_failed(self, invocation: Op, error: BaseException) -> None:
        # Given up on (delivery timeout): it may have been written all the same.
        self.recorder.complete(invocation, OpType.INFO)
        self._failed(invocation.sends[0].value, error)
        self._outstanding.release()

    def _failed(self, value: bytes, error: BaseException) -> None:
        with self._lock:
            self.failures.append(f"{value.decode()}: {type(error).__name__}")

    def _consume(self) -> None:
        consumer = KafkaConsumer(
            bootstrap_servers=self.bootstrap_servers,
            group_id=None,
            enable_auto_commit=False,
            auto_offset_reset="earliest",
            fetch_max_wait_ms=200,
            request_timeout_ms=5000,
            reconnect_backoff_max_ms=1000,
            metadata_max_age_ms=5000,
        )
        try:
            consumer.assign([TopicPartition(self.topic, p) for p in range(self.partitions)])
            while not self._stop.is_set():
                invocation = self.recorder.invoke("consumer", "poll")
                records = consumer.poll(timeout_ms=200)
                self.recorder.complete(
                    invocation,
                    OpType.OK,
                    [
                        Poll(tp.partition, m.offset, m.value)
                        for tp, messages in records.items()
                        for m in messages
                    ],
                )
        finally:
            consumer.close()


def read_to_end(
    bootstrap_servers: list[str], topic: str, partitions: int, timeout_s: float = 30.0
) -> dict[int, list[Placed]]:
    """Every record of every partition, read from the current leaders up to the high
    watermark (the end offset a consumer sees)."""
    consumer = KafkaConsumer(
        bootstrap_servers=bootstrap_servers,
        group_id=None,
        enable_auto_commit=False,
        auto_offset_reset="earliest",
        fetch_max_wait_ms=200,
        request_timeout_ms=5000,
    )
    try:
        assigned = [TopicPartition(topic, p) for p in range(partitions)]
        consumer.assign(assigned)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(assigned)
        log: dict[int, list[Placed]] = {p: [] for p in range(partitions)}
        deadline = time.monotonic() + timeout_s
        while any(consumer.position(tp) < ends[tp] for tp in assigned):
            assert time.monotonic() < deadline, f"could not read {topic} to {ends}"
            for tp, messages in consumer.poll(timeout_ms=500).items():
                log[tp.partition].extend(
                    Placed(tp.partition, m.offset, m.value) for m in messages if m.offset < ends[tp]
                )
        return log
    finally:
        consumer.close()


def produce(
    bootstrap_servers: list[str],
    topic: str,
    values: list[bytes],
    *,
    acks: int | str = "all",
    partition: int | None = None,
) -> list[Placed]:
    """Send ``values`` and wait for every acknowledgement; returns where each landed."""
    producer = KafkaProducer(
        bootstrap_servers=bootstrap_servers,
        acks=acks,
        # kafka-python requires acks=all for idempotence.
        enable_idempotence=acks == "all",
        linger_ms=2,
        request_timeout_ms=4000,
        delivery_timeout_ms=20_000,
    )
    try:
        futures = [producer.send(topic, value=value, partition=partition) for value in values]
        producer.flush(timeout=30)
        return [
            Placed(m.partition, m.offset, value)
            for value, m in zip(values, (f.get(timeout=1) for f in futures), strict=True)
        ]
    finally:
        producer.close(timeout=10)


def raw_produce(
    port: int, topic: str, partition: int, batch: bytes, acks: int = -1
) -> tuple[int, int]:
    """One Produce v8 request straight to one broker (no client metadata, no retries);
    returns the partition's (error_code, base_offset)."""
    version = 8
    request = ProduceRequest(
        version=version, transactional_id=None, acks=acks, timeout_ms=5000,
        topic_data=[ProduceRequest.TopicProduceData(name=topic, partition_data=[
            ProduceRequest.TopicProduceData.PartitionProduceData(index=partition, records=batch),
        ])],
    )  # fmt: skip
    frame = request_frame(ApiKey.PRODUCE, version, 1, bytes(request.encode(version=version)))
    [answer] = blocking_exchange(port, frame)
    response = ProduceResponse.decode(answer[4:], version=version)  # header v0: correlation id
    [partition_response] = response.responses[0].partition_responses
    return partition_response.error_code, partition_response.base_offset
