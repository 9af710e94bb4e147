"""Faults for the replication sim, the crash rule, and the final heal-and-converge phase.

Every few simulated seconds ``FaultInjector`` picks a fault and a broker with the seeded
random source, and injects it if the rules allow (else it skips this turn):

* kill -9 (``KILL``): the process dies, the page cache survives; restart later;
* power loss (``POWER_LOSS``): the process dies and unflushed batches are gone; only under the
  crash rule of ``replication_sim`` (unless ``crash_rule=False``);
* ``PAUSE`` (SIGSTOP): the broker runs nothing until resumed, then catches up on what waited;
* ``ISOLATE``: a network partition of one broker from every other node;
* ``CUT_LINK``: one broker-to-broker link down (both still reach the controller);
* ``SLOW_LINK``: one broker-to-broker link slow (``SLOW_LINK_EXTRA_MS``), a follower lagging
  while it stays in the ISR — what tells a high watermark over every ISR member from one over
  a majority, now that a follower's fetch is answered as soon as the leader appends;
* ``CONTROLLED_SHUTDOWN``: SIGTERM — leadership moves away, the logs are flushed and the high
  watermarks checkpointed, then the broker restarts;
* ``ELECT_PREFERRED``: an operator's preferred leader election.

A data-centre outage (``OUTAGE``) is scheduled, not drawn: with ``SimSettings.outage_at_ms``
every broker loses power at once — running, paused or already down (a dead process's page
cache goes too) — and all come back together after a seeded 1-10 s; no broker starts in
between. Until a record is acknowledged (early faults can keep the producer from it) an outage
puts nothing at stake, so it waits for the first acknowledgement. It ignores the crash rule:
it is the case the rule keeps out (every replica of a partition losing its unflushed tail at
once), which only ``flush.messages`` survives: each append is fsynced before the leader counts
it or a follower's next fetch reports it, so an acknowledged record is durable on every ISR
member. With Kafka's default (no flush.messages, leave it to the OS and replication) the
outage loses acknowledged records — the trade-off Kafka documents — and ``flush.ms`` bounds
what a running broker loses to records acknowledged within flush.ms (plus
log.flush.scheduler.interval.ms, how often brokers check it) of the outage; a killed or
paused process flushes nothing. One replica's loss can be enough: the controller fences the
brokers one at a time, the last member of an ISR stays in it (Kafka without KIP-966) and is
elected once it registers again, whatever it lost. So the outage records what each replica
lost (``outage_unflushed``) as well as what no replica kept (``outage_lost``). The
controller keeps running: its journal's durability is ``journal_faults``' concern.

Besides, a committed leader or ISR change sometimes draws a fault at the partition's leader
within 100 ms (``react``): back-to-back leader failures (KIP-279), and a follower that just
joined the ISR becoming leader — timings random faults every few seconds almost never hit.

At most ``MAX_FAULTY`` brokers are unhealthy at once, and a kill, pause, isolation or shutdown
waits while a broker is ``suspect`` (the crash rule). ``quiesce`` heals everything, stops the
producer, and runs until every replica has every record and all three are in the ISR; within
``QUIESCE_LIMIT_MS`` of simulated time, or the run fails (liveness).
"""

from __future__ import annotations

import enum
import functools
from collections import Counter, deque
from collections.abc import Sequence
from typing import TYPE_CHECKING

from pykraft.broker.lifecycle import BrokerState
from pykraft.metadata.records import MetadataRecord, PartitionChangeRecord
from pykraft.quorum.controller import ElectionType, ElectLeadersRequest
from tests.sim.replication_broker import SimBroker
from tests.sim.replication_checks import PartitionKey, fail
from tests.sim.replication_log import describe
from tests.sim.replication_log import records as log_records

if TYPE_CHECKING:
    from tests.sim.replication_sim import ReplicationSimulation

MAX_FAULTY = 2
QUIESCE_LIMIT_MS = 120_000
CONVERGENCE_CHECK_EVERY = 200
MAX_HISTORY = 12
# Extra latency of a slow link: below request.timeout.ms, so fetches over it still complete.
SLOW_LINK_EXTRA_MS = (100, 1500)
# How often a committed leader or ISR change draws a targeted fault at the partition's leader.
REACT_PROBABILITY = 0.15
# How often a scheduled outage that found nothing acknowledged yet looks again.
OUTAGE_RETRY_MS = 500


