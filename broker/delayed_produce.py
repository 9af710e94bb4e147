"""Delayed produces' asyncio shell: ``broker.delayed_operations.DelayedOperations`` over the pure
``replica.produce_waiters.ProducePurgatory`` (Kafka's ``DelayedProduce``; the rules are
described there), plus ``wait``, ``watch`` over a future. The replication simulation drives
``watch`` without asyncio; deadlines work as ``broker.delayed_operations`` says.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping

from pykraft.broker.delayed_operations import DelayedOperations
from pykraft.protocol.errors import Errors
from pykraft.replica.produce_waiters import (
    MAX_DELAYED_PRODUCES,
    ProducePurgatory,
    ReplicaChecker,
)
from pykraft.storage.topic_partition import TopicPartition

__all__ = ["DelayedProduces", "ReplicaChecker"]


class DelayedProduces(DelayedOperations[int, ReplicaChecker, Errors]):
    """A callback per waiting acks=all produce (a future's, for ``wait``), each answering every
    partition's final error; one timer unless a ``ReplicaManager`` owns it."""

    purgatory: ProducePurgatory

    def __init__(
        self,
        *,
        monotonic_ms: Callable[[], int],
        max_waiters: int = MAX_DELAYED_PRODUCES,
    ) -> None:
        super().__init__(ProducePurgatory(max_waiters), monotonic_ms=monotonic_ms)

    async def wait(
        self,
        required_offsets: Mapping[TopicPartition, int],
        *,
        timeout_ms: int,
        checker: ReplicaChecker,
    ) -> dict[TopicPartition, Errors]:
        """Each partition's final error once none waits any more, or at the deadline."""
        future: asyncio.Future[dict[TopicPartition, Errors]] = (
            asyncio.get_running_loop().create_future()
        )

        def done(errors: dict[TopicPartition, Errors]) -> None:
            if not future.done():
                future.set_result(errors)

        watch = self.watch(required_offsets, timeout_ms=timeout_ms, checker=checker, on_done=done)
        if watch.answers is not None:
            return watch.answers
        assert watch.waiter_id is not None
        try:
            return await future
        finally:
            self.forget(watch.waiter_id)  # a no-op once answered
