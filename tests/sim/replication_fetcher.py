"""The shipped ``fetcher.ReplicaFetcher`` on the simulation's clock and network.

``ReplicaFetcher.run`` is a coroutine that awaits only its leader endpoint and its clock, both
injected. Here the endpoint is ``SimLeaderEndpoint`` (requests travel the simulated network to
the leader broker, whose shipped Kafka handlers answer them — ``replication_leader``; a Fetch
with nothing to send waits in the leader's delayed-fetch purgatory; an answer that does not
come within the request timeout fails the request as a lost connection does), and the clock is
``SimFetcherClock``. ``SimTask`` (``replication_net``) steps the coroutine by hand: no asyncio
loop runs, so a run stays a function of the seed.

``ObservedReplicaFetcher`` adds the checker's hooks around the shipped ``_apply`` (what is
truncated before it goes, what was appended, a completed truncation against the leader's
records); it decides nothing.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from typing import TYPE_CHECKING, Any, TypeVar, cast

from pykraft.fetcher.fetcher_config import FetcherConfig
from pykraft.fetcher.leader_codecs import FIRST_TRUNCATION_ON_FETCH_VERSION, LeaderFeatures
from pykraft.fetcher.leader_endpoint import LeaderEndpointError, ReplicaFetch
from pykraft.fetcher.replica_fetcher import ReplicaFetcher
from pykraft.fetcher.responses import (
    Append,
    FetchOutcome,
    LeaderOffsets,
    ResetOffset,
    Truncate,
)
from pykraft.fetcher.truncation import LeaderEpochEndOffset, LeaderEpochRequest, OffsetResetKind
from pykraft.protocol.fetch import PartitionData
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition
from tests.sim.replication_checks import InvariantViolation, PartitionKey
from tests.sim.replication_leader import (
    EpochAnswer,
    FetchAnswer,
    LeaderRecords,
    answer_epoch_end_offsets,
    answer_fetch,
    answer_leader_offsets,
)
from tests.sim.replication_log import stored_batches
from tests.sim.replication_net import SimFuture, SimTask

if TYPE_CHECKING:
    from tests.sim.replication_broker import SimBroker

T = TypeVar("T")

# The versions a pykraft leader negotiates; below 12 a Fetch carries no DivergingEpoch.
LIST_OFFSETS_VERSION = 7
OFFSET_FOR_LEADER_EPOCH_VERSION = 4


def key_of(topic_partition: TopicPartition) -> PartitionKey:
    return (topic_partition.topic, topic_partition.partition)


class SimFetcherClock:
    """``storage.clock.Clock`` on simulated time (one time serves as both); ``wait`` yields
    to the simulation's scheduler and ``wake`` ends an idle wait (``add_partitions``)."""

    def __init__(self, broker: SimBroker) -> None:
        self.broker = broker
        self._idle: SimFuture | None = None

    def monotonic_ms(self) -> int:
        return self.broker.env.now_ms

    def wall_clock_ms(self) -> int:
        return self.broker.env.now_ms

    async def wait(self, event: asyncio.Event, timeout_ms: int | None) -> None:
        if event.is_set():
            return
        idle = self._idle = SimFuture()
        if timeout_ms is not None:
            self.broker.schedule(max(0, timeout_ms), "fetcher idle", idle.resolve)
        await idle

    def wake(self) -> None:
        idle = self._idle
        if idle is not None and not idle.done:
            self.broker.schedule(0, "fetcher wakeup", idle.resolve)


