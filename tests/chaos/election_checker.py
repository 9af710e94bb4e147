"""No unclean leader election, checked on the metadata log of a chaos run (issue 17).

With ``unclean.leader.election.enable`` off, a partition's new leader must come from the replicas
that are known to hold every acknowledged record: its ISR just before the election (KIP-966 adds
the eligible leader replicas to that set), and it never enters ``LeaderRecoveryState.RECOVERING``
(KIP-704), which only an unclean election sets. ``check_elections`` replays the committed log —
fetched from a controller the way brokers read it (``GET /v1/metadata/records``, after the
latest snapshot when the log below is gone; ``fetch_metadata_log``) — through ``MetadataDelta``,
and at every ``PartitionChangeRecord`` that sets a leader compares it with the partition as it
stood before that record. It also counts the elections by cause, as far as the records of the
same atomic batch tell it: the old leader fenced (its session ran out), shut down, re-registered
(restarted) or unregistered; the partition back from having no leader; the old leader dropped
from the ISR; a preferred-leader election; a reassignment.

Pure, but for ``fetch_metadata_log`` at the bottom.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import attrs

from pykraft.metadata.api.json_fields import Fields
from pykraft.metadata.api.records import MetadataBatch, records_page_from_json
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage, PartitionRegistration
from pykraft.metadata.records import (
    NO_LEADER,
    NO_LEADER_CHANGE,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    ConfigRecord,
    ConfigResourceType,
    FenceBrokerRecord,
    LeaderRecoveryState,
    MetadataRecord,
    PartitionChangeRecord,
    RegisterBrokerRecord,
    UnregisterBrokerRecord,
)
from pykraft.metadata.snapshot import decode_snapshot, snapshot_to_image

UNCLEAN = "unclean.leader.election.enable"
EXAMPLES_MAX = 5
RECORDS_PAGE_MAX = 100_000


@attrs.frozen
class Election:
    offset: int
    topic: str
    partition: int
    previous_leader: int
    leader: int
    leader_epoch: int
    cause: str


@attrs.frozen
class Violation:
    offset: int
    topic: str
    partition: int
    detail: str


@attrs.frozen
class ElectionReport:
    first_offset: int  # the first offset replayed (after the snapshot, if one was loaded)
    last_offset: int
    elections: tuple[Election, ...]
    offline: int  # changes that left a partition without a leader
    violations: tuple[Violation, ...]

    def of_topic(self, topic: str) -> ElectionReport:
        """The elections and violations of ``topic`` only (a run's own topic)."""
        return attrs.evolve(
            self,
            elections=tuple(e for e in self.elections if e.topic == topic),
            violations=tuple(v for v in self.violations if v.topic == topic),
        )

    def by_cause(self) -> Counter[str]:
        return Counter(e.cause for e in self.elections)

    def render(self) -> str:
        causes = ", ".join(f"{cause} {n}" for cause, n in sorted(self.by_cause().items()))
        lines = [
            f"metadata log {self.first_offset}..{self.last_offset}: {len(self.elections)} "
            f"leader elections ({causes or 'none'}), {self.offline} partitions left leaderless",
            f"unclean elections: {len(self.violations)}",
        ]
        lines += [f"  at {v.offset}: {v.topic}-{v.partition}: {v.detail}" for v in self.violations]
        return "\n".join(lines[: 2 + EXAMPLES_MAX])


def eligible_leaders(before: PartitionRegistration) -> set[int]:
    """The replicas a clean election may choose: the ISR as it stood, and with KIP-966 the
    eligible leader replicas (each held every record committed when it left the ISR)."""
    return set(before.isr) | set(before.elr)


@attrs.define
class _BatchContext:
    """What the records of one atomic batch say about brokers (the causes of its elections)."""

    fenced: set[int] = attrs.Factory(set)
    shutting_down: set[int] = attrs.Factory(set)
    registered: set[int] = attrs.Factory(set)
    unregistered: set[int] = attrs.Factory(set)

    @classmethod
    def of(cls, records: Iterable[MetadataRecord]) -> _BatchContext:
        context = cls()
        for record in records:
            match record:
                case FenceBrokerRecord():
                    context.fenced.add(record.id)
                case BrokerRegistrationChangeRecord():
                    if record.fenced == BrokerRegistrationFencingChange.FENCE:
                        context.fenced.add(record.broker_id)
                    shutdown = BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
                    if record.in_controlled_shutdown == shutdown:
                        context.shutting_down.add(record.broker_id)
                case RegisterBrokerRecord():
                    context.registered.add(record.broker_id)
                case UnregisterBrokerRecord():
                    context.unregistered.add(record.broker_id)
        return context

    def cause(self, before: PartitionRegistration, after: PartitionRegistration) -> str:
        old = before.leader
        if old == NO_LEADER:
            return "back from no leader"
        for brokers, cause in (
            (self.fenced, "old leader fenced"),
            (self.shutting_down, "old leader in controlled shutdown"),
            (self.unregistered, "old leader unregistered"),
            (self.registered, "old leader re-registered"),
        ):
            if old in brokers:
                return cause
        if before.replicas != after.replicas or after.is_reassigning():
            return "reassignment"
        if old not in after.isr:
            return "old leader left the ISR"
        if after.replicas and after.leader == after.replicas[0]:
            return "preferred leader"
        return "other"


class _Configs:
    """``unclean.leader.election.enable`` as the log sets it: per topic, then cluster-wide
    (the default broker resource, name ""), then the controllers' own setting."""

    def __init__(self, default: bool) -> None:
        self.default = default
        self.values: dict[tuple[int, str], str | None] = {}

    def replay(self, record: ConfigRecord) -> None:
        if record.name == UNCLEAN:
            self.values[(record.resource_type, record.resource_name)] = record.value

    def unclean_enabled(self, topic: str) -> bool:
        for resource in ((ConfigResourceType.TOPIC.value, topic), (ConfigResourceType.BROKER, "")):
            value = self.values.get(resource)
            if value is not None:
                return value.lower() == "true"
        return self.default


def check_elections(
    batches: Sequence[MetadataBatch],
    base: MetadataImage = MetadataImage.EMPTY,
    unclean_default: bool = False,
) -> ElectionReport:
    """Every leader change of ``batches`` (replayed onto ``base``) checked for cleanliness;
    ``unclean_default`` is the controllers' ``unclean.leader.election.enable``."""
    delta = MetadataDelta(base)
    configs = _Configs(unclean_default)
    elections: list[Election] = []
    violations: list[Violation] = []
    offline = 0
    for batch in batches:
        context = _BatchContext.of(batch.records)
        for index, record in enumerate(batch.records):
            offset = batch.base_offset + index
            before = None
            if isinstance(record, PartitionChangeRecord) and record.leader != NO_LEADER_CHANGE:
                before = _partition(delta, record)
            elif isinstance(record, ConfigRecord):
                configs.replay(record)
            delta.replay(record, offset=offset, epoch=batch.epoch)
            if before is None:
                continue
            assert isinstance(record, PartitionChangeRecord)
            after = _partition(delta, record)
            assert after is not None
            if after.leader == NO_LEADER:
                offline += before.leader != NO_LEADER
                continue
            topic = delta.topics.topic(record.topic_id).name  # type: ignore[union-attr]
            election = Election(
                offset, topic, record.partition_id, before.leader, after.leader,
                after.leader_epoch, context.cause(before, after),
            )  # fmt: skip
            found = judge(before, after, configs.unclean_enabled(topic))
            if after.leader not in eligible_leaders(before):
                election = attrs.evolve(election, cause="unclean")
            elections.append(election)
            violations += [Violation(offset, topic, record.partition_id, d) for d in found]
    first = base.offset + 1 if batches else base.offset
    return ElectionReport(first, delta.offset, tuple(elections), offline, tuple(violations))


def judge(
    before: PartitionRegistration, after: PartitionRegistration, unclean_allowed: bool
) -> list[str]:
    """What is wrong with the election that made ``after`` of ``before``."""
    if unclean_allowed:
        return []
    found = []
    if after.leader not in eligible_leaders(before):
        found.append(
            f"leader {after.leader} (epoch {after.leader_epoch}) is not in the ISR "
            f"{sorted(before.isr)} it was elected from (leader was {before.leader})"
            + (f" nor in the ELR {sorted(before.elr)}" if before.elr else "")
        )
    if after.leader_recovery_state == LeaderRecoveryState.RECOVERING:
        found.append(f"leader {after.leader} is RECOVERING with {UNCLEAN}=false")
    return found


def _partition(delta: MetadataDelta, record: PartitionChangeRecord) -> PartitionRegistration | None:
    topic_delta = delta.topics.topic(record.topic_id)
    return topic_delta.partition(record.partition_id) if topic_delta else None


# ---------------------------------------------------------------- reading the log


Get = Callable[[str], Any]  # GET a controller path: parsed JSON, or bytes for a snapshot


def fetch_metadata_log(get: Get) -> tuple[MetadataImage, list[MetadataBatch]]:
    """The committed metadata log as a controller serves it to brokers: from offset 0, or after
    its latest snapshot (returned as the base image) when the log below it is gone."""
    snapshots = get("/v1/metadata/snapshots")
    base, next_offset = MetadataImage.EMPTY, 0
    first = get_page(get, 0)
    if first is None:  # 409 SNAPSHOT_REQUIRED
        latest = snapshots["latest"]
        header, records = decode_snapshot(get(f"/v1/metadata/snapshots/{latest}"), latest)
        base = snapshot_to_image(header, records, latest)
        next_offset = header.end_offset
        first = get_page(get, next_offset)
        assert first is not None, f"the log after snapshot {latest} is gone too"
    batches = list(first.batches)
    next_offset, end = first.next_offset, first.log_end_offset
    while next_offset < end:
        page = get_page(get, next_offset)
        assert page is not None and page.next_offset > next_offset
        batches += page.batches
        next_offset = page.next_offset
    return base, batches


def get_page(get: Get, from_offset: int) -> Any:
    """One records page from ``from_offset``, or None when a snapshot is needed."""
    answer = get(f"/v1/metadata/records?from={from_offset}&max_records={RECORDS_PAGE_MAX}")
    if answer is None:
        return None
    return records_page_from_json(Fields(answer))


def check_cluster(controllers: Any) -> ElectionReport:
    """``check_elections`` over the log the active controller of ``controllers`` (a
    ``tests.integration.conftest.Cluster``) serves; its ``unclean.leader.election.enable`` is
    the default, off (no chaos cluster sets it)."""
    base, batches = fetch_metadata_log(controller_get(controllers.wait_for_leader().url))
    return check_elections(batches, base)


def controller_get(url: str, headers: dict[str, str] | None = None) -> Get:
    """``Get`` against the controller at ``url``: None for 409 SNAPSHOT_REQUIRED."""
    from tests.integration.conftest import HttpError, http

    def get(path: str) -> Any:
        try:
            return http("GET", url + path, timeout=15, headers=headers)
        except HttpError as error:
            if error.status == 409:
                return None
            raise

    return get
