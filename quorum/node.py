"""ControllerNode: one controller process's Raft node, metadata view and write path.

Theory of operation
-------------------
Writes go only through ``ControllerNode.write(operation)``, on the asyncio thread:

  1. ``require_leader()``: a follower answers NOT_CONTROLLER with the leader's URL (the client
     retries there; pysyncobj's own forwarding is never relied on).
  2. Under one lock (the active controller handles one write at a time, like Kafka's
     single-threaded QuorumController), ``operation(image, now_ms)`` computes the records and
     response against the current image (pure, quorum/controller.py).
  3. The records are proposed as one atomic batch with ``expected_last_offset = image.offset``;
     ``apply`` rejects the batch as STALE if the log moved meanwhile (a new leader still
     applying the previous term's entries). Then the operation is recomputed against the new
     image, at most ``MAX_WRITE_ATTEMPTS`` times.
  4. The response is returned once the batch is committed and applied to the view.

A write whose outcome is unknown (timeout, leadership lost after proposing) answers
REQUEST_TIMED_OUT / NOT_CONTROLLER; writes are idempotent at the request level where Kafka's are
(register with the same incarnation id, heartbeat), and otherwise safe to retry.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import random
import sys
from collections.abc import Callable, Sequence
from typing import TypeVar

from pysyncobj import FAIL_REASON

from pykraft.metadata.api.errors import status_of
from pykraft.metadata.codec import MetadataCodecError
from pykraft.metadata.compact_codec import encode_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import MetadataRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.broker_channels import BrokerChannels
from pykraft.quorum.broker_rates import HeartbeatRates
from pykraft.quorum.commit_trace import CommitTrace
from pykraft.quorum.config import ControllerConfig
from pykraft.quorum.controller import ControllerResult, ControllerSettings, QuorumController
from pykraft.quorum.metadata_view import MetadataView, RaftBridge
from pykraft.quorum.metrics import ControllerMetrics
from pykraft.quorum.raft import describe_failure
from pykraft.quorum.raft_batch import CompactBatch, encode_batch
from pykraft.quorum.raft_dynamic import open_metadata_raft
from pykraft.quorum.raft_state import ApplyResult, ApplyStatus
from pykraft.storage.clock import Clock

logger = logging.getLogger(__name__)

# Bounds (STYLE.md §7).
MAX_WRITE_ATTEMPTS = 8
STALE_CATCH_UP_WAIT_S = 1.0
# CPython's collector runs a young collection every 700 net allocations; replaying a batch of
# records allocates ~10 container objects per record, so a 2,001-record topic triggered ~30
# young and several full collections (each walking the whole image). Measured in-process over
# 40 topics of 2,000 partitions (leader + follower work): GC 26 ms per batch with the defaults,
# 6 ms with these; longest pauses 0.2/0.9/137 ms (gen 0/1/2) -> 1.7/11/106 ms, full
# collections 14 -> 1.
GC_THRESHOLDS = (10_000, 10, 10)
# The Raft thread and the event loop hand every commit to each other (propose, then the
# result); a thread woken while the other holds the GIL waits for a blocking call of that thread
# or CPython's switch interval, 5 ms by default. 0.5 ms bounds that wait: bench/quorum.py
# --fsync-only interleaved with 5 ms, 6 pairs on the shared box (load 9.5-14.5): p50 fsync off
# 1.73/1.84/1.73/1.84/1.87/1.71 -> 1.72/1.56/1.65/1.68/1.84/1.67 ms, fsync on
# 2.80/2.79/2.39/2.48/2.95/2.40 -> 2.18/2.38/2.62/2.35/2.91/2.39 ms, CPU per commit unchanged.
GIL_SWITCH_INTERVAL_S = 0.0005

T = TypeVar("T")
# (controller, image, now_ms) -> records to commit atomically + the response once they commit
Operation = Callable[[QuorumController, MetadataImage, int], ControllerResult[T]]


class ServiceError(Exception):
    """An expected failure answered as ``{"error": code, "message": ...}`` with ``status``."""

    def __init__(
        self,
        status: int,
        code: str,
        message: str,
        leader: str | None = None,
        extra: dict[str, object] | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.code = code
        self.message = message
        self.leader = leader
        self.extra = extra or {}


def proposal_blob(
    expected_last_offset: int, epoch: int, append_time_ms: int, records: Sequence[MetadataRecord]
) -> bytes:
    """The Raft entry proposing ``records`` (``quorum.raft_batch`` format 2).

    A record holding a value outside its Kafka type (an HTTP field that was an integer but not
    an int32, say) is refused here, before it is in the log — a follower, a snapshot load or a
    broker would refuse it later — as INVALID_REQUEST naming the record and the field.
    """
    try:
        payload = encode_records(records)
    except MetadataCodecError as error:
        raise ServiceError(
            400, "INVALID_REQUEST", f"A metadata record would be invalid: {error}"
        ) from None
    return encode_batch(
        CompactBatch(
            expected_last_offset=expected_last_offset,
            epoch=epoch,
            append_time_ms=append_time_ms,
            record_count=len(records),
            payload=payload,
        )
    )


class ControllerNode:
    def __init__(
        self, config: ControllerConfig, loop: asyncio.AbstractEventLoop, clock: Clock
    ) -> None:
        # One ControllerNode per controller process: it sets the process's collector policy
        # and GIL switch interval.
        gc.set_threshold(*GC_THRESHOLDS)
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
        self.config = config
        # The controller's now_ms is monotonic: it times broker sessions and the NoOp interval
        # only (Kafka's BrokerHeartbeatManager keeps lastContactNs on time.nanoseconds()); wall
        # time dates what is written (the batch's append time, snapshots).
        self.clock = clock
        self.view = MetadataView(config.window_records)
        self.bridge = RaftBridge(loop, self.view)
        # The active controller's watch on its brokers' long-poll connections.
        self.broker_channels = BrokerChannels()
        # PYKRAFT_COMMIT_TRACE (benchmarks): time every commit's hand-offs; None by default.
        self.commit_trace = CommitTrace.from_environment(config.node_id)
        self.raft = open_metadata_raft(
            config, self.bridge, wall_clock_ms=clock.wall_clock_ms, trace=self.commit_trace
        )
        self._write_lock = asyncio.Lock()
        self._settings = ControllerSettings(
            broker_session_timeout_ms=config.broker_session_timeout_ms,
            broker_channel_closed_timeout_ms=config.broker_channel_closed_timeout_ms,
            broker_exited_grace_ms=config.broker_exited_grace_ms,
            metadata_max_idle_interval_ms=config.metadata_max_idle_interval_ms,
            default_num_partitions=config.num_partitions,
            default_replication_factor=config.default_replication_factor,
            unclean_leader_election_enable=config.unclean_leader_election_enable,
            min_insync_replicas=config.min_insync_replicas,
            auto_leader_rebalance_enable=config.auto_leader_rebalance_enable,
            leader_imbalance_check_interval_ms=config.leader_imbalance_check_interval_seconds
            * 1000,
            delegation_token_secret_key=config.delegation_token_secret_key,
            delegation_token_max_lifetime_ms=config.delegation_token_max_lifetime_ms,
            delegation_token_expiry_time_ms=config.delegation_token_expiry_time_ms,
            delegation_token_expiry_check_interval_ms=(
                config.delegation_token_expiry_check_interval_ms
            ),
        )
        self._controller: QuorumController | None = None
        self._controller_term = -1
        # The brokers' heartbeat counters (the console's rates): in memory, per leadership.
        self.broker_rates = HeartbeatRates()
        # GET /metrics (quorum/service_metrics.py); commit_blob feeds its commit latency.
        self.metrics = ControllerMetrics()

    # ---- leadership ----

    def is_leader(self) -> bool:
        return self.raft.is_leader()

    def leader_id(self) -> int | None:
        if self.raft.is_leader():
            return self.config.node_id
        address = self.raft.leader_address()
        if address is None:
            return None
        voter = self.raft.voter_set.by_raft_address(address)
        return voter.node_id if voter is not None else self.config.node_id_for_raft_address(address)

    def http_url(self, node_id: int) -> str | None:
        """A controller's HTTP base URL: the voter set's (KIP-853), else the configuration's."""
        voter = self.raft.voter_set.get(node_id)
        if node_id != self.config.node_id and voter is not None and voter.http_listener:
            return voter.http_listener.url_with(self.config.http_scheme)
        return self.config.http_url(node_id)

    def leader_url(self) -> str | None:
        leader = self.leader_id()
        return None if leader is None else self.http_url(leader)

    def require_leader(self) -> None:
        if self.raft.is_leader():
            return
        leader = self.leader_id()
        if leader is None:
            raise ServiceError(
                status_of(Errors.NOT_CONTROLLER, leader_known=False),
                "NOT_CONTROLLER",
                "No controller is active right now (an election is in progress); retry shortly.",
                leader=None,
            )
        url = self.http_url(leader)
        raise ServiceError(
            status_of(Errors.NOT_CONTROLLER),
            "NOT_CONTROLLER",
            f"This controller is not the active controller; controller {leader} "
            f"is, at {url or 'an address this controller does not know'}.",
            leader=url,
            extra={"leader_id": leader},
        )

    def active_controller(self) -> QuorumController:
        """The QuorumController of this leadership term: a new one (empty broker sessions, a
        full session timeout of grace) on every activation, as in Kafka (KIP-631)."""
        term = self.raft.raftCurrentTerm
        if self._controller is None or self._controller_term != term:
            self._controller = QuorumController(
                rng=random.Random(), now_ms=self.clock.monotonic_ms(), settings=self._settings
            )
            self._controller_term = term
            self.broker_rates = HeartbeatRates()
            self.broker_channels.clear()
        return self._controller

    def next_deadline_ms(self) -> int:
        """When the active controller's timed operations are next due (monotonic)."""
        return self.active_controller().next_deadline_ms(self.view.image)

    # ---- the write path ----

    async def write(self, operation: Operation[T]) -> T:
        self.require_leader()
        async with self._write_lock:
            for _ in range(MAX_WRITE_ATTEMPTS):
                self.require_leader()
                image = self.view.image
                outcome = operation(self.active_controller(), image, self.clock.monotonic_ms())
                if not outcome.records:
                    return outcome.response
                result = await self._commit(image, outcome.records)
                if result.applied:
                    return outcome.response
                if result.status is ApplyStatus.STALE:
                    await self.view.wait_beyond(result.log_last_offset - 1, STALE_CATCH_UP_WAIT_S)
                    continue
                raise ServiceError(
                    status_of(Errors.UNKNOWN_SERVER_ERROR),
                    "UNKNOWN_SERVER_ERROR",
                    f"The metadata batch was rejected: {result.message}",
                )
        raise ServiceError(
            status_of(Errors.REQUEST_TIMED_OUT),
            "REQUEST_TIMED_OUT",
            "The metadata log kept moving while this request was retried; retry it.",
        )

    async def _commit(self, image: MetadataImage, records: Sequence[MetadataRecord]) -> ApplyResult:
        blob = proposal_blob(
            image.offset, self.raft.raftCurrentTerm, self.clock.wall_clock_ms(), records
        )
        return await self.commit_blob(blob, tuple(records))

    async def commit_blob(
        self, blob: bytes, records: tuple[MetadataRecord, ...] | None = None
    ) -> ApplyResult:
        """Propose ``blob`` and wait for its outcome (used by the write path and benchmarks)."""
        loop = asyncio.get_running_loop()
        future: asyncio.Future[tuple[ApplyResult | None, int]] = loop.create_future()
        proposed_ms = self.clock.monotonic_ms()
        self.raft.propose(blob, self.bridge.result_callback(future), records)
        try:
            result, fail_reason = await asyncio.wait_for(
                future, self.config.request_timeout_ms / 1000
            )
        except TimeoutError:
            raise ServiceError(
                status_of(Errors.REQUEST_TIMED_OUT),
                "REQUEST_TIMED_OUT",
                "The metadata write was not committed in time; its outcome is "
                "unknown. Retry the request.",
            ) from None
        if fail_reason != FAIL_REASON.SUCCESS or result is None:
            self._raise_for_failure(fail_reason)
        assert result is not None
        if self.commit_trace is not None:
            self.commit_trace.mark("resumed", getattr(self.raft, "last_traced_index", -1))
        committed_ms = self.clock.monotonic_ms()
        self.metrics.commit_latency.record(committed_ms - proposed_ms, committed_ms)
        return result

    def _raise_for_failure(self, fail_reason: int) -> None:
        if fail_reason == FAIL_REASON.QUEUE_FULL:
            raise ServiceError(
                status_of(Errors.REQUEST_TIMED_OUT),
                "REQUEST_TIMED_OUT",
                "Too many metadata writes are pending; retry shortly.",
            )
        leader = self.leader_url()
        raise ServiceError(
            status_of(Errors.NOT_CONTROLLER, leader_known=leader is not None),
            "NOT_CONTROLLER",
            f"Leadership changed before the write committed "
            f"({describe_failure(fail_reason)}); retry with the active "
            f"controller.",
            leader=leader,
        )

    def stop(self) -> None:
        self.raft.destroy_synchronous()
