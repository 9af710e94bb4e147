"""A deterministic simulation of the controller core with N brokers on a simulated clock.

One seeded ``random.Random`` drives the scenario: brokers register, heartbeat (reporting a
metadata offset that may lag), die (stop heartbeating), come back as new incarnations, shut down
in a controlled way, get unregistered; clients create and delete topics, add partitions, run
preferred and unclean elections, flip ``unclean.leader.election.enable`` and start or cancel
partition reassignments (KIP-455, sometimes to unknown brokers); partition leaders
shrink and expand ISRs with AlterPartition (sometimes with stale epochs); the active controller
fails over. Every batch the controller returns is replayed through ``metadata``'s
``MetadataDelta`` exactly as the Raft shell commits it, and after every batch the invariants of
``check_invariants`` are asserted. A final quiescent phase (every broker up and heartbeating)
checks liveness: every broker unfenced, every partition led, and every reassignment completed
once its leader puts all the replicas in the ISR.

A failure raises ``SimulationFailure`` naming the seed, the step and the last events.
"""

from __future__ import annotations

import enum
import random
from collections import deque
from typing import Any

import attrs

from pykraft.metadata.api.reassignments import (
    AlterPartitionReassignmentsRequest,
    ReassignablePartition,
    ReassignableTopic,
)
from pykraft.metadata.delta import apply_records
from pykraft.metadata.elr import elr_enabled
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import (
    LeaderRecoveryState,
    MetadataRecord,
    RemoveTopicRecord,
    uuid_to_kafka_string,
)
from pykraft.protocol.errors import Errors
from pykraft.quorum.controller import (
    AlterableConfig,
    AlterConfigOp,
    AlterConfigsResource,
    AlterPartitionData,
    AlterPartitionRequest,
    BrokerHeartbeatRequest,
    BrokerRegistrationRequest,
    BrokerState,
    ControllerResult,
    ControllerSettings,
    CreatableTopic,
    CreatePartitionsRequest,
    CreatePartitionsTopic,
    CreateTopicsRequest,
    DeleteTopicsRequest,
    ElectionType,
    ElectLeadersRequest,
    IncrementalAlterConfigsRequest,
    QuorumController,
    TopicPartitions,
    UnregisterBrokerRequest,
)
from pykraft.quorum.managers.partition_change import (
    TopicPartitionRef,
    all_partitions,
    is_active,
)

MAX_EVENTS_SHOWN = 25
# leader.imbalance.check.interval (Kafka: 300 s), short enough to run many times per seed.
BALANCE_INTERVAL_MS = 5_000


class SimulationFailure(AssertionError):
    pass


class Process(enum.Enum):
    """The simulated broker process."""

    STOPPED = "STOPPED"
    RUNNING = "RUNNING"
    SHUTTING_DOWN = "SHUTTING_DOWN"


@attrs.define
class SimBroker:
    id: int
    rack: str | None
    process: Process = Process.RUNNING
    incarnation: int = 0
    # -1 until a registration commits (and again after being told to re-register).
    epoch: int = -1
    applied_offset: int = -1
    # KIP-966: the epoch its clean-shutdown marker holds (-1 after a crash).
    clean_epoch: int = -1


