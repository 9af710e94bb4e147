"""A deterministic simulation of transactions: the replication sim's cluster with the shipped
transaction coordinator on every broker, transactional producers and a read_committed consumer.

Everything ``replication_sim`` runs still runs (the controller core, three brokers with their
``ReplicaManager``, ``Partition``s, fetchers and disks, its faults and checks). On top
(``txn_broker``): ``__transaction_state`` (``TxnSettings.state_partitions`` partitions, RF 3,
created with ``transaction_topic_configs``) and on each broker the shipped
``TransactionCoordinatorShell`` on a simulated asyncio loop (``txn_loop``) — loading its
partitions when elected, appending its decisions with acks=-1, sending WriteTxnMarkers to the
leaders through the shipped handler, retrying, completing, timing transactions out. The
transactional producers and the consumer (``txn_client``, ``txn_consumer``) are the clients.

Faults (``txn_faults``): the replication sim's, plus lost and reordered WriteTxnMarkers
(``send_markers`` below), coordinator failover mid-commit and leader changes between EndTxn and
the markers.

After every event the invariants of ``txn_checks`` hold as well; after the fault phase
everything heals, the producers finish, and the run must quiesce: every transaction complete
at its coordinator, the last stable offset at the log end everywhere, the consumer caught up —
then atomicity and read_committed are checked over the converged logs.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from pykraft.coordinator.transaction.config import (
    TRANSACTION_STATE_TOPIC,
    TransactionConfig,
    partition_for,
    transaction_topic_configs,
)
from pykraft.coordinator.transaction.manager import PartitionStatus
from pykraft.coordinator.transaction.state import TransactionState
from pykraft.metadata.api.topics import CreatableTopicConfig
from pykraft.quorum.controller import CreatableTopic, CreateTopicsRequest
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_checks import PartitionKey, fail
from tests.sim.replication_faults import SLOW_LINK_EXTRA_MS
from tests.sim.replication_net import SimFuture, SimSettings
from tests.sim.replication_sim import BROKERS, TOPIC, ReplicationSimulation, SimulationFailure
from tests.sim.txn_broker import TxnSimBroker
from tests.sim.txn_checks import TxnChecker
from tests.sim.txn_client import TxnProducer
from tests.sim.txn_consumer import ReadCommittedConsumer
from tests.sim.txn_faults import TxnFaultInjector

__all__ = ["SimulationFailure", "TransactionSimulation", "TxnSettings"]

REPLAY = "PYKRAFT_SIM_SEED={seed} .venv/bin/pytest -q tests/sim/test_txn_sim.py"
FIRST_PRODUCER_ID = 1000
_SETTLED = frozenset(
    {TransactionState.EMPTY, TransactionState.COMPLETE_COMMIT, TransactionState.COMPLETE_ABORT}
)


@attrs.frozen(kw_only=True)
class TxnSettings:
    producers: int = 3
    state_partitions: int = 2
    # transaction.timeout.ms of the producers (Kafka's default is 60000).
    transaction_timeout_ms: int = 10_000
    # transaction.abort.timed.out.transaction.cleanup.interval.ms, scaled down from 10000.
    abort_scan_interval_ms: int = 2000
    marker_loss_probability: float = 0.05
    marker_jitter_ms: int = 1000
    # How often a decision draws a fault at its coordinator, and at a partition leader.
    coordinator_react_probability: float = 0.25
    leader_react_probability: float = 0.25


class _LogErrors(logging.Handler):
    """Errors the shipped code logs (a task that died, an append that raised) fail the run."""

    def __init__(self) -> None:
        super().__init__(logging.ERROR)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(f"{record.name}: {record.getMessage()} {record.exc_info or ''}")


class TransactionSimulation(ReplicationSimulation):
    broker_class = TxnSimBroker
    name = "transaction"
    replay_command = REPLAY
    brokers: dict[int, TxnSimBroker | None]  # type: ignore[assignment]
    checker: TxnChecker
    faults: TxnFaultInjector

    def __init__(
        self,
        seed: int,
        settings: SimSettings | None = None,
        txn: TxnSettings | None = None,
        *,
        crash_rule: bool = True,
    ) -> None:
        super().__init__(seed, settings, crash_rule=crash_rule)
        self.txn = txn or TxnSettings()
        # Invariant: a WriteTxnMarkers retry never overtakes its original (``txn_faults``).
        assert (
            self.txn.marker_jitter_ms + self.settings.max_delay_ms + SLOW_LINK_EXTRA_MS[1]
            < self.settings.request_timeout_ms
        ), "a marker could arrive after the coordinator sent it again"
        self.checker = TxnChecker(TOPIC, lambda: self.now_ms / 1000)
        self.faults = TxnFaultInjector(self, crash_rule=crash_rule)
        self.txn_config = TransactionConfig(
            transaction_state_log_num_partitions=self.txn.state_partitions,
            transaction_abort_timed_out_transaction_cleanup_interval_ms=(
                self.txn.abort_scan_interval_ms
            ),
            request_timeout_ms=self.settings.request_timeout_ms,
        )
        self.transaction_timeout_ms = self.txn.transaction_timeout_ms
        self.topic = TOPIC
        self.topic_partitions = self.settings.partitions
        self._next_producer_id = FIRST_PRODUCER_ID
        self.producers = [TxnProducer(self, index) for index in range(self.txn.producers)]
        self.consumer = ReadCommittedConsumer(self)
        self._log_errors = _LogErrors()

    # ------------------------------------------------------------------ running

    def run(self, steps: int) -> None:
        logger = logging.getLogger("pykraft")
        logger.addHandler(self._log_errors)
        try:
            super().run(steps)
        finally:
            logger.removeHandler(self._log_errors)

    def _start(self) -> None:
        super()._start()
        for producer in self.producers:
            producer.start()
        self.consumer.start()

    def _produce(self) -> None:
        """The replication sim's plain producer does not run: the topic is transactional."""

    def check_history(self, readers: Mapping[PartitionKey, int]) -> None:
        """No plain producer, no history of its own: ``TxnChecker.check_transactions`` judges
        the transactional clients' history (the topic's logs hold markers and aborted records,
        which only a read_committed read may skip)."""

    def run_on(
        self, broker_id: int, incarnation: int, what: str, action: Callable[[], None]
    ) -> None:
        """Every event of a broker runs with its asyncio loop as the running loop."""
        broker = self.brokers[broker_id]
        if broker is not None and broker.incarnation == incarnation:
            action = functools.partial(broker.loop.run, action)
        super().run_on(broker_id, incarnation, what, action)

    def partition_keys(self) -> list[PartitionKey]:
        state = [(TRANSACTION_STATE_TOPIC, p) for p in range(self.txn.state_partitions)]
        return [*super().partition_keys(), *state]

    def _controller_tick(self) -> None:
        unfenced = [b for b in self.image.cluster.brokers.values() if not b.fenced]
        if TRANSACTION_STATE_TOPIC not in self.image.topics.by_name and len(unfenced) == BROKERS:
            configs = transaction_topic_configs(self.txn_config)
            topic = CreatableTopic(
                TRANSACTION_STATE_TOPIC,
                self.txn.state_partitions,
                self.txn_config.transaction_state_log_replication_factor,
                configs=tuple(CreatableTopicConfig(k, v) for k, v in sorted(configs.items())),
            )
            self.commit(
                self.controller.handle(self.image, CreateTopicsRequest((topic,)), self.now_ms)
            )
        super()._controller_tick()

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        if self.checker.deferred:
            raise self.checker.deferred[0]
        super().check()
        if self._log_errors.messages:
            fail(f"the shipped code logged an error: {self._log_errors.messages[0]}")
        keys = [(TOPIC, partition) for partition in range(self.settings.partitions)]
        for broker in self.alive():
            assert isinstance(broker, TxnSimBroker)
            if broker.loop.errors:
                fail(broker.loop.errors[0])
            logs = broker.disk.logs
            for key in keys:
                log = logs.get(key)
                if log is not None:
                    self.checker.check_last_stable_offset(key, broker.broker_id, log)

    def unsettled(self) -> str | None:
        """What keeps the run from quiescing (None once it may): a transaction not complete at
        its coordinator, a partition not stable to its end, a producer still busy, the
        consumer behind."""
        for partition in range(self.txn.state_partitions):
            registration = self.registration((TRANSACTION_STATE_TOPIC, partition))
            leader = None if registration is None else self.brokers.get(registration.leader)
            if leader is None:
                return f"{TRANSACTION_STATE_TOPIC}-{partition} has no running leader"
            core = leader.coordinator.core
            owned = core.manager.partitions.get(partition)
            if owned is None or owned.status is not PartitionStatus.ACTIVE:
                return (
                    f"{TRANSACTION_STATE_TOPIC}-{partition} not loaded on broker {leader.broker_id}"
                )
            for metadata in core.manager.transactions.get(partition, {}).values():
                if metadata.pending_state is not None or metadata.state not in _SETTLED:
                    pending = metadata.pending_state
                    return (
                        f"{metadata.transactional_id} is {metadata.state.value} (pending: "
                        f"{pending and pending.value}) at its coordinator, broker "
                        f"{leader.broker_id}"
                    )
        for partition in range(self.settings.partitions):
            for broker_id in self.brokers:
                log = self.disks[broker_id].log((TOPIC, partition))
                if log.last_stable_offset != log.log_end_offset:
                    return (
                        f"{TOPIC}-{partition} on broker {broker_id}: last stable offset "
                        f"{log.last_stable_offset}, log end {log.log_end_offset}"
                    )
        busy = [p for p in self.producers if not p.idle]
        if busy:
            return f"producers still at work: {busy}"
        for partition in range(self.settings.partitions):
            end = self.disks[0].log((TOPIC, partition)).log_end_offset
            position = self.consumer.positions[partition]
            if position != end:
                return f"the consumer is at {position} of {TOPIC}-{partition}, its end is {end}"
        return None

    # ------------------------------------------------------------------ TxnBrokerEnv

    def allocate_producer_id(self) -> int:
        self._next_producer_id += 1
        return self._next_producer_id

    def on_decision(self, coordinator_id: int, partitions: Iterable[TopicPartition]) -> None:
        self.faults.on_decision(coordinator_id, partitions)

    def leader_epoch(self, topic_partition: TopicPartition) -> int:
        registration = self.registration((topic_partition.topic, topic_partition.partition))
        return -1 if registration is None else registration.leader_epoch

    def send_markers(
        self,
        broker: TxnSimBroker,
        target: int,
        body: bytes,
        on_answer: Callable[[bytes], None],
    ) -> bool:
        """WriteTxnMarkers from ``broker`` to ``target`` with the marker faults; False when the
        connection is refused (``target`` is not running)."""
        receiver = self.brokers[target]
        if receiver is None:
            return False
        source, incarnation = broker.broker_id, broker.incarnation
        target_incarnation = receiver.incarnation
        rng, txn, stats = self.rng, self.txn, self.checker.stats

        def reply(response: bytes) -> None:
            if rng.random() < txn.marker_loss_probability:
                stats["WriteTxnMarkers answers lost"] += 1
                return
            self.queue.after(
                rng.randint(0, txn.marker_jitter_ms),
                "WriteTxnMarkers answer leaves",
                lambda: self.network.send(
                    target,
                    source,
                    "WriteTxnMarkers answer",
                    lambda: self.run_on(
                        source, incarnation, "WriteTxnMarkers answer", lambda: on_answer(response)
                    ),
                ),
            )

        def arrive() -> None:
            leader = self.brokers[target]
            assert leader is not None
            leader.serve_write_txn_markers(body).on_done(lambda done: reply(done.value))

        if rng.random() < txn.marker_loss_probability:
            stats["WriteTxnMarkers requests lost"] += 1
            return True
        self.queue.after(
            rng.randint(0, txn.marker_jitter_ms),
            "WriteTxnMarkers leaves",
            lambda: self.network.send(
                source,
                target,
                "WriteTxnMarkers",
                lambda: self.run_on(target, target_incarnation, "WriteTxnMarkers", arrive),
            ),
        )
        return True

    # ------------------------------------------------------------------ ClientEnv

    def client_call(
        self,
        client: int,
        target: int,
        what: str,
        handle: Callable[[Any], Any],
        on_answer: Callable[[Any], None],
    ) -> None:
        """A client's request to a broker, answered over the network (refused when the broker
        is not running: the client's timeout ends the wait)."""
        receiver = self.brokers[target]
        if receiver is None:
            return
        incarnation = receiver.incarnation

        def reply(value: Any) -> None:
            self.network.send(target, client, f"{what} answer", lambda: on_answer(value))

        def answer() -> None:
            broker = self.brokers[target]
            assert broker is not None
            result = handle(broker)
            if isinstance(result, SimFuture):
                result.on_done(lambda done: reply(done.value))
            else:
                reply(result)

        self.network.send(
            client, target, what, lambda: self.run_on(target, incarnation, what, answer)
        )

    def coordinator_for(self, transactional_id: str) -> int | None:
        """FindCoordinator (key type 1): the leader of the id's ``__transaction_state``
        partition."""
        partition = partition_for(transactional_id, self.txn.state_partitions)
        registration = self.registration((TRANSACTION_STATE_TOPIC, partition))
        return None if registration is None or registration.leader < 0 else registration.leader

    def leader_for(self, partition: int) -> int | None:
        registration = self.registration((TOPIC, partition))
        return None if registration is None or registration.leader < 0 else registration.leader
