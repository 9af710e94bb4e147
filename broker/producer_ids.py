"""Producer ids for idempotent producers, in blocks the controller hands out (KIP-730).

Theory of operation
-------------------
Kafka's ``RPCProducerIdManager``. The controller owns the producer-id space: each
``POST /v1/producer-ids`` (Kafka's AllocateProducerIds) returns a block ``[first, first + 1000)``
that no other broker, and no later incarnation of this one, will ever get (the controller logs a
``ProducerIdsRecord`` naming the next free id). The broker hands ids out of its current block one
by one, without asking anybody, so InitProducerId costs no round trip in the common case.

``ProducerIdBlocks`` is the pure bookkeeping (time is a ``now_ms`` argument). It holds the
current block and the next id to hand out, at most one prefetched next block, whether an
allocation request is in flight, and a back-off deadline after a failed one:

* ``claim(now_ms)`` hands out the next id. Once 90% of the current block is claimed
  (``PREFETCH_THRESHOLD_*``) it asks for the next block (``Claim.request_block``), so a busy
  broker switches blocks without a gap. When the current block is used up it switches to the
  prefetched one; with none at hand it answers no id — the InitProducerId handler turns that
  into the retriable COORDINATOR_LOAD_IN_PROGRESS, as Kafka does — and asks for a block.
* a request is asked for only when none is in flight, no next block is held, and the back-off
  deadline has passed: at most one allocation in flight, and after a failure at most one per
  ``RETRY_BACKOFF_MS``. The retries themselves come from the claims, i.e. from clients
  retrying InitProducerId (Kafka's design: no loop of its own that could spin on a controller
  that keeps refusing).
* ``handle_block`` takes an answer after Kafka's sanity checks (a positive size, ids from 0 to
  below Long.MAX_VALUE, strictly above every id this broker already had); a rejected answer
  counts as a failed request (``handle_allocation_failed``).

``ProducerIdManager`` is the asyncio shell: it runs the allocation request as a task through the
controller client and lets ``generate_producer_id`` wait a bounded time (``max_wait_ms``) for a
block in flight, so the very first idempotent producer of a broker gets an id instead of a
retriable error (Kafka 3.0-3.4's ``RPCProducerIdManager`` also waited, on a blocking queue).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable
from typing import Protocol

import attrs

from pykraft.broker.controller_api import ControllerError

logger = logging.getLogger(__name__)

# Kafka's ProducerIdManager.PidPrefetchThreshold (0.90), as a fraction of integers.
PREFETCH_THRESHOLD_NUMERATOR = 9
PREFETCH_THRESHOLD_DENOMINATOR = 10
# Kafka's RPCProducerIdManager.RETRY_BACKOFF_MS: after a failed allocation, no new one for this.
RETRY_BACKOFF_MS = 50
# How long InitProducerId waits for a block in flight before answering a retriable error: far
# above a healthy controller commit, far below a client's request.timeout.ms (30 s).
MAX_WAIT_MS = 1_000
LONG_MAX = 2**63 - 1


class ProducerIdAllocator(Protocol):
    """The controller's ``POST /v1/producer-ids`` (``broker.controller_client``)."""

    async def allocate_producer_ids(self, *, broker_id: int, broker_epoch: int) -> tuple[int, int]:
        """(first producer id, block size); raises ``ControllerError`` when refused."""
        ...


@attrs.frozen
class ProducerIdsBlock:
    """Kafka's ``ProducerIdsBlock``: the ids ``first_producer_id .. last_producer_id``."""

    first_producer_id: int
    size: int

    @property
    def last_producer_id(self) -> int:
        return self.first_producer_id + self.size - 1

    @property
    def prefetch_producer_id(self) -> int:
        """Claiming this id (or a later one) asks for the next block."""
        return self.first_producer_id + (
            self.size * PREFETCH_THRESHOLD_NUMERATOR // PREFETCH_THRESHOLD_DENOMINATOR
        )


@attrs.frozen
class Claim:
    # None: no id at hand (the block is used up and the next one has not arrived).
    producer_id: int | None
    # Send an allocation request now (the caller then reports its outcome).
    request_block: bool


def block_problem(block: ProducerIdsBlock, previous_last_producer_id: int) -> str | None:
    """Why an allocated block must not be used (Kafka's ``sanityCheckResponse``), or None."""
    if block.size <= 0:
        return f"size {block.size} is not positive"
    if block.first_producer_id < 0 or block.first_producer_id > LONG_MAX - block.size:
        return (
            f"ids {block.first_producer_id}+{block.size} are outside the producer-id "
            f"range 0..{LONG_MAX - 1}"
        )
    if block.first_producer_id <= previous_last_producer_id:
        return (
            f"first id {block.first_producer_id} is not above {previous_last_producer_id}, "
            f"an id this broker already held"
        )
    return None