class CrashRule(enum.Enum):
    """When a power loss may be scheduled (``replication_sim``'s docstring says why)."""

    # Replication alone keeps acknowledged data: the last copy is never at risk.
    KAFKA = "kafka"
    # KIP-966's guarantee with eligible leader replicas on: any broker, any time, while fewer
    # than min.insync.replicas brokers are missing records they held before a power loss.
    KIP_966 = "kip-966"
    # Anything goes: acknowledged records can be lost (the rules' own tests).
    NONE = "none"


class FaultKind(enum.Enum):
    KILL = "kill -9"
    POWER_LOSS = "power loss"
    PAUSE = "pause"
    ISOLATE = "isolate"
    CUT_LINK = "cut link"
    SLOW_LINK = "slow link"
    CONTROLLED_SHUTDOWN = "controlled shutdown"
    ELECT_PREFERRED = "preferred election"
    # Never drawn (not in WEIGHTS): scheduled by SimSettings.outage_at_ms.
    OUTAGE = "outage"


WEIGHTS = {
    FaultKind.KILL: 3,
    FaultKind.POWER_LOSS: 4,
    FaultKind.PAUSE: 2,
    FaultKind.ISOLATE: 2,
    FaultKind.CUT_LINK: 2,
    FaultKind.SLOW_LINK: 3,
    FaultKind.CONTROLLED_SHUTDOWN: 2,
    FaultKind.ELECT_PREFERRED: 2,
}


