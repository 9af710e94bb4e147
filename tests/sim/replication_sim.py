"""A deterministic simulation of partition replication: three brokers and a controller.

What runs is the real decision code: ``QuorumController`` (one active controller; Raft itself is
not simulated: a batch commits when the controller returns it) with ``MetadataDelta`` and
``local_changes``; on each broker the shipped ``broker.replica_manager.ReplicaManager`` with its
``Partition`` shells over the ``replica/`` cores (``PartitionCore``, ``AlterPartitionQueue``,
``ProducePurgatory``), and the shipped ``fetcher.ReplicaFetcher`` (one per leader) over the
follower cores (``fetcher.state``, ``fetcher.responses``, ``fetcher.truncation``). Around it,
simulated: the clock and event queue, the network (seeded delay and drops, one broker isolated,
broker-to-broker links cut — ``replication_net``), the disks (the shipped ``PartitionLog`` on
``MemoryDisk``s: a power loss drops unflushed batches — ``replication_log``), the I/O doubles
around ``ReplicaManager`` (``replication_doubles``; the fetchers' clock and leader endpoint in
``replication_fetcher``), the broker processes (``SimBroker``), an acks=all producer, and faults
(``replication_faults``).
One seeded ``random.Random`` drives everything; the controller has its own, so runs are a
function of the seed.

After every event ``check`` asserts the invariants listed in ``replication_checks``. After the
fault phase every fault is healed and the cluster must converge (every replica equal and in
the ISR) with every acknowledged value on every replica.

The crash rule. Kafka's acks=all guarantee rests on replication, not fsync (by default Kafka
leaves flushing to the operating system: flush.messages and flush.ms are off). An acknowledged
record is on every member of the ISR and survives as long as one of them keeps it. A power
loss that takes unflushed data from a broker still in an ISR breaks that for its partitions
until the controller drops the old incarnation from every ISR (on fencing or re-registration).
So a power loss is only scheduled when it cannot take the last copy: every other broker is
healthy (running, registered, unfenced, reachable), every ISR the broker is in has another
member, it has no AlterPartition in flight (which could leave it alone in an ISR), and while
its old incarnation may still be in an ISR (``suspect``) no other broker is crashed, paused,
isolated or shut down. Without the rule Kafka itself loses acknowledged writes (two replicas
losing unflushed data at once; or the last ISR member losing it — the case KIP-966's eligible
leader replicas address), and so does the sim: ``crash_rule=False`` shows it. A kill -9 keeps
the page cache, so it loses nothing; it only counts as a broker taken out. With the topic's
``flush.messages=1`` (``SimSettings.topic_configs``) no rule is needed: every append is fsynced
before it counts, and power losses anywhere, even of every broker at once, lose nothing
acknowledged (``test_power_outage``).

The KIP-966 crash rule (``CrashRule.KIP_966``, with ``eligible.leader.replicas.version`` 1).
Eligible leader replicas make three things true: the high watermark moves only while the ISR
has at least min ISR (= min(min.insync.replicas, RF)) members, so every acknowledged record is
on at least min ISR brokers; a member leaving an ISR below min ISR stays electable in the ELR,
so ISR and ELR hold only brokers that have every committed record; and a broker that restarts
without its clean-shutdown epoch leaves every ISR and ELR in its registration's batch, before
it can be unfenced, so a broker that lost data is never elected once it has registered again.
What remains is the window between the power loss and that registration (the old session is
still alive): the controller may elect the old registration, but no process serves it — the new
process acts only after registering, which drops it first. So the guarantee holds while fewer
than min ISR brokers are missing records they once held: a power loss is allowed at any time,
of any broker, whatever else is down, as long as at most min.insync.replicas - 1 brokers
(counting it) have lost unflushed data and not yet fetched back, into the ISR, every record
acknowledged before their loss (``FaultInjector.missing``). "Not yet re-registered" would not
be enough: after its registration a broker is out of the ISR but still lacks the records, and
a second power loss on the one broker that holds them would take the last copy. Availability
is what KIP-966 gives up: a kill -9 cannot show a clean shutdown either, so once every ISR and
ELR member has restarted that way the partition stays offline (Kafka 4.x then elects its last
known leader uncleanly; pykraft leaves that to an operator), and such partitions are checked,
instead of converging, for one replica holding every acknowledged record (the one such an
election must pick); the producer's final read is of it, as the other replicas may hold a stale
or divergent tail they never got to truncate. Without eligible leader replicas the same rule
loses acknowledged records: the last ISR member, having lost its tail, is kept in the ISR and
elected when it comes back.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from pykraft.broker.controller_client import MetadataBatch, RecordsPage
from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.records import NO_LEADER_CHANGE, MetadataRecord, PartitionChangeRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    ControllerResult,
    ControllerSettings,
    CreatableTopic,
    CreatableTopicConfig,
    CreateTopicsRequest,
    QuorumController,
)
from pykraft.storage.log_manager import LogManagerSettings
from tests.chaos.history import Op, OpType, Poll, Recorder, Send
from tests.chaos.history_checker import check
from tests.sim.controller_sim import SimulationFailure, check_invariants
from tests.sim.replication_broker import MetadataFetch, SimBroker
from tests.sim.replication_checks import Checker, PartitionKey, Tenure, fail
from tests.sim.replication_faults import CrashRule, FaultInjector
from tests.sim.replication_log import BrokerDisk, records
from tests.sim.replication_net import (
    CONTROLLER,
    PRODUCER,
    EventQueue,
    Network,
    SimFuture,
    SimSettings,
)

__all__ = ["BROKERS", "TOPIC", "ReplicationSimulation", "SimulationFailure"]

BROKERS = 3
TOPIC = "t"
CONTROLLER_TICK_MS = 250
REPLAY = "PYKRAFT_SIM_SEED={seed} .venv/bin/pytest -q tests/sim/test_replication_sim.py"
# A producer with several requests in flight over a network that reorders them may see its
# sends land out of order: it is not idempotent, and Kafka promises no order then.
TOLERATED = frozenset({"nonmonotonic-send"})
T = TypeVar("T")


class ReplicationSimulation:
    # What each broker process is, and how a failure names the sim and its replay (the
    # transaction sim has its own).
    broker_class: type[SimBroker] = SimBroker
    name = "replication"
    replay_command = REPLAY

    def __init__(
        self,
        seed: int,
        settings: SimSettings | None = None,
        *,
        crash_rule: bool | CrashRule = True,
    ) -> None:
        self.seed = seed
        self.settings = settings or SimSettings()
        self.rng = random.Random(seed)
        self.queue = EventQueue()
        self.network = Network(self.rng, self.queue, self.settings)
        self.checker = Checker()
        self.controller = QuorumController(
            rng=random.Random(seed * 7919 + 1),
            now_ms=0,
            settings=ControllerSettings(
                broker_session_timeout_ms=self.settings.broker_session_timeout_ms,
                min_insync_replicas=self.settings.min_insync_replicas,
                eligible_leader_replicas_version=self.settings.eligible_leader_replicas_version,
            ),
        )
        self.image = MetadataImage.EMPTY
        # Record i has metadata offset i.
        self.metadata_log: list[MetadataRecord] = []
        flush_check_ms = self.settings.log_flush_scheduler_interval_ms
        manager_settings = (
            LogManagerSettings()
            if flush_check_ms is None
            else LogManagerSettings(log_flush_scheduler_interval_ms=flush_check_ms)
        )
        self.disks = {b: BrokerDisk(b, manager_settings) for b in range(BROKERS)}
        self.brokers: dict[int, SimBroker | None] = dict.fromkeys(range(BROKERS))
        self.incarnations = dict.fromkeys(range(BROKERS), 0)
        self.paused_until = dict.fromkeys(range(BROKERS), 0)
        self.faults = FaultInjector(self, crash_rule=crash_rule)
        self.producing = True
        self.produced = 0
        self.step = 0
        # The producer's sends in Jepsen's terms (``tests.chaos.history``), closed at quiescence
        # by a read of every converged log and judged by ``history_checker`` (``check_history``).
        self.sends = Recorder(wall=self.clock_s, monotonic=self.clock_s)
        self._sending: dict[tuple[str, ...], Op] = {}

    @property
    def now_ms(self) -> int:
        return self.queue.now_ms

    def clock_s(self) -> float:
        return self.queue.now_ms / 1000

    # ------------------------------------------------------------------ running

    def run(self, steps: int) -> None:
        """``steps`` events with faults and produces, then heal and converge."""
        try:
            self._start()
            for self.step in range(steps):
                if not self.queue.run_next():
                    break
                self.check()
            self.faults.quiesce()
        except Exception as error:
            trace = "\n  ".join(self.queue.trace)
            faults = "\n  ".join(self.faults.history)
            raise SimulationFailure(
                f"{self.name} simulation failed: seed={self.seed} step={self.step} "
                f"t={self.now_ms}: {type(error).__name__}: {error}\n"
                f"replay with: {self.replay_command.format(seed=self.seed)}\n"
                f"last faults:\n  {faults}\nlast events:\n  {trace}"
            ) from error

    def _start(self) -> None:
        for broker_id in range(BROKERS):
            self.start_broker(broker_id)
        self.queue.after(0, "controller tick", self._controller_tick)
        self.queue.after(1000, "produce", self._produce)
        if self.settings.reassign:
            self.queue.after(3000, "reassign", self._reassign)
        self.faults.start()

    def start_broker(self, broker_id: int) -> None:
        if self.brokers[broker_id] is not None:
            return
        self.incarnations[broker_id] += 1
        self.paused_until[broker_id] = self.now_ms
        self.brokers[broker_id] = self.broker_class(
            self, broker_id, self.incarnations[broker_id], self.disks[broker_id]
        )

    def alive(self) -> list[SimBroker]:
        return [broker for broker in self.brokers.values() if broker is not None]

    def registration(self, key: PartitionKey) -> PartitionRegistration | None:
        topic = self.image.topics.by_name.get(key[0])
        return None if topic is None else topic.partitions.get(key[1])

    def partition_keys(self) -> list[PartitionKey]:
        return [(TOPIC, index) for index in range(self.settings.partitions)]

    def history(self) -> tuple[object, ...]:
        """What a run produced — time, image, every replica's records, the event trace — for
        the same-seed-same-history tests."""
        logs = tuple(
            tuple(records(disk.log(key)))
            for disk in self.disks.values()
            for key in self.partition_keys()
        )
        return self.now_ms, self.image, logs, tuple(self.queue.trace)

    # ------------------------------------------------------------------ invariants

    def check(self) -> None:
        """Every invariant of ``replication_checks``, after every event."""
        checker = self.checker
        for broker in self.alive():
            for key, log in broker.disk.logs.items():
                checker.check_replica(key, broker.broker_id, log)
        for broker in self.alive():
            for key, partition in broker.partitions.items():
                if not partition.is_leader:
                    continue
                registration = self.registration(key)
                legitimate = (
                    registration is not None
                    and registration.leader == broker.broker_id
                    and registration.leader_epoch == partition.leader_epoch
                )
                tenure = Tenure(key, broker.broker_id, broker.incarnation, partition.leader_epoch)
                checker.check_leader(tenure, broker.disk.log(key), legitimate=legitimate)
        checker.check_acks()

    # ------------------------------------------------------------------ BrokerEnv

    def schedule(
        self, broker: SimBroker, delay_ms: int, what: str, action: Callable[[], None]
    ) -> None:
        broker_id, incarnation = broker.broker_id, broker.incarnation
        self.queue.after(
            delay_ms,
            f"b{broker_id} {what}",
            lambda: self.run_on(broker_id, incarnation, what, action),
        )

    def run_on(
        self, broker_id: int, incarnation: int, what: str, action: Callable[[], None]
    ) -> None:
        """Run ``action`` on that incarnation if it still runs; a paused one runs it later."""
        broker = self.brokers[broker_id]
        if broker is None or broker.incarnation != incarnation:
            return
        until = self.paused_until[broker_id]
        if until > self.now_ms:
            self.queue.at(
                until,
                f"b{broker_id} {what} (after pause)",
                lambda: self.run_on(broker_id, incarnation, what, action),
            )
            return
        action()

    def call_controller(
        self, broker: SimBroker, what: str, request: Any, on_answer: Callable[[Any], None]
    ) -> None:
        broker_id, incarnation = broker.broker_id, broker.incarnation

        def at_controller() -> None:
            answer = self._controller_answer(request)
            self.network.send(
                CONTROLLER,
                broker_id,
                f"{what} answer",
                lambda: self.run_on(
                    broker_id, incarnation, f"{what} answer", lambda: on_answer(answer)
                ),
            )

        self.network.send(broker_id, CONTROLLER, what, at_controller)

    def call_broker(
        self,
        broker: SimBroker,
        target: int,
        what: str,
        handle: Callable[[SimBroker], T],
        on_answer: Callable[[T], None],
    ) -> None:
        source, incarnation = broker.broker_id, broker.incarnation
        receiver = self.brokers[target]
        if receiver is None:
            return  # connection refused
        target_incarnation = receiver.incarnation

        def reply(result: T) -> None:
            self.network.send(
                target,
                source,
                f"{what} answer",
                lambda: self.run_on(
                    source, incarnation, f"{what} answer", lambda: on_answer(result)
                ),
            )

        def answer() -> None:
            leader = self.brokers[target]
            assert leader is not None
            result = handle(leader)
            if isinstance(result, SimFuture):  # an async handler answers when it returns
                result.on_done(lambda done: reply(done.value))
            else:
                reply(result)

        self.network.send(
            source, target, what, lambda: self.run_on(target, target_incarnation, what, answer)
        )

    def on_clean_shutdown(self, broker: SimBroker) -> None:
        self.faults.on_clean_shutdown(broker)

    # ------------------------------------------------------------------ the controller

    def _controller_answer(self, request: Any) -> Any:
        if isinstance(request, MetadataFetch):
            return self._records_page(request.from_offset)
        result = self.controller.handle(self.image, request, self.now_ms)
        self.commit(result)
        return result.response

    def _records_page(self, from_offset: int) -> RecordsPage:
        """``GET /v1/metadata/records?from=``: every record from ``from_offset`` on, as one batch
        (the log ends on a batch boundary, so the page holds whole batches)."""
        start, end = max(0, from_offset), len(self.metadata_log)
        batches = (
            ()
            if start >= end
            else (
                MetadataBatch(
                    base_offset=start,
                    last_offset=end - 1,
                    epoch=1,
                    append_time_ms=self.now_ms,
                    records=tuple(self.metadata_log[start:end]),
                ),
            )
        )
        return RecordsPage(
            from_offset=from_offset,
            next_offset=max(start, end),
            log_end_offset=end,
            batches=batches,
        )

    def commit(self, result: ControllerResult[Any]) -> None:
        """Commit a batch (Raft is not simulated) with the controller sim's image checks."""
        if not result.records:
            return
        before = self.image
        after = apply_records(
            before, result.records, offset=before.offset + len(result.records), epoch=1
        )
        check_invariants(before, after, result.records)
        for record in result.records:
            if isinstance(record, PartitionChangeRecord):
                if record.isr is not None:
                    self.checker.stats["ISR changes committed"] += 1
                if record.leader != NO_LEADER_CHANGE:
                    self.checker.stats["leader changes committed"] += 1
        for key in self.partition_keys():
            topic_before = before.topics.by_name.get(key[0])
            old = None if topic_before is None else topic_before.partitions.get(key[1])
            topic_after = after.topics.by_name.get(key[0])
            new = None if topic_after is None else topic_after.partitions.get(key[1])
            if old is not None and new is not None and old.is_reassigning():
                self.checker.stats["reassignments ended"] += not new.is_reassigning()
            if new is not None and new.leader >= 0 and (old is None or old.leader != new.leader):
                self._check_elected(key, new.leader, after)
                if old is not None and old.isr == () and new.leader in old.elr:
                    self.checker.stats["clean elections from the ELR"] += 1
        self.metadata_log.extend(result.records)
        self.image = after
        self.faults.on_commit(result.records)

    def _check_elected(self, key: PartitionKey, leader: int, image: MetadataImage) -> None:
        """Invariant 7 (``replication_checks``) for the registration the controller elected,
        when the running process is that registration. A process that restarted and has not
        registered yet (its old session still alive) cannot act on the election; its
        registration, when it comes, takes it out of the ISR and ELR first (KIP-966)."""
        broker = self.brokers[leader]
        registration = image.cluster.brokers.get(leader)
        if broker is None or registration is None or broker.broker_epoch != registration.epoch:
            self.checker.stats["elections of a broker whose process restarted unregistered"] += 1
            return
        log = self.disks[leader].logs.get(key)  # never created here: that would change the run
        self.checker.check_elected(key, leader, log)

    def _controller_tick(self) -> None:
        """The active controller's timer: fence stale brokers, NoOp, create the topic."""
        while True:
            result = self.controller.fence_stale_brokers(self.image, self.now_ms)
            if not result.records:
                break
            self.queue.note(f"controller fences {result.response}")
            self.commit(result)
        noop = self.controller.maybe_noop(self.image, self.now_ms)
        if noop is not None:
            self.commit(noop)
        unfenced = [b for b in self.image.cluster.brokers.values() if not b.fenced]
        if TOPIC not in self.image.topics.by_name and len(unfenced) == BROKERS:
            topic = CreatableTopic(
                TOPIC,
                self.settings.partitions,
                self.settings.replication_factor,
                configs=tuple(
                    CreatableTopicConfig(name, value) for name, value in self.settings.topic_configs
                ),
            )
            self.commit(
                self.controller.handle(self.image, CreateTopicsRequest((topic,)), self.now_ms)
            )
        self.queue.after(CONTROLLER_TICK_MS, "controller tick", self._controller_tick)

    # ------------------------------------------------------------------ the operator (KIP-455)

    def _reassign(self) -> None:
        """Move one partition between RF 3 and RF 2 (or cancel its move); once quiescing, put
        every partition back on all brokers so the replicas can converge."""
        self.queue.after(self.rng.randint(2000, 8000), "reassign", self._reassign)
        everyone = tuple(range(BROKERS))
        if not self.producing:
            for key in self.partition_keys():
                registration = self.registration(key)
                if registration is not None and (
                    len(registration.replicas) < BROKERS or registration.is_reassigning()
                ):
                    self._alter_reassignment(key, everyone)
            return
        key = self.rng.choice(self.partition_keys())
        registration = self.registration(key)
        if registration is None:
            return
        if registration.is_reassigning():
            if self.rng.random() < 0.3:
                self._alter_reassignment(key, None)
            return
        if len(registration.replicas) == BROKERS:
            target = tuple(self.rng.sample(everyone, BROKERS - 1))
        else:
            target = tuple(self.rng.sample(everyone, BROKERS))
        self._alter_reassignment(key, target)

    def _alter_reassignment(self, key: PartitionKey, target: tuple[int, ...] | None) -> None:
        request = AlterPartitionReassignmentsRequest(
            (ReassignableTopic(key[0], (ReassignablePartition(key[1], target),)),)
        )
        result = self.controller.handle(self.image, request, self.now_ms)
        self.commit(result)
        error = result.response.responses[0].partitions[0].error
        self.queue.note(f"reassign {key} -> {target}: {error.name}")
        self.checker.stats[f"reassignments {'cancelled' if target is None else 'started'}"] += (
            error.is_success()
        )

    # ------------------------------------------------------------------ the producer

    def _produce(self) -> None:
        """An acks=all producer sends unique values to the leader the controller names."""
        if not self.producing:
            return
        self.queue.after(self.rng.randint(10, 150), "produce", self._produce)
        key = self.rng.choice(self.partition_keys())
        registration = self.registration(key)
        if registration is None or registration.leader < 0:
            return
        leader = self.brokers[registration.leader]
        if leader is None:
            return
        count = self.rng.choice((1, 1, 1, 2, 3))
        values = tuple(f"{key[1]}:{self.produced + i}" for i in range(count))
        self.produced += count
        sends = [Send(key[1], value.encode()) for value in values]
        self._sending[values] = self.sends.invoke("producer", "send", sends)
        leader_id, incarnation = leader.broker_id, leader.incarnation

        def deliver() -> None:
            self.run_on(
                leader_id,
                incarnation,
                "Produce",
                lambda: self._leader(leader_id).handle_produce(key, values),
            )

        self.network.send(PRODUCER, leader_id, f"Produce {key} {values}", deliver)

    def on_produce_answer(self, values: tuple[str, ...], error: Errors, base_offset: int) -> None:
        """The producer's answer: ok with where the values landed; info for any error (a
        timed-out or refused append may still be in the log)."""
        invocation = self._sending.pop(values, None)
        if invocation is None:
            return
        if error is not Errors.NONE:
            self.sends.complete(invocation, OpType.INFO)
            return
        landed = [
            Send(s.partition, s.value, base_offset + i) for i, s in enumerate(invocation.sends)
        ]
        self.sends.complete(invocation, OpType.OK, landed)

    def check_history(self, readers: Mapping[PartitionKey, int]) -> None:
        """Once converged: sends never answered end as info, every partition's log is read
        whole (of broker 0, or of the broker ``readers`` names: for a partition left offline,
        the replica that kept every acknowledged record, where another may hold a stale or
        divergent tail), and the history must be free of anomalies but ``TOLERATED``."""
        for values in sorted(self._sending):
            self.sends.complete(self._sending.pop(values), OpType.INFO)
        final = {}
        for topic, partition in self.partition_keys():
            if topic == TOPIC:
                log = self.disks[readers.get((topic, partition), 0)].log((topic, partition))
                final[partition] = [Poll(partition, o, v.encode()) for o, _, v in records(log)]
        self.sends.final_read(final)
        report = check(self.sends.history())
        bad = report.bad(tolerate=TOLERATED)
        self.checker.stats["non-monotonic sends (a reordering network)"] += len(
            report.anomalies["nonmonotonic-send"]
        )
        if bad:
            fail(f"the producer's history has anomalies {bad}:\n{report.render()}")

    def _leader(self, broker_id: int) -> SimBroker:
        broker = self.brokers[broker_id]
        assert broker is not None
        return broker