class SimLeaderEndpoint:
    """``LeaderEndpoint`` over the simulated network to the leader broker."""

    def __init__(self, broker: SimBroker, leader_id: int) -> None:
        self.broker = broker
        self._leader_id = leader_id
        settings = broker.env.settings
        self._features = LeaderFeatures(
            fetch_version=FIRST_TRUNCATION_ON_FETCH_VERSION - (not settings.truncate_on_fetch),
            list_offsets_version=LIST_OFFSETS_VERSION,
            offset_for_leader_epoch_version=OFFSET_FOR_LEADER_EPOCH_VERSION,
        )
        # The leader's records with its latest answer per partition (for the prefix check).
        self.leader_records: dict[TopicPartition, LeaderRecords | None] = {}

    @property
    def leader_id(self) -> int:
        return self._leader_id

    async def features(self) -> LeaderFeatures:
        return self._features

    async def fetch(self, request: ReplicaFetch) -> dict[TopicPartition, PartitionData]:
        broker = self.broker
        replica_id, replica_epoch = broker.broker_id, broker.broker_epoch
        version = self._features.fetch_version
        answers: dict[TopicPartition, FetchAnswer] = await self._call(
            "Fetch",
            lambda leader: answer_fetch(leader, replica_id, replica_epoch, request, version),
        )
        for topic_partition, answer in answers.items():
            self.leader_records[topic_partition] = answer.leader_records
            if answer.leader_records is not None:
                broker.env.checker.stats["diverging epochs answered"] += 1
        return {topic_partition: answer.data for topic_partition, answer in answers.items()}

    async def fetch_epoch_end_offsets(
        self, requests: Mapping[TopicPartition, LeaderEpochRequest]
    ) -> dict[TopicPartition, LeaderEpochEndOffset]:
        self.broker.env.checker.stats["OffsetsForLeaderEpoch requests"] += len(requests)
        replica_id = self.broker.broker_id
        answers: dict[TopicPartition, EpochAnswer] = await self._call(
            "OffsetsForLeaderEpoch",
            lambda leader: answer_epoch_end_offsets(
                leader, replica_id, requests, OFFSET_FOR_LEADER_EPOCH_VERSION
            ),
        )
        for topic_partition, answer in answers.items():
            self.leader_records[topic_partition] = answer.leader_records
        return {topic_partition: answer.data for topic_partition, answer in answers.items()}

    async def fetch_leader_offsets(
        self, topic_partition: TopicPartition, current_leader_epoch: int
    ) -> LeaderOffsets:
        self.leader_records[topic_partition] = None
        replica_id = self.broker.broker_id
        return cast(
            LeaderOffsets,
            await self._call(
                "ListOffsets",
                lambda leader: answer_leader_offsets(
                    leader,
                    replica_id,
                    topic_partition,
                    current_leader_epoch,
                    LIST_OFFSETS_VERSION,
                ),
            ),
        )

    async def close(self) -> None:
        return None

    def _call(self, what: str, handle: Callable[[SimBroker], Any]) -> SimFuture:
        """Send one request to the leader; its answer, if it comes in time, resolves it."""
        broker, settings = self.broker, self.broker.env.settings
        future = SimFuture()
        broker.call_broker(self._leader_id, what, handle, future.resolve)
        broker.schedule(
            settings.request_timeout_ms,
            f"{what} timeout",
            lambda: future.resolve(error=LeaderEndpointError(f"{what} timed out")),
        )
        return future


class ObservedReplicaFetcher(ReplicaFetcher):
    """The shipped fetcher, with the checker's hooks around each outcome it carries out."""

    broker: SimBroker
    violation: InvariantViolation | None = None

    def _apply(self, topic_partition: TopicPartition, outcome: FetchOutcome) -> None:
        try:
            self._observed_apply(topic_partition, outcome)
        except InvariantViolation as violation:
            # ReplicaFetcher.run survives any exception of a round (a broker must go on):
            # the violation is kept, and raised once the step returns to the simulation.
            self.violation = violation
            raise

    def raise_violation(self) -> None:
        if self.violation is not None:
            raise self.violation

    def _observed_apply(self, topic_partition: TopicPartition, outcome: FetchOutcome) -> None:
        broker, action = self.broker, outcome.action
        checker, key = broker.env.checker, key_of(topic_partition)
        log = broker.disk.log(key)
        if isinstance(action, Truncate):
            checker.on_truncation(key, broker.broker_id, action.truncation.offset, log)
        elif isinstance(action, ResetOffset):
            if action.reset.kind is OffsetResetKind.TRUNCATE_TO_LEADER_END:
                checker.on_truncation(key, broker.broker_id, action.reset.fetch_offset, log)
            checker.stats[f"out-of-range resets ({action.reset.kind.value})"] += 1
        end_before = log.log_end_offset
        super()._apply(topic_partition, outcome)
        if isinstance(action, Append):
            checker.on_follower_append(key, broker.broker_id, list(stored_batches(log, end_before)))
        elif isinstance(action, Truncate) and action.truncation.truncation_completed:
            endpoint = cast(SimLeaderEndpoint, self.endpoint)
            leader_records = endpoint.leader_records.get(topic_partition)
            if leader_records is not None:
                checker.on_truncation_complete(key, broker.broker_id, log, leader_records)


def start_fetcher(
    broker: SimBroker, leader_id: int
) -> tuple[ObservedReplicaFetcher, SimTask, SimFetcherClock]:
    """A fetcher for ``leader_id``'s partitions, running (``ReplicaFetcher.start``)."""
    settings = broker.env.settings
    config = FetcherConfig(
        replica_id=broker.broker_id,
        fetch_wait_max_ms=settings.replica_fetch_wait_max_ms,
        fetch_max_bytes=broker.env.rng.choice((1, 200, 400, 1 << 20)),
        fetch_backoff_ms=settings.replica_fetch_backoff_ms,
    )
    clock = SimFetcherClock(broker)

    def log_for(topic_partition: TopicPartition) -> PartitionLog:
        return broker.disk.log(key_of(topic_partition))

    fetcher = ObservedReplicaFetcher(
        0, SimLeaderEndpoint(broker, leader_id), log_for, config, clock=clock
    )
    fetcher.broker = broker
    task = SimTask(broker, f"fetcher {leader_id}", fetcher.run, fetcher.raise_violation)
    return fetcher, task, clock
