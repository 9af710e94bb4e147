"""What the broker's local HTTP API shows of a running ``BrokerServer``: its status
(``/v1/status``), its partitions and their roles, and the Prometheus metrics text.

Why a module of its own: these are read-only views over the components ``BrokerServer``
composes — the lifecycle, the metadata loader, the log manager and the replica manager, any of
which may not exist yet during start-up — and they decide nothing; out of ``server.py`` they
leave ``BrokerServer``'s composition and its start-up and shutdown order readable in one place.
"""

from __future__ import annotations

from pykraft.broker.config import BrokerConfig
from pykraft.broker.http import BrokerStatus, PartitionRow, ReplicaRole
from pykraft.broker.lifecycle import BrokerState
from pykraft.broker.metadata_loader import MetadataLoader
from pykraft.broker.metrics import BrokerMetrics
from pykraft.broker.partition import PartitionRole
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.metadata.image import MetadataImage
from pykraft.storage.log_manager import LogManager


def broker_status(
    config: BrokerConfig,
    state: BrokerState,
    *,
    metadata_offset: int,
    broker_epoch: int,
    log_manager: LogManager | None,
) -> BrokerStatus:
    dirs: tuple[str, ...] = ()
    partitions: tuple[str, ...] = ()
    if log_manager is not None:
        dirs = tuple(str(d) for d in log_manager.offline_dirs)
        partitions = tuple(sorted(map(str, log_manager.offline_partitions)))
    return BrokerStatus(
        node_id=config.node_id,
        state=state,
        metadata_offset=metadata_offset,
        broker_epoch=broker_epoch,
        rack=config.rack,
        offline_log_dirs=dirs,
        offline_partitions=partitions,
    )


def partition_rows(
    replica_manager: ReplicaManager | None, log_manager: LogManager | None
) -> list[PartitionRow]:
    if replica_manager is None:
        return []
    rows = []
    image = replica_manager.image
    for topic_partition, partition in replica_manager.partitions.items():
        if partition.role is PartitionRole.NONE:
            continue
        # A leader knows its committed ISR; a follower shows the metadata's.
        isr = partition.state.isr
        if not partition.is_leader:
            registration = image.topics.get_partition(partition.topic_id, topic_partition.partition)
            isr = registration.isr if registration is not None else ()
        rows.append(
            PartitionRow(
                topic=topic_partition.topic,
                partition=topic_partition.partition,
                role=ReplicaRole(partition.role.value),
                leader_epoch=partition.leader_epoch,
                log_start_offset=partition.log_start_offset,
                log_end_offset=partition.log_end_offset,
                high_watermark=partition.high_watermark,
                isr=isr,
            )
        )
    offline = log_manager.offline_partitions if log_manager is not None else {}
    rows.extend(
        PartitionRow.offline(tp.topic, tp.partition, reason) for tp, reason in offline.items()
    )
    return rows


def metrics_text(
    metrics: BrokerMetrics,
    state: BrokerState,
    loader: MetadataLoader,
    replica_manager: ReplicaManager | None,
    log_manager: LogManager | None,
) -> str:
    metrics.set_broker_state(state)
    metrics.set_metadata_progress(
        applied_offset=loader.image.offset, committed_end_offset=loader.log_end_offset
    )
    if log_manager is not None:
        metrics.set_storage_health(
            offline_replicas=len(log_manager.offline_partitions),
            offline_log_dirs=len(log_manager.offline_dirs),
            corrupt_batch_reads=sum(log.corruptions.count for log in log_manager.logs.values()),
        )
    quotas = None if replica_manager is None else replica_manager.replication_quotas
    if replica_manager is not None and quotas is not None:
        now_ms = replica_manager.monotonic_ms()
        for side, quota in (("leader", quotas.leader), ("follower", quotas.follower)):
            metrics.set_replication_throttle(
                side, byte_rate=quota.rate(now_ms), total_bytes=quota.total_bytes
            )
    rows = partition_rows(replica_manager, log_manager)
    leaders = [row for row in rows if row.role is ReplicaRole.LEADER]
    metrics.set_partition_counts(
        led=len(leaders),
        under_replicated=sum(
            1 for row in leaders if len(row.isr) < _replica_count(loader.image, row)
        ),
    )
    return metrics.render()


def _replica_count(image: MetadataImage, row: PartitionRow) -> int:
    topic = image.topics.by_name.get(row.topic)
    registration = None if topic is None else topic.partitions.get(row.partition)
    return len(registration.replicas) if registration is not None else len(row.isr)
