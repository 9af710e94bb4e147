"""The transaction coordinator's settings and its topic, ``__transaction_state``, with Kafka's
property names and defaults (``TransactionStateManagerConfig``, ``TransactionLogConfig`` and
``TransactionLog`` in Kafka).

A transactional id lives in partition ``Utils.abs(transactionalId.hashCode) % partitions`` of
``__transaction_state`` (``TransactionStateManager.partitionFor``), the same placement rule as a
group in ``__consumer_offsets``. The topic is created with ``transaction.state.log.*`` and is
always compacted, uncompressed and never elected uncleanly (``transactionTopicConfigs``); every
write to it uses acks=-1 (``TransactionLog.EnforcedRequiredAcks``).
"""

from __future__ import annotations

import attrs

from pykraft.protocol.java_hash import java_string_hash, kafka_abs

TRANSACTION_STATE_TOPIC = "__transaction_state"
# TransactionLog.EnforcedRequiredAcks
ENFORCED_REQUIRED_ACKS = -1

_MINUTE_MS = 60 * 1000
_DAY_MS = 24 * 60 * _MINUTE_MS


@attrs.frozen(kw_only=True)
class TransactionConfig:
    """Kafka's ``TransactionConfig``; each field is the property with dots as underscores."""

    # transactional.id.expiration.ms: an idle transactional id is forgotten after this.
    transactional_id_expiration_ms: int = 7 * _DAY_MS
    # transaction.max.timeout.ms: InitProducerId with a longer transaction.timeout.ms fails.
    transaction_max_timeout_ms: int = 15 * _MINUTE_MS
    transaction_state_log_num_partitions: int = 50
    transaction_state_log_replication_factor: int = 3
    transaction_state_log_segment_bytes: int = 100 * 1024 * 1024
    transaction_state_log_load_buffer_size: int = 5 * 1024 * 1024
    transaction_state_log_min_isr: int = 2
    # transaction.abort.timed.out.transaction.cleanup.interval.ms
    transaction_abort_timed_out_transaction_cleanup_interval_ms: int = 10_000
    # transaction.remove.expired.transaction.cleanup.interval.ms
    transaction_remove_expired_transaction_cleanup_interval_ms: int = 60 * _MINUTE_MS
    # request.timeout.ms: how long a tombstone append waits for the ISR.
    request_timeout_ms: int = 30_000

    def __attrs_post_init__(self) -> None:
        if self.transaction_state_log_num_partitions < 1:
            raise ValueError("transaction.state.log.num.partitions must be at least 1")
        if self.transaction_max_timeout_ms < 1:
            raise ValueError("transaction.max.timeout.ms must be at least 1")


def partition_for(transactional_id: str, num_partitions: int) -> int:
    """``TransactionStateManager.partitionFor``: where a transactional id's state lives."""
    return kafka_abs(java_string_hash(transactional_id)) % num_partitions


def transaction_topic_configs(config: TransactionConfig) -> dict[str, str]:
    """``TransactionStateManager.transactionTopicConfigs``: the configs ``__transaction_state``
    is created with (the integrator passes them to CreateTopics with the partition count and
    replication factor)."""
    return {
        "unclean.leader.election.enable": "false",
        "compression.type": "uncompressed",
        "cleanup.policy": "compact",
        "min.insync.replicas": str(config.transaction_state_log_min_isr),
        "segment.bytes": str(config.transaction_state_log_segment_bytes),
    }