class FaultInjector:
    # The wait between two random faults, and how many brokers may be unhealthy at once (the
    # transaction sim has its own).
    fault_interval_ms = (500, 5000)
    max_faulty = MAX_FAULTY

    def __init__(self, sim: ReplicationSimulation, *, crash_rule: bool | CrashRule) -> None:
        self.sim = sim
        if isinstance(crash_rule, bool):
            crash_rule = CrashRule.KAFKA if crash_rule else CrashRule.NONE
        self.rule = crash_rule
        self.crash_rule = crash_rule is CrashRule.KAFKA
        self.active = True
        # KIP-966 rule: brokers that lost unflushed data -> per partition, the log end they
        # must reach again (the acknowledged records then) before they count as whole.
        self.missing: dict[int, dict[tuple[str, int], int]] = {}
        # Brokers that lost unflushed data -> the broker epoch of the registration that may
        # still be in an ISR (until the controller fences it or a new one replaces it).
        self.suspect: dict[int, int] = {}
        self.injected: Counter[FaultKind] = Counter()
        # Until then every broker is without power (an outage): nothing restarts.
        self.powered_off_until = 0
        # What the outage found: acknowledged records then, the ones each broker held and
        # lost (unflushed there), and the ones no replica kept; and, per broker whose process
        # ran unpaused, since when its ``LogManager`` had been flushing.
        self.outage_acked: dict[tuple[str, int], dict[int, str]] = {}
        self.outage_unflushed: dict[int, dict[PartitionKey, dict[int, str]]] = {}
        self.outage_lost: dict[tuple[str, int], dict[int, str]] = {}
        self.outage_running_since: dict[int, int] = {}
        # The latest faults and restarts, for the failure message.
        self.history: deque[str] = deque(maxlen=MAX_HISTORY)

    def start(self) -> None:
        self.sim.queue.after(self.sim.rng.randint(3000, 6000), "fault", self._fault)
        if self.sim.settings.outage_at_ms is not None:
            self.sim.queue.at(self.sim.settings.outage_at_ms, "outage", self.outage)

    # ------------------------------------------------------------------ rules

    def healthy(self, broker_id: int) -> bool:
        """Running, not paused, reachable, not shutting down, registered and unfenced."""
        sim = self.sim
        broker = sim.brokers[broker_id]
        if broker is None or sim.paused_until[broker_id] > sim.now_ms:
            return False
        if sim.network.isolated == broker_id or broker.lifecycle.state not in (
            BrokerState.STARTING,
            BrokerState.RECOVERY,
            BrokerState.RUNNING,
        ):
            return False
        registration = sim.image.cluster.brokers.get(broker_id)
        return (
            registration is not None
            and registration.epoch == broker.broker_epoch
            and not registration.fenced
        )

    def _may_lose_unflushed(self, broker: SimBroker) -> bool:
        """The crash rule (see ``replication_sim``)."""
        if self.rule is CrashRule.NONE:
            return True
        if self.rule is CrashRule.KIP_966:
            others = set(self.missing) - {broker.broker_id}
            return len(others) < self.sim.settings.min_insync_replicas - 1
        sim = self.sim
        if self.suspect or not broker.alter_partitions.idle:
            return False
        if not all(self.healthy(b) for b in sim.brokers if b != broker.broker_id):
            return False
        for key in sim.partition_keys():
            registration = sim.registration(key)
            if (
                registration is not None
                and broker.broker_id in registration.isr
                and len(registration.isr) < 2
            ):
                return False
        return True

    def _allowed(self, kind: FaultKind, broker_id: int) -> bool:
        sim = self.sim
        broker = sim.brokers[broker_id]
        if kind in (FaultKind.ELECT_PREFERRED, FaultKind.CUT_LINK, FaultKind.SLOW_LINK):
            return True
        if broker is None:
            return False
        if kind is FaultKind.POWER_LOSS:
            return self._may_lose_unflushed(broker)
        unhealthy = sum(not self.healthy(b) for b in sim.brokers)
        if not self.healthy(broker_id) or unhealthy >= self.max_faulty:
            return False
        if self.rule is CrashRule.KAFKA and self.suspect:
            return False
        return kind is not FaultKind.ISOLATE or sim.network.isolated is None

    # ------------------------------------------------------------------ injecting

    def _fault(self) -> None:
        if not self.active:
            return
        sim, rng = self.sim, self.sim.rng
        sim.queue.after(rng.randint(*self.fault_interval_ms), "fault", self._fault)
        kind = rng.choices(list(WEIGHTS), weights=list(WEIGHTS.values()))[0]
        self._inject(kind, rng.randrange(len(sim.brokers)))

    def react(self, records: Sequence[MetadataRecord]) -> None:
        """Jepsen-style targeted faults: sometimes crash a partition's leader right after an
        ISR change or its election (back-to-back leader failures, KIP-279; a follower that
        just joined the ISR becoming leader)."""
        sim, rng = self.sim, self.sim.rng
        for record in records:
            if not self.active or not isinstance(record, PartitionChangeRecord):
                continue
            topic = sim.image.topics.by_id.get(record.topic_id)
            partition = None if topic is None else topic.partitions.get(record.partition_id)
            if partition is None or partition.leader < 0 or rng.random() >= REACT_PROBABILITY:
                continue
            kind = rng.choice(
                (
                    FaultKind.KILL,
                    FaultKind.KILL,
                    FaultKind.POWER_LOSS,
                    FaultKind.CONTROLLED_SHUTDOWN,
                    FaultKind.ISOLATE,
                )
            )
            leader = partition.leader
            sim.queue.after(
                rng.randint(0, 100),
                f"react: {kind.value} leader {leader}",
                functools.partial(self._inject, kind, leader),
            )

    def _inject(self, kind: FaultKind, broker_id: int) -> None:
        sim, rng = self.sim, self.sim.rng
        if not self.active or not self._allowed(kind, broker_id):
            return
        self.injected[kind] += 1
        sim.checker.stats[f"faults: {kind.value}"] += 1
        self._note(f"FAULT {kind.value} broker {broker_id}")
        if kind is FaultKind.KILL or kind is FaultKind.POWER_LOSS:
            self.crash(broker_id, lose_unflushed=kind is FaultKind.POWER_LOSS)
        elif kind is FaultKind.PAUSE:
            sim.paused_until[broker_id] = sim.now_ms + rng.randint(100, 12_000)
        elif kind is FaultKind.ISOLATE:
            self._isolate(broker_id, rng.randint(500, 15_000))
        elif kind is FaultKind.CUT_LINK:
            self._cut(broker_id, rng.randint(500, 20_000))
        elif kind is FaultKind.SLOW_LINK:
            self._slow(broker_id, rng.randint(*SLOW_LINK_EXTRA_MS), rng.randint(2000, 30_000))
        elif kind is FaultKind.CONTROLLED_SHUTDOWN:
            broker = sim.brokers[broker_id]
            assert broker is not None
            broker.begin_controlled_shutdown()
        else:
            sim.commit(
                sim.controller.handle(
                    sim.image, ElectLeadersRequest(ElectionType.PREFERRED, None), sim.now_ms
                )
            )

    def crash(self, broker_id: int, *, lose_unflushed: bool) -> None:
        self._power_off(broker_id, lose_unflushed=lose_unflushed)
        self._restart_later(broker_id, self.sim.rng.randint(200, 15_000))

    def outage(self) -> None:
        """Every broker loses power at once (see the module docstring); all restart together.
        With nothing acknowledged yet it looks again every ``OUTAGE_RETRY_MS``."""
        sim = self.sim
        if not self.active:
            return
        if not any(sim.checker.acked.values()):
            sim.queue.after(OUTAGE_RETRY_MS, "outage (nothing acknowledged yet)", self.outage)
            return
        self.injected[FaultKind.OUTAGE] += 1
        sim.checker.stats[f"faults: {FaultKind.OUTAGE.value}"] += 1
        self._note("FAULT outage: every broker loses power")
        self.outage_acked = {key: dict(acked) for key, acked in sim.checker.acked.items()}
        held = self.acknowledged_on_disk()
        self.outage_running_since = {
            broker_id: sim.paused_until[broker_id]  # its start (start_broker) or last pause's end
            for broker_id, broker in sim.brokers.items()
            if broker is not None and sim.paused_until[broker_id] <= sim.now_ms
        }
        for broker_id in sim.brokers:
            self._power_off(broker_id, lose_unflushed=True)
        after = self.acknowledged_on_disk()
        kept = {
            key: set().union(*(on_disk.get(key, set()) for on_disk in after.values()))
            for key in self.outage_acked
        }
        self.outage_lost = {
            key: {o: v for o, v in acked.items() if (o, v) not in kept[key]}
            for key, acked in self.outage_acked.items()
        }
        self.outage_unflushed = {
            broker_id: {
                key: dict(sorted(records - after[broker_id].get(key, set())))
                for key, records in on_disk.items()
            }
            for broker_id, on_disk in held.items()
        }
        sim.checker.stats["outage: acknowledged records before it"] += sum(
            map(len, self.outage_acked.values())
        )
        sim.checker.stats["outage: acknowledged records lost by a replica in it"] += sum(
            len(records) for lost in self.outage_unflushed.values() for records in lost.values()
        )
        sim.checker.stats["outage: acknowledged records on no replica after it"] += sum(
            map(len, self.outage_lost.values())
        )
        self.powered_off_until = sim.now_ms + sim.rng.randint(1000, 10_000)

        def power_back() -> None:
            self._note("outage over: every broker restarts")
            for broker_id in sim.brokers:
                sim.start_broker(broker_id)

        sim.queue.at(self.powered_off_until, "power back", power_back)

    def acknowledged_on_disk(self) -> dict[int, dict[PartitionKey, set[tuple[int, str]]]]:
        """Per broker and partition, the acknowledged ``(offset, value)`` records its disk
        holds."""
        acked = self.sim.checker.acked
        return {
            broker_id: {
                key: {(o, v) for o, _, v in log_records(log) if acked[key].get(o) == v}
                for key, log in disk.logs.items()
                if key in acked
            }
            for broker_id, disk in self.sim.disks.items()
        }

    def _power_off(self, broker_id: int, *, lose_unflushed: bool) -> None:
        """The process dies (if it runs); with ``lose_unflushed`` the page cache goes too."""
        sim = self.sim
        registration = sim.image.cluster.brokers.get(broker_id)
        sim.brokers[broker_id] = None
        if lose_unflushed:
            self._count_losses(broker_id)
        sim.disks[broker_id].crash(lose_unflushed=lose_unflushed, now_ms=sim.now_ms)
        reports = sim.disks[broker_id].log_manager.load_reports.values()
        sim.checker.stats["crash restarts: logs recovered from a checkpointed recovery point"] += (
            sum(report.recovery_point > 0 for report in reports)
        )
        if lose_unflushed and registration is not None:
            self.suspect[broker_id] = registration.epoch
        if lose_unflushed:
            self._note_missing(broker_id)

    def _count_losses(self, broker_id: int) -> None:
        checker = self.sim.checker
        disk = self.sim.disks[broker_id]
        for key in disk.logs:
            lost = disk.unflushed(key)
            acked = checker.acked.get(key, {})
            checker.stats["power loss: batches lost"] += len(lost)
            checker.stats["power loss: acknowledged records lost on one replica"] += sum(
                offset in acked
                for base_offset, last_offset in lost
                for offset in range(base_offset, last_offset + 1)
            )

    def _note_missing(self, broker_id: int) -> None:
        """KIP-966 rule: the broker is missing acknowledged records until its logs reach,
        again, every offset acknowledged before the loss."""
        acked = self.sim.checker.acked
        ends = {key: max(acked[key]) + 1 for key in acked if acked[key]}
        self.missing[broker_id] = {**self.missing.get(broker_id, {}), **ends}

    def _update_missing(self) -> None:
        sim = self.sim
        for broker_id, ends in list(self.missing.items()):
            disk = sim.disks[broker_id]
            whole = True
            for key, end in ends.items():
                registration = sim.registration(key)
                if registration is None or broker_id not in registration.replicas:
                    continue  # no longer a replica: it will never fetch the records again
                log = disk.logs.get(key)
                if log is None or log.log_end_offset < end or broker_id not in registration.isr:
                    whole = False
            if whole and sim.brokers[broker_id] is not None:
                del self.missing[broker_id]

    def _note(self, what: str) -> None:
        self.sim.queue.note(what)
        self.history.append(f"t={self.sim.now_ms} {what}")

    def _restart_later(self, broker_id: int, delay_ms: int) -> None:
        def restart() -> None:
            if self.sim.now_ms < self.powered_off_until:
                return  # no power: the outage's end starts every broker
            if self.sim.brokers[broker_id] is None:
                self._note(f"restart broker {broker_id}")
                self.sim.start_broker(broker_id)

        self.sim.queue.after(delay_ms, f"restart broker {broker_id}", restart)

    def _isolate(self, broker_id: int, duration_ms: int) -> None:
        network = self.sim.network
        network.isolated = broker_id

        def heal() -> None:
            if network.isolated == broker_id:
                network.isolated = None

        self.sim.queue.after(duration_ms, f"heal isolation of {broker_id}", heal)

    def _cut(self, broker_id: int, duration_ms: int) -> None:
        sim = self.sim
        other = sim.rng.choice([b for b in sim.brokers if b != broker_id])
        link = frozenset((broker_id, other))
        sim.network.cut_links.add(link)
        sim.queue.after(
            duration_ms,
            f"heal link {broker_id}-{other}",
            lambda: sim.network.cut_links.discard(link),
        )

    def _slow(self, broker_id: int, extra_ms: int, duration_ms: int) -> None:
        sim = self.sim
        other = sim.rng.choice([b for b in sim.brokers if b != broker_id])
        link = frozenset((broker_id, other))
        sim.network.slow_links[link] = extra_ms

        def heal() -> None:
            sim.network.slow_links.pop(link, None)

        sim.queue.after(duration_ms, f"heal slow link {broker_id}-{other}", heal)

    def on_clean_shutdown(self, broker: SimBroker) -> None:
        """The process exits after a clean shutdown: nothing is lost."""
        broker.close()
        self.sim.brokers[broker.broker_id] = None
        self.sim.disks[broker.broker_id].restart(self.sim.now_ms)
        self._restart_later(broker.broker_id, self.sim.rng.randint(200, 5000))

    def on_commit(self, records: Sequence[MetadataRecord]) -> None:
        """A suspect broker is safe again once its old registration is fenced or replaced:
        the controller dropped it from every ISR in the same batch."""
        brokers = self.sim.image.cluster.brokers
        for broker_id, epoch in list(self.suspect.items()):
            registration = brokers.get(broker_id)
            if registration is None or registration.epoch != epoch or registration.fenced:
                del self.suspect[broker_id]
        self._update_missing()
        self.react(records)

    # ------------------------------------------------------------------ the end

    def quiesce(self) -> None:
        """Heal everything, stop producing, and wait for the replicas to converge."""
        sim = self.sim
        self.active = False
        sim.producing = False
        self._note("quiesce: heal the network, resume and restart every broker")
        sim.network.heal()
        sim.network.drop_probability = 0.0
        for broker_id in sim.brokers:
            sim.paused_until[broker_id] = min(sim.paused_until[broker_id], sim.now_ms)
            sim.start_broker(broker_id)
        deadline = sim.now_ms + QUIESCE_LIMIT_MS
        while not self.converged() or not self._settled():
            if sim.now_ms > deadline:
                fail(
                    f"replicas did not converge within {QUIESCE_LIMIT_MS} ms of healing: "
                    f"{self.describe()}"
                )
            for _ in range(CONVERGENCE_CHECK_EVERY):
                sim.queue.run_next()
                sim.check()
        # The final read of a partition left offline is of the replica that kept every
        # acknowledged record; of a converged one, of any replica (they are equal).
        readers: dict[tuple[str, int], int] = {}
        for key in sim.partition_keys():
            logs = {b: sim.disks[b].log(key) for b in sim.brokers}
            if key in self.offline():
                sim.checker.stats["KIP-966: partitions left offline"] += 1
                readers[key] = sim.checker.check_kept(key, logs)
            else:
                sim.checker.check_converged(key, logs)
        sim.check_history(readers)

    def offline(self) -> set[tuple[str, int]]:
        """KIP-966 runs: partitions no replica may lead cleanly any more — empty ISR and ELR
        (every eligible replica restarted without a clean-shutdown epoch). KIP-966 keeps them
        offline rather than elect a replica that may lack acknowledged records; Kafka 4.x then
        elects the last known leader, an unclean election pykraft leaves to the operator."""
        if self.rule is not CrashRule.KIP_966:
            return set()
        return {
            key
            for key in self.sim.partition_keys()
            if (registration := self.sim.registration(key)) is not None
            and registration.isr == ()
            and registration.elr == ()
        }

    def _settled(self) -> bool:
        """Every broker running and registered (checked apart from the partitions, which an
        offline partition would keep from converging)."""
        return all(
            b is not None and b.lifecycle.state is BrokerState.RUNNING
            for b in self.sim.brokers.values()
        )

    def converged(self) -> bool:
        sim = self.sim
        if any(
            b is None or b.lifecycle.state is not BrokerState.RUNNING for b in sim.brokers.values()
        ):
            return False
        offline = self.offline()
        for key in sim.partition_keys():
            if key in offline:
                continue
            registration = sim.registration(key)
            if (
                registration is None
                or registration.leader < 0
                or len(registration.isr) != len(sim.brokers)
            ):
                return False
            leader = sim.brokers[registration.leader]
            partition = None if leader is None else leader.partitions.get(key)
            if partition is None or partition.leader_epoch != registration.leader_epoch:
                return False
            logs = [sim.disks[b].log(key) for b in sim.brokers]
            leader_log = sim.disks[registration.leader].log(key)
            if any(
                log.high_watermark != leader_log.log_end_offset
                or log.log_end_offset != leader_log.log_end_offset
                for log in logs
            ):
                return False
            if any(log_records(log) != log_records(leader_log) for log in logs):
                return False
        return True

    def describe(self) -> str:
        sim = self.sim
        parts = [repr(b) for b in sim.brokers.values()]
        for key in sim.partition_keys():
            parts.append(f"{key}: {sim.registration(key)}")
            parts.extend(f"  b{b}: {describe(sim.disks[b].log(key))}" for b in sim.brokers)
        return "\n".join(parts)
