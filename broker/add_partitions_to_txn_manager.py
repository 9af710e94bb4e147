"""Kafka's ``AddPartitionsToTxnManager``: a partition leader asks transaction coordinators
whether partitions are in a producer's transaction (KIP-890 part 1), batching the questions per
coordinator broker.

The asyncio shell around ``broker.add_partitions_to_txn_batches`` (which decides where a
question goes, what waits for which request and what each answer means): ``verify_transaction``
finds the coordinator in the metadata image, queues the question and awaits its answer; one
task per coordinator broker sends its batch through the ``AddPartitionsToTxnSender``
(``broker.add_partitions_to_txn_channel`` in production) and, once answered, the batch that
gathered meanwhile. ``close`` answers whatever still waits with NETWORK_EXCEPTION (the producer
retries elsewhere). ``build_add_partitions_to_txn_manager`` composes it from the broker's
properties: none when ``transaction.partition.verification.enable`` is false.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
from collections.abc import Callable, Sequence
from typing import Protocol

from pykraft.broker.add_partitions_to_txn_batches import (
    Answer,
    Outcome,
    Sent,
    Unanswered,
    Unverified,
    VerificationBatches,
    transaction_coordinator,
)
from pykraft.broker.add_partitions_to_txn_channel import AddPartitionsToTxnChannel
from pykraft.broker.config import BrokerConfig
from pykraft.coordinator.transaction.config import partition_for
from pykraft.fetcher.broker_connection import ClientSecurity, ConnectionSettings
from pykraft.metadata.image import MetadataImage
from pykraft.protocol.add_partitions_to_txn import VerifyTransaction
from pykraft.protocol.errors import Errors
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)

_Waiter = tuple[asyncio.Future[Unverified], tuple[TopicPartition, ...]]


class AddPartitionsToTxnSender(Protocol):
    async def send(self, broker_id: int, transactions: Sequence[VerifyTransaction], /) -> Outcome:
        """One AddPartitionsToTxn v4 request; never raises for the network (``Unanswered``)."""
        ...

    async def close(self) -> None: ...


class AddPartitionsToTxnManager:
    """Verifications of transactional writes, batched per coordinator broker."""

    def __init__(
        self,
        *,
        metadata: Callable[[], MetadataImage],
        listener_name: str,
        partition_for: Callable[[str], int],
        sender: AddPartitionsToTxnSender,
    ) -> None:
        self._metadata = metadata
        self._listener_name = listener_name
        self._partition_for = partition_for
        self._sender = sender
        self._batches = VerificationBatches()
        self._waiter_ids = itertools.count(1)
        # waiter id -> (its answer, the partitions it asked about)
        self._waiters: dict[int, _Waiter] = {}
        self._tasks: set[asyncio.Task[None]] = set()
        self._closed = False

    async def verify_transaction(
        self,
        transactional_id: str,
        producer_id: int,
        producer_epoch: int,
        partitions: Sequence[TopicPartition],
    ) -> Unverified:
        """Kafka ``verifyTransaction``: the partitions not in the transaction, with why."""
        asked = tuple(partitions)
        if self._closed:
            return dict.fromkeys(asked, Errors.NETWORK_EXCEPTION)
        node = transaction_coordinator(
            self._metadata(), self._partition_for(transactional_id), self._listener_name
        )
        if isinstance(node, Errors):
            return dict.fromkeys(asked, node)
        waiter = next(self._waiter_ids)
        future: asyncio.Future[Unverified] = asyncio.get_running_loop().create_future()
        self._waiters[waiter] = (future, asked)
        transaction = VerifyTransaction(transactional_id, producer_id, producer_epoch, asked)
        self._resolve(self._batches.add(node, transaction, waiter))
        self._maybe_send(node)
        try:
            return await future
        finally:
            self._waiters.pop(waiter, None)

    async def close(self) -> None:
        """Stop sending; every waiting verification gets NETWORK_EXCEPTION."""
        self._closed = True
        tasks, self._tasks = set(self._tasks), set()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        for future, asked in list(self._waiters.values()):
            if not future.done():
                future.set_result(dict.fromkeys(asked, Errors.NETWORK_EXCEPTION))
        await self._sender.close()

    def _maybe_send(self, node: int) -> None:
        sent = None if self._closed else self._batches.next_request(node)
        if sent is None:
            return
        task = asyncio.create_task(self._send(sent), name=f"verify transactions at {node}")
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _send(self, sent: Sent) -> None:
        try:
            outcome: Outcome = await self._sender.send(sent.node, sent.transactions)
        except Exception:  # a bug in the sender: the producers retry
            logger.exception("AddPartitionsToTxn to broker %d failed", sent.node)
            outcome = Unanswered.NETWORK
        self._resolve(self._batches.on_outcome(sent, outcome))
        self._maybe_send(sent.node)

    def _resolve(self, answers: list[Answer]) -> None:
        for waiter, unverified in answers:
            entry = self._waiters.get(waiter)
            if entry is not None and not entry[0].done():
                entry[0].set_result(unverified)


def build_add_partitions_to_txn_manager(
    config: BrokerConfig,
    metadata: Callable[[], MetadataImage],
    client_security: ClientSecurity,
    monotonic_ms: Callable[[], int],
) -> AddPartitionsToTxnManager | None:
    """The broker's manager over the inter-broker listener (Kafka's ``BrokerServer``), or None
    when ``transaction.partition.verification.enable`` is false."""
    if not config.transaction_partition_verification_enable:
        return None
    channel = AddPartitionsToTxnChannel(
        metadata,
        config.inter_broker_listener_name,
        ConnectionSettings(
            client_id=f"broker-{config.node_id}-add-partitions-to-txn-sender",
            socket_timeout_ms=config.replica_socket_timeout_ms,
            security=client_security,
        ),
        monotonic_ms=monotonic_ms,
    )
    partitions = config.transaction_state_log_num_partitions
    return AddPartitionsToTxnManager(
        metadata=metadata,
        listener_name=config.inter_broker_listener_name,
        partition_for=lambda transactional_id: partition_for(transactional_id, partitions),
        sender=channel,
    )
