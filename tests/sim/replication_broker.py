"""One broker process of the replication sim: lifecycle, metadata, partitions, produce.

A ``SimBroker`` is one incarnation (process start) of a broker id; its ``BrokerDisk`` outlives
it. It is transport: it carries the inputs and outputs of the shipped cores and shells that
``broker.server.BrokerServer`` composes, on simulated time, with the disk, fetcher threads and
timer replaced by the I/O doubles of ``replication_doubles`` (the delayed fetches' futures by
``replication_leader.SimDelayedFetches``):

* the shipped ``broker.lifecycle_core.LifecycleCore`` decides registration (a fresh incarnation
  id), heartbeats (asking to stay fenced until it serves), when to publish metadata and the
  controlled shutdown; the sim sends what it asks over the simulated network, drops answers that
  a newer request overtook, and schedules the next request after the delay it returns;
* long-polls the metadata log and hands each answer to the shipped
  ``broker.metadata_loader.MetadataLoader`` (``on_page``: replay, initial catch-up, publishing);
  the shipped ``broker.metadata_publisher.BrokerMetadataPublisher`` applies the whole image when
  the lifecycle core says so and from then on every image the loader publishes
  (``ReplicaManager.apply_delta``: leaders, followers, and their hand-off to the shipped
  ``ReplicaFetcher``s);
* hosts, through ``ReplicaManager``, ``broker.partition.Partition`` objects over the disk's
  ``PartitionLog``s, with AlterPartition through ``SimAlterPartitionManager``;
* keeps ``ReplicaManager``'s one timer (``SimTimer``) at its core's next deadline, so the
  high-watermark checkpoint (every replica.high.watermark.checkpoint.interval.ms), the ISR
  expiration (every replica.lag.time.max.ms / 2) and the produces' deadlines come from
  ``ReplicaManager.tick``; flushes logs on a seeded schedule (the page cache's writeback);
* takes acks=all produce requests through ``ReplicaManager.start_append_records`` (Kafka's
  ``appendRecords`` with its response callback), which waits for them in the shipped
  ``DelayedProduces`` and re-checks them on every high-watermark move; an ack counts when the
  broker decides it.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, Protocol, TypeVar

import attrs

from pykraft.broker.controller_client import RecordsPage
from pykraft.broker.lifecycle import BrokerLifecycle
from pykraft.broker.lifecycle_core import LifecycleCore, LifecycleStep, RegistrationRequest
from pykraft.broker.metadata_loader import MetadataLoader
from pykraft.broker.metadata_publisher import BrokerMetadataPublisher
from pykraft.broker.partition import Partition
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.metadata.records import uuid_to_kafka_string
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    BrokerHeartbeatRequest,
    BrokerHeartbeatResponse,
    BrokerRegistrationRequest,
    BrokerRegistrationResponse,
)
from pykraft.replica.data_path import UNKNOWN_OFFSET, AppendResult
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_checks import Checker, PartitionKey
from tests.sim.replication_doubles import (
    SimFetcherManager,
    SimMetadataSource,
    SimTimer,
    key_of,
)
from tests.sim.replication_leader import SimAlterPartitionManager, SimDelayedFetches
from tests.sim.replication_log import BrokerDisk, batch_at, client_batch
from tests.sim.replication_net import SimSettings

T = TypeVar("T")


@attrs.frozen
class MetadataFetch:
    """``GET /v1/metadata/records?from=``: the records from ``from_offset`` on."""

    from_offset: int


class BrokerEnv(Protocol):
    """What a broker needs from the simulation around it."""

    rng: random.Random
    settings: SimSettings
    checker: Checker

    @property
    def now_ms(self) -> int: ...

    def schedule(
        self, broker: SimBroker, delay_ms: int, what: str, action: Callable[[], None]
    ) -> None: ...

    def call_controller(
        self, broker: SimBroker, what: str, request: Any, on_answer: Callable[[Any], None]
    ) -> None: ...

    def call_broker(
        self,
        broker: SimBroker,
        target: int,
        what: str,
        handle: Callable[[SimBroker], T],
        on_answer: Callable[[T], None],
    ) -> None: ...

    def on_clean_shutdown(self, broker: SimBroker) -> None: ...

    def on_produce_answer(
        self, values: tuple[str, ...], error: Errors, base_offset: int
    ) -> None: ...


def incarnation_id(broker_id: int, incarnation: int) -> str:
    return uuid_to_kafka_string(((broker_id + 1) << 64 | incarnation).to_bytes(16, "big"))


class SimBroker:
    # The transaction sim observes appends through a subclass (``txn_broker``).
    replica_manager_class: type[ReplicaManager] = ReplicaManager

    def __init__(self, env: BrokerEnv, broker_id: int, incarnation: int, disk: BrokerDisk) -> None:
        self.env = env
        self.broker_id = broker_id
        self.incarnation = incarnation
        self.disk = disk
        settings = env.settings
        self.core = LifecycleCore(
            broker_id,
            incarnation_id(broker_id, incarnation),
            heartbeat_interval_ms=settings.broker_heartbeat_interval_ms,
        )
        self.core.start()
        # Its images go to ReplicaManager once the publisher is installed.
        self.loader = MetadataLoader(SimMetadataSource())
        self.alter_partitions = SimAlterPartitionManager(self)
        self.fetcher_manager = SimFetcherManager(self)
        self._heartbeat = 0
        self._metadata_poll = 0
        self.replica_manager = self.replica_manager_class(
            broker_id=broker_id,
            log_manager=disk.log_manager,
            fetcher_manager=self.fetcher_manager,
            delayed_fetches=SimDelayedFetches(self),
            alter_partition=self.alter_partitions,
            min_insync_replicas=settings.min_insync_replicas,
            replica_lag_time_max_ms=settings.replica_lag_time_max_ms,
            high_watermark_checkpoint_interval_ms=(settings.high_watermark_checkpoint_interval_ms),
            monotonic_ms=lambda: self.env.now_ms,
            timer=lambda on_due: SimTimer(self, on_due),
        )
        self.publisher = BrokerMetadataPublisher(
            broker_id,
            self.replica_manager,
            wall_clock_ms=lambda: self.env.now_ms,
            listeners=(self.on_local_changes,),
        )
        self.schedule(0, "heartbeat", self._heartbeat_now)
        self.schedule(0, "metadata poll", self._poll_metadata)
        self._flush_interval_ms = env.rng.randint(200, 4000)
        self.schedule(self._flush_interval_ms, "flush", self._flush)
        # Out of phase between brokers and restarts, as the timers of separate processes are
        # (this draw once placed the sim's own high-watermark checkpoint, ReplicaManager.tick's
        # now; it stays where it was, so seeded histories replay).
        self.schedule(
            env.rng.randint(1, settings.high_watermark_checkpoint_interval_ms),
            "recovery-point checkpoint",
            self._checkpoint_recovery_points,
        )
        if settings.log_flush_scheduler_interval_ms is not None:
            self.schedule(0, "log manager tick", self._log_manager_tick)

    def __repr__(self) -> str:
        return (
            f"SimBroker({self.broker_id}#{self.incarnation}, {self.lifecycle.state.name}, "
            f"epoch {self.broker_epoch}, metadata {self.loader.image.offset})"
        )

    @property
    def lifecycle(self) -> BrokerLifecycle:
        return self.core.lifecycle

    @property
    def broker_epoch(self) -> int:
        return self.core.broker_epoch

    @property
    def serving(self) -> bool:
        """Metadata published and requests served (``BrokerServer``'s ``_serving``)."""
        return self.publisher.installed

    @property
    def partitions(self) -> dict[PartitionKey, Partition]:
        """The partitions ``ReplicaManager`` hosts, by the sim's key."""
        return {key_of(tp): partition for tp, partition in self.replica_manager.partitions.items()}

    # ------------------------------------------------------------------ the environment

    def schedule(self, delay_ms: int, what: str, action: Callable[[], None]) -> None:
        self.env.schedule(self, delay_ms, what, action)

    def call_controller(self, what: str, request: Any, on_answer: Callable[[Any], None]) -> None:
        self.env.call_controller(self, what, request, on_answer)

    def call_broker(
        self,
        target: int,
        what: str,
        handle: Callable[[SimBroker], T],
        on_answer: Callable[[T], None],
    ) -> None:
        self.env.call_broker(self, target, what, handle, on_answer)

    # ------------------------------------------------------------------ lifecycle

    def _heartbeat_now(self) -> None:
        """Send what the lifecycle core asks (registration or heartbeat); a lost request or
        answer is retried after the interval."""
        self._heartbeat += 1
        number = self._heartbeat
        request = self.core.request(self.loader.image.offset)
        if isinstance(request, RegistrationRequest):
            self.call_controller(
                "BrokerRegistration",
                BrokerRegistrationRequest(
                    request.broker_id,
                    request.incarnation_id,
                    previous_broker_epoch=self.replica_manager.log_manager.previous_broker_epoch(),
                ),
                lambda answer: self._on_registration(number, answer),
            )
        else:
            self.call_controller(
                "BrokerHeartbeat",
                BrokerHeartbeatRequest(
                    request.broker_id,
                    request.broker_epoch,
                    request.current_metadata_offset,
                    want_fence=request.want_fence,
                    want_shut_down=request.want_shut_down,
                ),
                lambda answer: self._on_heartbeat(number, answer),
            )
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
        if not answer.error.is_success():  # DUPLICATE_BROKER_REGISTRATION while it lives
            self.env.checker.stats[f"registrations refused ({answer.error.error.name})"] += 1
        step = self.core.on_registration(answer.broker_epoch if answer.error.is_success() else None)
        self._next_heartbeat(step.next_request_ms, self._heartbeat)

    def _on_heartbeat(self, number: int, answer: BrokerHeartbeatResponse) -> None:
        if number != self._heartbeat:
            return
        self._heartbeat += 1
        step = self.core.on_heartbeat(None if answer.error.is_failure() else answer)
        self._carry_out(step)

    def _carry_out(self, step: LifecycleStep) -> None:
        """What ``BrokerServer`` does with a lifecycle step, on simulated time."""
        if step.install_publisher:
            self._install_publisher()
            self.core.set_ready_to_unfence()
        if step.shutdown_allowed:
            self.env.on_clean_shutdown(self)
            return
        self._next_heartbeat(step.next_request_ms, self._heartbeat)

    def begin_controlled_shutdown(self) -> None:
        """SIGTERM: a controlled shutdown from RUNNING, else stop at once."""
        if self.core.done:
            return
        if self.core.begin_shutdown():
            self._heartbeat += 1
            self._heartbeat_now()
        elif self.core.done:  # it led nothing yet: no controller round trip
            self.env.on_clean_shutdown(self)

    def close(self) -> None:
        """``BrokerServer.shutdown``'s replica and storage half: waiting requests answer (an
        unfinished acks=all produce is not acknowledged), then the shipped
        ``LogManager.shutdown`` (close every log, write every checkpoint, then the
        clean-shutdown marker with the broker epoch, KIP-966's PreviousBrokerEpoch)."""
        self.replica_manager.shutdown()
        self.replica_manager.log_manager.shutdown(self.broker_epoch)

    # ------------------------------------------------------------------ metadata

    def _poll_metadata(self) -> None:
        self._metadata_poll += 1
        number = self._metadata_poll
        self.call_controller(
            "MetadataFetch",
            MetadataFetch(self.loader.next_offset),
            lambda page: self._on_metadata(number, page),
        )

        def again() -> None:
            if number == self._metadata_poll:
                self._poll_metadata()

        self.schedule(self.env.settings.request_timeout_ms, "metadata poll timeout", again)

    def _on_metadata(self, number: int, page: RecordsPage) -> None:
        if number != self._metadata_poll:
            return
        self.loader.on_page(page)
        self._metadata_poll += 1
        number = self._metadata_poll

        def again() -> None:
            if number == self._metadata_poll:
                self._poll_metadata()

        interval = self.env.settings.metadata_poll_interval_ms
        self.schedule(self.env.rng.randint(interval // 4, interval), "metadata poll", again)

    def _install_publisher(self) -> None:
        """``BrokerServer._install_publisher``: the whole image first, then every image the
        loader publishes."""
        image = self.loader.image
        self._observe_leaders(image, lambda: self.publisher.install(image))
        self.loader.add_listener(self._publish)

    def _publish(self, delta: MetadataDelta, image: MetadataImage) -> None:
        self._observe_leaders(image, lambda: self.publisher.publish(delta, image))

    def on_local_changes(self, changes: LocalReplicaChanges, image: MetadataImage) -> None:
        """The publisher's listener, after the replica layer applied ``changes`` (where
        ``BrokerServer`` tells its coordinators); this broker runs none."""

    def _observe_leaders(
        self, image: MetadataImage, publish: Callable[[], LocalReplicaChanges]
    ) -> None:
        """Run ``publish`` and report each leader epoch it took to the checker (the sim never
        deletes topics: a replica goes only when a reassignment removes this broker)."""
        before = {key: p.leader_epoch for key, p in self.partitions.items()}
        changes = publish()
        for deleted in changes.deletes:
            assert self.env.settings.reassign, f"unexpected delete of {deleted}"
            topic = image.topics.by_name.get(deleted.topic)
            registration = None if topic is None else topic.partitions.get(deleted.partition)
            assert registration is not None and self.broker_id not in registration.replicas, (
                f"broker {self.broker_id} deleted {deleted}, still a replica: {registration}"
            )
        for key in sorted(changes.leaders):
            partition = self.partitions.get((key.topic, key.partition))
            if partition is None or not partition.is_leader:
                continue
            if partition.leader_epoch != before.get((key.topic, key.partition)):
                self.env.checker.on_become_leader(
                    (key.topic, key.partition), self.broker_id, partition.leader_epoch
                )

    # ------------------------------------------------------------------ timers

    def _flush(self) -> None:
        for key in sorted(self.disk.logs):
            if self.env.rng.random() < 0.5:
                self.disk.logs[key].flush()
        self.schedule(self._flush_interval_ms, "flush", self._flush)

    def _log_manager_tick(self) -> None:
        """``BrokerServer._run_periodic``: ``LogManager``'s periodic work when due — with it
        the flush.ms check of every log each log.flush.scheduler.interval.ms."""
        now_ms = self.env.now_ms
        next_due_ms = self.disk.log_manager.maybe_run_periodic(now_ms)
        self.schedule(max(next_due_ms - now_ms, 1), "log manager tick", self._log_manager_tick)

    def _checkpoint_recovery_points(self) -> None:
        # Kafka checkpoints recovery points on a slower timer of its own (LogManager's
        # log.flush.offset.checkpoint.interval.ms); this one at the high-watermark interval
        # still leaves the checkpoint behind the flushes between two ticks. The high
        # watermarks are ReplicaManager.tick's.
        self.disk.log_manager.checkpoint_recovery_points()
        self.schedule(
            self.env.settings.high_watermark_checkpoint_interval_ms,
            "recovery-point checkpoint",
            self._checkpoint_recovery_points,
        )

    # ------------------------------------------------------------------ produce

    def handle_produce(self, key: PartitionKey, values: tuple[str, ...]) -> None:
        """An acks=all produce through ``ReplicaManager.start_append_records``; the checker
        hears of the batch the leader wrote and, when the broker answers with no error, of
        the acknowledgement."""
        if not self.serving:
            return  # NOT_LEADER_OR_FOLLOWER until the metadata is published
        produce = _Produce(self, key, values)
        waiter_id = self.replica_manager.start_append_records(
            {produce.topic_partition: client_batch(values)},
            required_acks=-1,
            timeout_ms=self.env.settings.produce_timeout_ms,
            now_ms=self.env.now_ms,
            response_callback=produce.respond,
        )
        if waiter_id is not None:  # appended (the log's last batch), waiting for the ISR
            produce.on_appended(self.disk.log(key).log_end_offset - 1)


class _Produce:
    """One produce request's connection: what the broker answers reaches the checker."""

    def __init__(self, broker: SimBroker, key: PartitionKey, values: tuple[str, ...]) -> None:
        self.broker = broker
        self.key = key
        self.values = values
        self.topic_partition = TopicPartition(*key)
        self.appended = False

    def on_appended(self, offset: int) -> None:
        """The leader wrote the batch holding ``offset``."""
        assert not self.appended
        self.appended = True
        log = self.broker.disk.log(self.key)
        self.broker.env.checker.on_leader_append(self.key, batch_at(log, offset))

    def respond(self, results: Mapping[TopicPartition, AppendResult]) -> None:
        result = results[self.topic_partition]
        if not self.appended and result.base_offset != UNKNOWN_OFFSET:
            # Answered at once (acks met already, or too few replicas).
            self.on_appended(result.base_offset)
        self.broker.env.on_produce_answer(self.values, result.error, result.base_offset)
        if result.error is Errors.NONE:
            self.broker.env.checker.on_ack(self.key, result.base_offset, self.values)