class ProducerIdBlocks:
    """The pure block bookkeeping of one broker (see the module docstring)."""

    def __init__(self) -> None:
        self._current: ProducerIdsBlock | None = None
        # Invariant: with a current block, first_producer_id <= _next_producer_id <=
        # last_producer_id + 1 (one past the end: used up).
        self._next_producer_id = 0
        self._next_block: ProducerIdsBlock | None = None
        self._request_in_flight = False
        # No allocation request before this (after a failure); None: no back-off.
        self._backoff_deadline_ms: int | None = None

    @property
    def current_block(self) -> ProducerIdsBlock | None:
        return self._current

    @property
    def next_block(self) -> ProducerIdsBlock | None:
        return self._next_block

    @property
    def request_in_flight(self) -> bool:
        return self._request_in_flight

    def claim(self, now_ms: int) -> Claim:
        """Hand out the next producer id (Kafka's ``generateProducerId``)."""
        if not self._has_id():
            if self._next_block is None:
                return Claim(None, self._maybe_request_block(now_ms))
            self._become_current(self._next_block)
        assert self._current is not None and self._has_id(), "a validated block is not empty"
        producer_id = self._next_producer_id
        self._next_producer_id += 1
        # ">=" as in Kafka 3.0's manager (trunk tests "=="): a failed prefetch is retried by
        # later claims once the back-off has passed, not only after the block ran out.
        request = producer_id >= self._current.prefetch_producer_id and self._maybe_request_block(
            now_ms
        )
        return Claim(producer_id, request)

    def handle_block(self, block: ProducerIdsBlock, now_ms: int) -> str | None:
        """The controller allocated ``block``; returns why it was rejected, or None."""
        assert self._request_in_flight, "an allocation answer without a request"
        problem = block_problem(block, self._last_known_producer_id())
        if problem is not None:
            self.handle_allocation_failed(now_ms)
            return problem
        self._request_in_flight = False
        self._next_block = block
        return None

    def handle_allocation_failed(self, now_ms: int) -> None:
        """The request failed (refused, unreachable controller, bad answer): back off."""
        self._request_in_flight = False
        self._backoff_deadline_ms = now_ms + RETRY_BACKOFF_MS

    def _has_id(self) -> bool:
        return (
            self._current is not None and self._next_producer_id <= self._current.last_producer_id
        )

    def _become_current(self, block: ProducerIdsBlock) -> None:
        self._current, self._next_block = block, None
        self._next_producer_id = block.first_producer_id

    def _last_known_producer_id(self) -> int:
        known = [b.last_producer_id for b in (self._current, self._next_block) if b is not None]
        return max(known, default=-1)

    def _maybe_request_block(self, now_ms: int) -> bool:
        """Kafka's ``maybeRequestNextBlock``: True when the caller must send a request now."""
        if self._backoff_deadline_ms is not None and now_ms < self._backoff_deadline_ms:
            return False
        if self._next_block is not None or self._request_in_flight:
            return False
        self._request_in_flight = True
        self._backoff_deadline_ms = None
        return True


class ProducerIdManager:
    """Producer ids for this broker's InitProducerId handler, blocks fetched in the background."""

    def __init__(
        self,
        allocator: ProducerIdAllocator,
        *,
        broker_id: int,
        broker_epoch: Callable[[], int],
        monotonic_ms: Callable[[], int],
        max_wait_ms: int = MAX_WAIT_MS,
    ) -> None:
        assert max_wait_ms >= 0, f"max_wait_ms must not be negative: {max_wait_ms}"
        self.broker_id = broker_id
        self.max_wait_ms = max_wait_ms
        self.blocks = ProducerIdBlocks()
        self._allocator = allocator
        self._broker_epoch = broker_epoch
        self._monotonic_ms = monotonic_ms  # retry backoff
        self._allocation: asyncio.Task[None] | None = None

    async def generate_producer_id(self) -> int | None:
        """A producer id never handed out before, or None while no block is at hand."""
        producer_id = self._claim()
        allocation = self._allocation
        if producer_id is None and allocation is not None and self.max_wait_ms > 0:
            # asyncio.wait neither cancels the allocation on timeout nor when this request's
            # task is cancelled: other requests may be waiting for the same block.
            await asyncio.wait({allocation}, timeout=self.max_wait_ms / 1000)
            producer_id = self._claim()
        return producer_id

    async def close(self) -> None:
        """Abandon an allocation in flight (the broker is shutting down)."""
        allocation, self._allocation = self._allocation, None
        if allocation is not None:
            allocation.cancel()
            await asyncio.gather(allocation, return_exceptions=True)

    def _claim(self) -> int | None:
        claim = self.blocks.claim(self._monotonic_ms())
        if claim.request_block:
            self._allocation = asyncio.get_running_loop().create_task(
                self._allocate(), name=f"producer-id block for broker {self.broker_id}"
            )
        return claim.producer_id

    async def _allocate(self) -> None:
        try:
            first, size = await self._allocator.allocate_producer_ids(
                broker_id=self.broker_id, broker_epoch=self._broker_epoch()
            )
        except ControllerError as error:
            # STALE_BROKER_EPOCH / BROKER_ID_NOT_REGISTERED right after (re)registration, or an
            # unreachable controller: Kafka logs and tries again after the back-off.
            logger.warning("broker %d: producer-id block not allocated: %s", self.broker_id, error)
            self.blocks.handle_allocation_failed(self._monotonic_ms())
            return
        except Exception:
            # A bug, e.g. an answer missing a field: keep the trace, and keep handing out ids
            # once the controller answers properly instead of waiting forever on this request.
            logger.exception("broker %d: producer-id block request failed", self.broker_id)
            self.blocks.handle_allocation_failed(self._monotonic_ms())
            return
        block = ProducerIdsBlock(first, size)
        problem = self.blocks.handle_block(block, self._monotonic_ms())
        if problem is not None:
            logger.error(
                "broker %d: rejected producer-id block %s: %s", self.broker_id, block, problem
            )
        else:
            logger.info(
                "broker %d: producer-id block %d..%d",
                self.broker_id,
                block.first_producer_id,
                block.last_producer_id,
            )