def check_invariants(
    before: MetadataImage, after: MetadataImage, records: tuple[MetadataRecord, ...]
) -> None:
    """The safety properties every committed batch must keep."""
    for ref in all_partitions(after):
        name, p = f"{ref.topic.name}-{ref.partition_id}", ref.partition
        # KIP-966: with ELR on the ISR may be empty, but then nobody leads; ISR and ELR are
        # disjoint sets of replicas (Kafka's ReplicationControlManager.updatePartitionInfo).
        assert p.isr or (elr_enabled(after) and p.leader == -1), f"{name}: empty ISR"
        assert not set(p.isr) & set(p.elr), f"{name}: ISR {p.isr} and ELR {p.elr} overlap"
        assert set(p.elr) <= set(p.replicas), f"{name}: ELR {p.elr} not in {p.replicas}"
        assert len(set(p.replicas)) == len(p.replicas), f"{name}: repeated replicas {p.replicas}"
        assert len(set(p.isr)) == len(p.isr), f"{name}: repeated ISR members {p.isr}"
        assert set(p.isr) <= set(p.replicas), f"{name}: ISR {p.isr} not in {p.replicas}"
        adding, removing = set(p.adding_replicas), set(p.removing_replicas)
        assert adding | removing <= set(p.replicas), f"{name}: moving replicas not in replicas"
        # adding & removing may overlap: a new target dropping a replica still being added
        # keeps it in adding, as Kafka's changePartitionReassignment does (it sets adding only
        # when the new reassignment adds some).
        assert set(p.replicas) - removing, f"{name}: a reassignment to no replica"
        if p.leader != -1:
            assert p.leader in p.isr, f"{name}: leader {p.leader} not in ISR {p.isr}"
            # Covers "a fenced broker leads nothing" and "a shutting-down broker leads nothing".
            assert is_active(after, p.leader), f"{name}: leader {p.leader} is not active"
    removed = {r.topic_id for r in records if isinstance(r, RemoveTopicRecord)}
    for topic_id, old_topic in before.topics.by_id.items():
        new_topic = after.topics.by_id.get(topic_id)
        if new_topic is None:
            assert topic_id in removed, f"topic {old_topic.name} vanished without RemoveTopic"
            continue
        for partition_id, old in old_topic.partitions.items():
            new = new_topic.partitions.get(partition_id)
            name = f"{old_topic.name}-{partition_id}"
            assert new is not None, f"{name} disappeared"
            assert new.leader_epoch >= old.leader_epoch, f"{name}: leader epoch went back"
            assert new.partition_epoch >= old.partition_epoch, f"{name}: partition epoch went back"
            if new.leader != old.leader:
                assert new.leader_epoch > old.leader_epoch, f"{name}: leader changed, same epoch"
            target = tuple(r for r in old.replicas if r not in old.removing_replicas)
            if old.is_reassigning() and not new.is_reassigning() and new.replicas == target:
                # Completed (not cancelled): only with every target replica in sync (KIP-455).
                recovering = new.leader_recovery_state is LeaderRecoveryState.RECOVERING
                assert set(target) <= set(new.isr) or recovering, (
                    f"{name}: reassignment to {target} completed with ISR {new.isr}"
                )
            if set(old.replicas) - set(new.replicas) and new.leader == old.leader >= 0:
                assert new.leader_epoch > old.leader_epoch, f"{name}: a replica left unfenced"


