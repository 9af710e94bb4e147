"""The broker's two coordinators, built from its properties and composed together: the group
coordinator on ``__consumer_offsets`` and the transaction coordinator on ``__transaction_state``
with its marker channel to the partition leaders (Kafka's ``BrokerServer`` builds
``groupCoordinator``, ``transactionCoordinator`` and its ``TransactionMarkerChannelManager`` the
same way).

Both load and unload their partitions when the metadata publisher tells them (after the replica
layer acted on the same change). On shutdown the group coordinator stops first, then the
transaction coordinator, then the channel its markers went out on.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator

import attrs

from pykraft.broker.config import BrokerConfig
from pykraft.broker.consumer_group_config import consumer_group_config
from pykraft.broker.producer_ids import ProducerIdManager
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.txn_marker_channel import TxnMarkerChannel
from pykraft.coordinator.group.rebalance import GroupConfig
from pykraft.coordinator.group.shell import GroupCoordinatorShell
from pykraft.coordinator.transaction.config import TransactionConfig
from pykraft.coordinator.transaction.shell import TransactionCoordinatorShell
from pykraft.fetcher.broker_connection import ClientSecurity, ConnectionSettings
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.storage.clock import Clock


def transaction_config(config: BrokerConfig) -> TransactionConfig:
    """The transaction coordinator's settings from the broker's properties."""
    return TransactionConfig(
        transactional_id_expiration_ms=config.transactional_id_expiration_ms,
        transaction_max_timeout_ms=config.transaction_max_timeout_ms,
        transaction_state_log_num_partitions=config.transaction_state_log_num_partitions,
        transaction_state_log_replication_factor=config.transaction_state_log_replication_factor,
        transaction_state_log_segment_bytes=config.transaction_state_log_segment_bytes,
        transaction_state_log_min_isr=config.transaction_state_log_min_isr,
        transaction_abort_timed_out_transaction_cleanup_interval_ms=(
            config.transaction_abort_timed_out_transaction_cleanup_interval_ms
        ),
        transaction_remove_expired_transaction_cleanup_interval_ms=(
            config.transaction_remove_expired_transaction_cleanup_interval_ms
        ),
    )


def group_config(config: BrokerConfig) -> GroupConfig:
    """The group coordinator's settings from the broker's properties."""
    return GroupConfig(
        group_min_session_timeout_ms=config.group_min_session_timeout_ms,
        group_max_session_timeout_ms=config.group_max_session_timeout_ms,
        group_initial_rebalance_delay_ms=config.group_initial_rebalance_delay_ms,
        offsets_topic_num_partitions=config.offsets_topic_num_partitions,
        offsets_topic_replication_factor=config.offsets_topic_replication_factor,
        offsets_retention_ms=config.offsets_retention_minutes * 60 * 1000,
        offsets_retention_check_interval_ms=config.offsets_retention_check_interval_ms,
    )


@attrs.frozen
class Coordinators:
    group: GroupCoordinatorShell
    transaction: TransactionCoordinatorShell
    marker_channel: TxnMarkerChannel

    @property
    def metadata_listeners(
        self,
    ) -> tuple[Callable[[LocalReplicaChanges, MetadataImage], None], ...]:
        return (self.group.on_metadata, self.transaction.on_metadata)

    def shutdown_steps(self) -> Iterator[tuple[Awaitable[None], str]]:
        """Each step and what it is, in order (the caller bounds each one)."""
        yield self.group.shutdown(), "stopping the group coordinator"
        yield self.transaction.shutdown(), "stopping the transaction coordinator"
        yield self.marker_channel.close(), "closing the transaction marker channel"


def build_coordinators(
    config: BrokerConfig,
    replica_manager: ReplicaManager,
    producer_ids: ProducerIdManager,
    metadata: Callable[[], MetadataImage],
    client_security: ClientSecurity,
    clock: Clock,
) -> Coordinators:
    channel = TxnMarkerChannel(
        config.node_id,
        metadata,
        config.inter_broker_listener_name,
        ConnectionSettings(
            client_id=f"broker-{config.node_id}-txn-marker-sender",
            socket_timeout_ms=config.replica_socket_timeout_ms,
            security=client_security,
        ),
        monotonic_ms=clock.monotonic_ms,
    )
    return Coordinators(
        group=GroupCoordinatorShell(
            replica_manager,
            group_config(config),
            wall_clock_ms=clock.wall_clock_ms,
            consumer_config=consumer_group_config(config.static_properties),
        ),
        transaction=TransactionCoordinatorShell(
            replica_manager,
            producer_ids,
            channel,
            transaction_config(config),
            wall_clock_ms=clock.wall_clock_ms,
        ),
        marker_channel=channel,
    )
