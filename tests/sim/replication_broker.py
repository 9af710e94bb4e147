"""One broker process of the replication sim: lifecycle, metadata, partitions, produce.

A ``SimBroker`` is one incarnation (process start) of a broker id; its ``BrokerDisk`` outlives
it. It does what ``broker.server.BrokerServer`` does, on simulated time, around the shipped
``broker.replica_manager.ReplicaManager`` (its disk, fetcher threads and produce futures replaced
by the I/O doubles of ``replication_doubles``):

* registers with a fresh incarnation id and heartbeats (``broker.heartbeat.heartbeat_decision``
  drives the ``broker.lifecycle`` states), asking to stay fenced until it serves;
* long-polls the metadata log and replays it into a ``MetadataDelta``; once a heartbeat says it
  caught up with its own registration (RECOVERY) it publishes the whole image and from then on
  every new batch: ``ReplicaManager.apply_delta(local_changes(...))`` (leaders, followers, and
  their hand-off to the shipped ``ReplicaFetcher``s);
* hosts, through ``ReplicaManager``, ``broker.partition.Partition`` objects over the disk's
  ``MemoryLog``s, with AlterPartition through ``SimAlterPartitionManager``;
* keeps ``ReplicaManager``'s one timer (``SimTimer``) at its core's next deadline, so the ISR
  expiration (every replica.lag.time.max.ms / 2) and the produces' deadlines come from
  ``ReplicaManager.tick``; flushes logs on a seeded schedule (the page cache's writeback) and
  writes the high-watermark checkpoint every replica.high.watermark.checkpoint.interval.ms;
* takes acks=all produce requests through ``ReplicaManager.append_to_local_log`` and waits for
  them in the shipped ``ProducePurgatory`` (``SimDelayedProduces``), which ``ReplicaManager``
  re-checks on every high-watermark move; an ack counts when the broker decides it.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from typing import Any, Protocol, TypeVar, cast

import attrs

from broker.controller_client import HeartbeatReply
from broker.delayed_produce import DelayedProduces
from broker.heartbeat import STARTING_HEARTBEAT_DELAY_MS, heartbeat_decision
from broker.lifecycle import BrokerLifecycle, BrokerState
from broker.partition import Partition
from broker.replica_manager import ReplicaManager
from metadata.delta import MetadataDelta
from metadata.image import MetadataImage
from metadata.local_changes import local_changes
from metadata.records import MetadataRecord, uuid_to_kafka_string
from protocol.errors import Errors
from quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from storage.log_manager import LogManager
from storage.topic_partition import TopicPartition
from tests.sim.replication_checks import Checker, PartitionKey
from tests.sim.replication_doubles import (
    PendingProduce,
    SimDelayedProduces,
    SimFetcherManager,
    SimLogManager,
    SimTimer,
    key_of,
)
from tests.sim.replication_leader import SimAlterPartitionManager
from tests.sim.replication_log import BrokerDisk, client_batch
from tests.sim.replication_net import SimSettings

T = TypeVar("T")


@attrs.frozen
class MetadataFetch:
    """``GET /v1/metadata/records?from=``: the records from ``from_offset`` on."""

    from_offset: int


@attrs.frozen
class MetadataPage:
    records: tuple[tuple[int, MetadataRecord], ...]


class BrokerEnv(Protocol):
    """What a broker needs from the simulation around it."""

    rng: random.Random
    settings: SimSettings
    checker: Checker

    @property
    def now_ms(self) -> int: ...

    def schedule(self, broker: SimBroker, delay_ms: int, what: str,
                 action: Callable[[], None]) -> None: ...

    def call_controller(self, broker: SimBroker, what: str, request: Any,
                        on_answer: Callable[[Any], None]) -> None: ...

    def call_broker(self, broker: SimBroker, target: int, what: str,
                    handle: Callable[[SimBroker], T], on_answer: Callable[[T], None]) -> None: ...

    def on_clean_shutdown(self, broker: SimBroker) -> None: ...


def incarnation_id(broker_id: int, incarnation: int) -> str:
    return uuid_to_kafka_string(((broker_id + 1) << 64 | incarnation).to_bytes(16, "big"))


class SimBroker:
    def __init__(self, env: BrokerEnv, broker_id: int, incarnation: int,
                 disk: BrokerDisk) -> None:
        self.env = env
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.disk = disk
        self.lifecycle = BrokerLifecycle()
        self.lifecycle.become(BrokerState.STARTING)
        self.broker_epoch = -1
        # The metadata read so far (published to ReplicaManager once serving).
        self.loaded = MetadataImage.EMPTY
        self.serving = False
        self.alter_partitions = SimAlterPartitionManager(self)
        self.fetcher_manager = SimFetcherManager(self)
        self.delayed_produces = SimDelayedProduces(env.checker)
        self._heartbeat = 0
        self._had_shutdown_reply = False
        self._metadata_poll = 0
        settings = env.settings
        self.replica_manager = ReplicaManager(
            broker_id=broker_id,
            log_manager=cast(LogManager, SimLogManager(disk)),
            fetcher_manager=self.fetcher_manager,
            delayed_produces=cast(DelayedProduces, self.delayed_produces),
            alter_partition=self.alter_partitions,
            min_insync_replicas=settings.min_insync_replicas,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            monotonic_ms=lambda: self.env.now_ms,
            timer=lambda on_due: SimTimer(self, on_due),
        )
        self.schedule(0, "heartbeat", self._heartbeat_now)
        self.schedule(0, "metadata poll", self._poll_metadata)
        self._flush_interval_ms = env.rng.randint(200, 4000)
        self.schedule(self._flush_interval_ms, "flush", self._flush)
        # Out of phase between brokers and restarts, as the timers of separate processes are.
        self.schedule(env.rng.randint(1, settings.high_watermark_checkpoint_interval_ms),
                      "hw checkpoint", self._checkpoint)

    def __repr__(self) -> str:
        return (f"SimBroker({self.broker_id}#{self.incarnation}, {self.lifecycle.state.name}, "
                f"epoch {self.broker_epoch}, metadata {self.loaded.offset})")

    @property
    def partitions(self) -> dict[PartitionKey, Partition]:
        """The partitions ``ReplicaManager`` hosts, by the sim's key."""
        return {key_of(tp): partition for tp, partition in self.replica_manager.partitions.items()}

    # ------------------------------------------------------------------ the environment

    def schedule(self, delay_ms: int, what: str, action: Callable[[], None]) -> None:
        self.env.schedule(self, delay_ms, what, action)

    def call_controller(self, what: str, request: Any, on_answer: Callable[[Any], None]) -> None:
        self.env.call_controller(self, what, request, on_answer)

    def call_broker(self, target: int, what: str, handle: Callable[[SimBroker], T],
                    on_answer: Callable[[T], None]) -> None:
        self.env.call_broker(self, target, what, handle, on_answer)

    # ------------------------------------------------------------------ lifecycle

    def _heartbeat_now(self) -> None:
        """Register, or heartbeat; a lost request or answer is retried after the interval."""
        self._heartbeat += 1
        number = self._heartbeat
        if self.broker_epoch < 0:
            self.call_controller(
                "BrokerRegistration",
                BrokerRegistrationRequest(self.broker_id,
                                          incarnation_id(self.broker_id, self.incarnation)),
                lambda answer: self._on_registration(number, answer))
        else:
            self.call_controller(
                "BrokerHeartbeat",
                BrokerHeartbeatRequest(
                    self.broker_id, self.broker_epoch, self.loaded.offset,
                    want_fence=not self.serving,
                    want_shut_down=self.lifecycle.state is BrokerState.PENDING_CONTROLLED_SHUTDOWN),
                lambda answer: self._on_heartbeat(number, answer))
        self._next_heartbeat(self.env.settings.broker_heartbeat_interval_ms, number)

    def _next_heartbeat(self, delay_ms: int, number: int) -> None:
        def send() -> None:
            if number == self._heartbeat:
                self._heartbeat_now()
        self.schedule(delay_ms, "heartbeat", send)

    def _on_registration(self, number: int, answer: BrokerRegistrationResponse) -> None:
        if number != self._heartbeat:
            return
        self._heartbeat += 1
        if answer.error.is_success():
            self.broker_epoch = answer.broker_epoch
            self._next_heartbeat(STARTING_HEARTBEAT_DELAY_MS, self._heartbeat)
        else:  # DUPLICATE_BROKER_REGISTRATION while the last incarnation's session lives
            self.env.checker.stats[f"registrations refused ({answer.error.error.name})"] += 1
            self._next_heartbeat(self.env.settings.broker_heartbeat_interval_ms, self._heartbeat)

    def _on_heartbeat(self, number: int, answer: BrokerHeartbeatResponse) -> None:
        if number != self._heartbeat:
            return
        self._heartbeat += 1
        interval_ms = self.env.settings.broker_heartbeat_interval_ms
        if answer.error.is_failure():
            self._next_heartbeat(interval_ms, self._heartbeat)
            return
        state = self.lifecycle.state
        reply = HeartbeatReply(is_caught_up=answer.is_caught_up, is_fenced=answer.is_fenced,
                               in_controlled_shutdown=answer.in_controlled_shutdown,
                               should_shut_down=answer.should_shut_down)
        decision = heartbeat_decision(state, reply, interval_ms, self._had_shutdown_reply)
        if state is BrokerState.PENDING_CONTROLLED_SHUTDOWN:
            self._had_shutdown_reply = True
        if decision.target is not None:
            self.lifecycle.become(decision.target)
        if decision.target is BrokerState.RECOVERY:
            self._install_publisher()
        if decision.target is BrokerState.SHUTTING_DOWN:
            self.env.on_clean_shutdown(self)
            return
        self._next_heartbeat(decision.next_heartbeat_ms, self._heartbeat)

    def begin_controlled_shutdown(self) -> None:
        """SIGTERM: a controlled shutdown from RUNNING, else stop at once."""
        if not self.lifecycle.maybe_begin_shutdown():
            return
        if self.lifecycle.state is BrokerState.SHUTTING_DOWN:
            self.env.on_clean_shutdown(self)
            return
        self._heartbeat += 1
        self._heartbeat_now()

    def close(self) -> None:
        """Clean shutdown's storage half: flush every log, checkpoint high watermarks."""
        self.disk.flush()
        self.disk.checkpoint_high_watermarks()

    # ------------------------------------------------------------------ metadata

    def _poll_metadata(self) -> None:
        self._metadata_poll += 1
        number = self._metadata_poll
        self.call_controller("MetadataFetch", MetadataFetch(self.loaded.offset + 1),
                             lambda page: self._on_metadata(number, page))

        def again() -> None:
            if number == self._metadata_poll:
                self._poll_metadata()
        self.schedule(self.env.settings.request_timeout_ms, "metadata poll timeout", again)

    def _on_metadata(self, number: int, page: MetadataPage) -> None:
        if number != self._metadata_poll:
            return
        new = [(offset, record) for offset, record in page.records if offset > self.loaded.offset]
        if new:
            delta = MetadataDelta(self.loaded)
            for offset, record in new:
                delta.replay(record, offset, 1)
            self.loaded = delta.apply()
            if self.serving:
                self._publish(delta, self.loaded)
        self._metadata_poll += 1
        number = self._metadata_poll

        def again() -> None:
            if number == self._metadata_poll:
                self._poll_metadata()
        interval = self.env.settings.metadata_poll_interval_ms
        self.schedule(self.env.rng.randint(interval // 4, interval), "metadata poll", again)

    def _install_publisher(self) -> None:
        """``BrokerServer._install_publisher``: the whole image first, then every batch."""
        self.serving = True
        self._publish(MetadataDelta.between(MetadataImage.EMPTY, self.loaded), self.loaded)

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """``BrokerServer``'s publisher: ``ReplicaManager.apply_delta`` (the sim never deletes
        topics); each new leader epoch taken here is reported to the checker."""
        changes = local_changes(delta, self.broker_id)
        assert not changes.deletes, f"unexpected deletes {changes.deletes}"
        before = {key: p.leader_epoch for key, p in self.partitions.items()}
        self.replica_manager.apply_delta(changes, image, self.env.now_ms)
        for key in sorted(changes.leaders):
            partition = self.partitions.get((key.topic, key.partition))
            if partition is None or not partition.is_leader:
                continue
            if partition.leader_epoch != before.get((key.topic, key.partition)):
                self.env.checker.on_become_leader((key.topic, key.partition), self.broker_id,
                                                  partition.leader_epoch)

    # ------------------------------------------------------------------ timers

    def _flush(self) -> None:
        for key in sorted(self.disk.logs):
            if self.env.rng.random() < 0.5:
                self.disk.logs[key].flush()
        self.schedule(self._flush_interval_ms, "flush", self._flush)

    def _checkpoint(self) -> None:
        self.disk.checkpoint_high_watermarks()
        self.schedule(self.env.settings.high_watermark_checkpoint_interval_ms, "hw checkpoint",
                      self._checkpoint)

    # ------------------------------------------------------------------ produce

    def handle_produce(self, key: PartitionKey, values: tuple[str, ...]) -> None:
        """An acks=all produce: ``ReplicaManager.append_to_local_log``, then wait as
        ``ReplicaManager.append_records`` does."""
        if not self.serving:
            return  # NOT_LEADER_OR_FOLLOWER until the metadata is published
        topic_partition, now_ms = TopicPartition(*key), self.env.now_ms
        result = self.replica_manager.append_to_local_log(
            {topic_partition: client_batch(values)}, required_acks=-1, now_ms=now_ms
        )[topic_partition]
        if result.error is not Errors.NONE:
            return  # NOT_LEADER_OR_FOLLOWER, NOT_ENOUGH_REPLICAS
        self.env.checker.on_leader_append(key, self.disk.log(key).batches[-1])
        produce = PendingProduce(key, result.base_offset, result.last_offset + 1, values,
                                 now_ms + self.env.settings.produce_timeout_ms)
        self.delayed_produces.watch(produce, self.replica_manager.check_enough_replicas)