class ControllerSimulation:
    """Run ``steps`` random events for one seed; ``run()`` raises SimulationFailure."""

    def __init__(self, seed: int, *, brokers: int = 5, racks: int = 0, elr: bool = False) -> None:
        self.seed = seed
        # KIP-966 eligible leader replicas (the cluster's bootstrap level); off, the liveness
        # check is that every partition has a leader after quiescing.
        self.elr = elr
        self.rng = random.Random(seed)
        # The controller's own seeded source (topic ids, placement starts), kept across
        # failovers so the run stays a function of the seed.
        self.controller_rng = random.Random(seed * 7919 + 1)
        self.now_ms = 0
        self.step = 0
        self.image = MetadataImage.EMPTY
        self.controller = self._new_controller()
        self.brokers = {i: SimBroker(i, f"r{i % racks}" if racks else None) for i in range(brokers)}
        self.events: deque[str] = deque(maxlen=MAX_EVENTS_SHOWN)
        self.topic_counter = 0

    def _new_controller(self) -> QuorumController:
        return QuorumController(
            rng=self.controller_rng,
            now_ms=self.now_ms,
            settings=ControllerSettings(
                leader_imbalance_check_interval_ms=BALANCE_INTERVAL_MS,
                eligible_leader_replicas_version=1 if self.elr else 0,
            ),
        )

    # --- committing -------------------------------------------------------------------------

    def commit(self, what: str, result: ControllerResult[Any]) -> Any:
        self.events.append(
            f"t={self.now_ms} {what}: {len(result.records)} record(s) "
            f"-> {_summary(result.response)}"
        )
        assert not (result.records and _failed(result.response)), (
            f"{what} failed validation yet wrote records"
        )
        if result.records:
            before = self.image
            after = apply_records(
                before, result.records, offset=before.offset + len(result.records), epoch=1
            )
            check_invariants(before, after, result.records)
            self.image = after
        return result.response

    def request(self, what: str, request: Any) -> Any:
        return self.commit(what, self.controller.handle(self.image, request, self.now_ms))

    def tick(self) -> None:
        """What the active controller's timer does: fence stale brokers, maybe a NoOp, balance
        leaders when due (auto.leader.rebalance.enable)."""
        while True:
            result = self.controller.fence_stale_brokers(self.image, self.now_ms)
            if not result.records:
                break
            self.commit("fence stale", result)
        noop = self.controller.maybe_noop(self.image, self.now_ms)
        if noop is not None:
            self.commit("noop", noop)
        balance = self.controller.maybe_balance_partition_leaders(self.image, self.now_ms)
        if balance is not None:
            self.commit("balance leaders", balance)
            self.controller.leader_balance.committed(balance.response, self.now_ms)

    # --- brokers ----------------------------------------------------------------------------

    def register(self, broker: SimBroker) -> None:
        incarnation = uuid_to_kafka_string(
            (broker.id << 64 | broker.incarnation).to_bytes(16, "big")
        )
        response = self.request(
            f"register {broker.id}#{broker.incarnation}",
            BrokerRegistrationRequest(
                broker.id, incarnation, rack=broker.rack, previous_broker_epoch=broker.clean_epoch
            ),
        )
        if response.error.is_success():
            broker.epoch = response.broker_epoch
        else:
            assert response.error.error is Errors.DUPLICATE_BROKER_REGISTRATION, response

    def heartbeat(self, broker: SimBroker, catch_up: float = 0.8) -> None:
        if broker.process is Process.STOPPED:
            return
        if broker.epoch < 0:
            self.register(broker)
            return
        if self.rng.random() < catch_up:
            broker.applied_offset = self.image.offset
        response = self.request(
            f"heartbeat {broker.id}",
            BrokerHeartbeatRequest(
                broker.id,
                broker.epoch,
                broker.applied_offset,
                want_shut_down=broker.process is Process.SHUTTING_DOWN,
            ),
        )
        if response.error.error is Errors.STALE_BROKER_EPOCH:
            broker.epoch = -1
        elif response.should_shut_down:
            assert broker.process is Process.SHUTTING_DOWN, "told to shut down unasked"
            assert self._leads_nothing(broker.id), f"broker {broker.id} exits still leading"
            broker.clean_epoch = broker.epoch
            broker.process, broker.epoch = Process.STOPPED, -1

    def _leads_nothing(self, broker_id: int) -> bool:
        return all(ref.partition.leader != broker_id for ref in all_partitions(self.image))

    # --- random events ----------------------------------------------------------------------

    def run(self, steps: int) -> None:
        try:
            for self.step in range(steps):
                self.now_ms += self.rng.choice((0, 10, 100, 500, 1000, 2000, 3000))
                self.random_event()
                self.tick()
            self.quiesce()
        except AssertionError as error:
            trace = "\n  ".join(self.events)
            raise SimulationFailure(
                f"controller simulation failed: seed={self.seed} step={self.step}: {error}\n"
                f"replay with: PYKRAFT_SIM_SEED={self.seed} .venv/bin/pytest -q "
                f"tests/sim/test_controller_sim.py\nlast events:\n  {trace}"
            ) from error

    def random_event(self) -> None:
        roll = self.rng.random()
        if roll < 0.45:
            for broker in self.brokers.values():
                if self.rng.random() < 0.7:
                    self.heartbeat(broker)
        elif roll < 0.52:
            self.broker_lifecycle()
        elif roll < 0.62:
            self.create_topic()
        elif roll < 0.66:
            self.delete_topic()
        elif roll < 0.69:
            self.add_partitions()
        elif roll < 0.80:
            self.alter_partition()
        elif roll < 0.86:
            self.elect()
        elif roll < 0.89:
            self.toggle_unclean()
        elif roll < 0.91:
            self.events.append(f"t={self.now_ms} controller failover")
            self.controller = self._new_controller()
        elif roll < 0.95:
            self.reassign()
        # else: time passes quietly

    def broker_lifecycle(self) -> None:
        broker = self.rng.choice(list(self.brokers.values()))
        roll = self.rng.random()
        if broker.process is Process.RUNNING and roll < 0.4:
            self.events.append(f"t={self.now_ms} broker {broker.id} dies")
            broker.process, broker.clean_epoch = Process.STOPPED, -1
        elif broker.process is Process.RUNNING and roll < 0.7 and broker.epoch >= 0:
            self.events.append(f"t={self.now_ms} broker {broker.id} starts controlled shutdown")
            broker.process = Process.SHUTTING_DOWN
        elif broker.process is Process.STOPPED and roll < 0.8:
            broker.process, broker.epoch = Process.RUNNING, -1
            broker.incarnation += 1
            self.register(broker)
        elif broker.process is Process.STOPPED and broker.id in self.image.cluster.brokers:
            self.request(f"unregister {broker.id}", UnregisterBrokerRequest(broker.id))

    def create_topic(self) -> None:
        existing = sorted(self.image.topics.by_name)
        if existing and self.rng.random() < 0.1:
            name = self.rng.choice(existing)
        else:
            self.topic_counter += 1
            name = f"t{self.topic_counter}"
        topic = CreatableTopic(name, self.rng.randint(1, 4), self.rng.randint(1, 3))
        response = self.request(f"create {name}", CreateTopicsRequest((topic,)))
        error = response.topics[0].error.error
        assert error in (
            Errors.NONE,
            Errors.TOPIC_ALREADY_EXISTS,
            Errors.INVALID_REPLICATION_FACTOR,
        ), response

    def delete_topic(self) -> None:
        names = sorted(self.image.topics.by_name)
        if names:
            name = self.rng.choice(names)
            self.request(f"delete {name}", DeleteTopicsRequest(names=(name,)))

    def add_partitions(self) -> None:
        names = sorted(self.image.topics.by_name)
        if names:
            name = self.rng.choice(names)
            count = len(self.image.topics.by_name[name].partitions) + self.rng.randint(-1, 2)
            self.request(
                f"add partitions {name}->{count}",
                CreatePartitionsRequest((CreatePartitionsTopic(name, count),)),
            )

    def alter_partition(self) -> None:
        refs = [ref for ref in all_partitions(self.image) if ref.partition.leader >= 0]
        if not refs:
            return
        ref = self.rng.choice(refs)
        p = ref.partition
        leader = self.brokers[p.leader]
        if leader.process is Process.STOPPED or leader.epoch < 0:
            return
        others = [r for r in p.replicas if r != p.leader and self.rng.random() < 0.6]
        new_isr = (p.leader, *others)
        leader_epoch, partition_epoch = p.leader_epoch, p.partition_epoch
        if self.rng.random() < 0.15:
            leader_epoch -= 1
        if self.rng.random() < 0.15:
            partition_epoch -= 1
        data = AlterPartitionData(
            ref.topic.topic_id,
            ref.partition_id,
            leader_epoch,
            partition_epoch,
            tuple(BrokerState(b) for b in new_isr),
        )
        response = self.request(
            f"alter {ref.topic.name}-{ref.partition_id} isr={new_isr}",
            AlterPartitionRequest(leader.id, leader.epoch, (data,)),
        )
        if response.error.is_success() and (leader_epoch, partition_epoch) != (
            p.leader_epoch,
            p.partition_epoch,
        ):
            assert response.partitions[0].error.is_failure(), "stale AlterPartition accepted"

    def elect(self) -> None:
        election = ElectionType.UNCLEAN if self.rng.random() < 0.2 else ElectionType.PREFERRED
        names = sorted(self.image.topics.by_name)
        if names and self.rng.random() < 0.5:
            name = self.rng.choice(names)
            partitions = tuple(sorted(self.image.topics.by_name[name].partitions))
            self.request(
                f"elect {election.name} {name}",
                ElectLeadersRequest(election, (TopicPartitions(name, partitions),)),
            )
        else:
            self.request(f"elect {election.name} all", ElectLeadersRequest(election, None))

    def toggle_unclean(self) -> None:
        names = sorted(self.image.topics.by_name)
        target = self.rng.choice(names) if names and self.rng.random() < 0.7 else ""
        resource_type = 2 if target else 4
        value = self.rng.choice(("true", "false"))
        self.request(
            f"unclean={value} for {target or 'cluster'}",
            IncrementalAlterConfigsRequest(
                (
                    AlterConfigsResource(
                        resource_type,
                        target,
                        (
                            AlterableConfig(
                                "unclean.leader.election.enable", AlterConfigOp.SET, value
                            ),
                        ),
                    ),
                )
            ),
        )

    def reassign(self) -> None:
        refs = list(all_partitions(self.image))
        registered = sorted(self.image.cluster.brokers)
        if not refs or not registered:
            return
        ref = self.rng.choice(refs)
        target: tuple[int, ...] | None
        if ref.partition.is_reassigning() and self.rng.random() < 0.3:
            target = None
        else:
            pool = registered + ([max(self.brokers) + 1] if self.rng.random() < 0.05 else [])
            target = tuple(self.rng.sample(pool, self.rng.randint(1, min(3, len(pool)))))
        name = f"{ref.topic.name}-{ref.partition_id}"
        request = AlterPartitionReassignmentsRequest(
            (ReassignableTopic(ref.topic.name, (ReassignablePartition(ref.partition_id, target),)),)
        )
        response = self.request(f"reassign {name} -> {target}", request)
        error = response.responses[0].partitions[0].error.error
        assert error in (
            Errors.NONE,
            Errors.INVALID_REPLICA_ASSIGNMENT,
            Errors.NO_REASSIGNMENT_IN_PROGRESS,
        ), response
        if target is not None and set(target) <= set(registered):
            assert error is Errors.NONE, response

    def complete_reassignments(self) -> None:
        """Each reassigning partition's leader puts every replica in the ISR."""
        for ref in all_partitions(self.image):
            p = ref.partition
            if not p.is_reassigning() or p.leader < 0:
                continue
            self._all_caught_up(f"catch up {ref.topic.name}-{ref.partition_id}", ref)

    def _all_caught_up(self, what: str, ref: TopicPartitionRef) -> Any:
        """The leader's AlterPartition putting every replica in the ISR, at current epochs."""
        p = ref.partition
        leader = self.brokers[p.leader]
        data = AlterPartitionData(
            ref.topic.topic_id,
            ref.partition_id,
            p.leader_epoch,
            p.partition_epoch,
            tuple(BrokerState(b) for b in (p.leader, *(r for r in p.replicas if r != p.leader))),
        )
        return self.request(what, AlterPartitionRequest(leader.id, leader.epoch, (data,)))

    # --- liveness ---------------------------------------------------------------------------

    def quiesce(self) -> None:
        """Bring every broker back and let it heartbeat: all unfenced, every partition led."""
        self.events.append(f"t={self.now_ms} quiesce")
        for broker in self.brokers.values():
            if broker.process is Process.SHUTTING_DOWN:
                broker.process = Process.STOPPED
        self.now_ms += 10_000
        self.tick()
        for broker in self.brokers.values():
            if broker.process is Process.STOPPED:
                broker.process, broker.epoch = Process.RUNNING, -1
                broker.incarnation += 1
        for _ in range(6):
            self.now_ms += 1000
            for broker in self.brokers.values():
                self.heartbeat(broker, catch_up=1.0)
            self.tick()
        for broker in self.brokers.values():
            registration = self.image.cluster.brokers.get(broker.id)
            assert registration is not None and not registration.fenced, (
                f"broker {broker.id} still fenced after quiescing: {registration}"
            )
        for ref in self._online_partitions():
            assert ref.partition.leader >= 0, (
                f"{ref.topic.name}-{ref.partition_id} has no leader after quiescing"
            )
        self.complete_reassignments()
        for ref in self._online_partitions():
            assert not ref.partition.is_reassigning(), (
                f"{ref.topic.name}-{ref.partition_id} still reassigning with every replica in "
                f"sync: {ref.partition}"
            )
        # Balancing: once the followers caught up (every ISR whole again), a check interval
        # later every preferred replica leads its partition again.
        self._expand_every_isr()
        self.now_ms += BALANCE_INTERVAL_MS + 1
        self.tick()
        for ref in self._online_partitions():
            preferred = ref.partition.replicas[0]
            if preferred in ref.partition.isr:
                assert ref.partition.leader == preferred, (
                    f"{ref.topic.name}-{ref.partition_id} led by {ref.partition.leader}, not by "
                    f"its preferred replica {preferred} in ISR {ref.partition.isr}"
                )

    def _online_partitions(self) -> list[TopicPartitionRef]:
        """Every partition, but with KIP-966 on those whose every eligible replica restarted
        without a clean shutdown (empty ISR and ELR): no replica may lead them cleanly, so they
        wait, unclean election being off."""
        return [
            ref
            for ref in all_partitions(self.image)
            if not (self.elr and not ref.partition.isr and not ref.partition.elr)
        ]

    def _expand_every_isr(self) -> None:
        """Each leader reports all its replicas caught up (AlterPartition at current epochs)."""
        for ref in self._online_partitions():
            p = ref.partition
            if set(p.isr) == set(p.replicas):
                continue
            response = self._all_caught_up(f"caught up {ref.topic.name}-{ref.partition_id}", ref)
            assert response.partitions[0].error.is_success(), response


def _summary(response: Any) -> str:
    """Error names of a response: per item (topics, partitions, results) or the top level."""
    error = getattr(response, "error", None)
    if error is not None and error.is_failure():
        return str(error.name)
    for field in ("topics", "partitions", "results", "responses"):
        items = getattr(response, field, None)
        if items:
            return ",".join(_item_errors(item) for item in items)
    return "NONE" if error is not None else repr(response)[:60]


def _failed(response: Any) -> bool:
    """True when the whole request failed: a top-level error, or every item failed."""
    error = getattr(response, "error", None)
    if error is not None and error.is_failure():
        return True
    for field in ("topics", "partitions", "results", "responses"):
        items = getattr(response, field, None)
        if items:
            errors = [getattr(item, "error", None) for item in items]
            errors += [r.error for item in items for r in getattr(item, "partition_results", ())]
            errors += [r.error for item in items for r in getattr(item, "partitions", ())]
            # NEW_LEADER_ELECTED: the ISR change was written but leadership moved (a completed
            # reassignment removed the leader) — a success that writes.
            return all(
                e is None or (e.is_failure() and e.error is not Errors.NEW_LEADER_ELECTED)
                for e in errors
            )
    return False


def _item_errors(item: Any) -> str:
    error = getattr(item, "error", None)
    if error is not None:
        return str(error.name)
    results = getattr(item, "partition_results", ()) or getattr(item, "partitions", ())
    return "/".join(str(r.error.name) for r in results) or "NONE"
