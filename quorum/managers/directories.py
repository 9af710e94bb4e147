"""Offline log directories reported in broker heartbeats (KIP-858, JBOD in KRaft).

Theory of operation. When one of a broker's log dirs fails, the broker keeps serving from its
other dirs but can neither lead nor follow the replicas on the failed one. Its next heartbeat
(sent at once, as Kafka's ``BrokerLifecycleManager.propagateDirectoryFailure`` does) names the
failed dirs; the controller then removes the broker from the ISR of those replicas and moves
their leadership to another ISR member (Kafka's
``ReplicationControlManager.handleDirectoriesOffline``, which runs
``generateLeaderAndIsrUpdates(brokerToRemove=brokerId)`` over the partitions of each newly
offline dir). With ``unclean.leader.election.enable`` the topic may elect outside the ISR, as
for a fenced broker. A replica whose broker is the last ISR member stays in the ISR and the
partition goes leaderless (Kafka keeps the last ISR member too, ``PartitionChangeBuilder``).

How this differs from KIP-858, and why. Kafka finds the replicas on a dir from the partition
records' ``Directories`` field, which the controller fills from each broker's registration
``LogDirs`` and the brokers correct with ``AssignReplicasToDirs``. pykraft has no replica→dir
assignment in its metadata yet, so the heartbeat carries the broker's replicas on its offline
dirs along with the dir ids (``offline_replicas``), and the controller acts on those. The
outcome is the same records: a ``PartitionChangeRecord`` per affected partition where the broker
is in the ISR. Kafka also writes a ``BrokerRegistrationChangeRecord`` with the remaining online
``LogDirs``, so that later elections (``isActive(brokerId, directoryId)``) never pick a replica
on an offline dir. pykraft keeps that knowledge as soft state of the active controller instead
(``BrokerSessions.replica_offline``, from the latest heartbeat): the elections that fencing,
unfencing, controlled shutdown and unregistration run skip those replicas — an unclean
election, or the last ISR member when another broker unfences. After a controller failover it
is known again from each broker's next heartbeat; ``ElectLeaders`` and ``AlterPartition`` do not
consult it.

The answer is idempotent: once the records are applied the broker is in none of those ISRs and
a repeated heartbeat writes nothing.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from pykraft.metadata.api.brokers import OfflineReplica
from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import PartitionChangeRecord, kafka_string_to_uuid
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.partition_change import (
    ReplicaOffline,
    TopicPartitionRef,
    generate_leader_and_isr_updates,
    no_offline_replicas,
)

# A heartbeat names at most this many replicas on offline dirs; a broker hosting more is
# beyond what one request should carry (Kafka bounds requests by socket.request.max.bytes).
MAX_OFFLINE_REPLICAS = 100_000
# KIP-858 reserves the directory ids below 100 (UNASSIGNED 0, LOST 1, MIGRATING 2, ...);
# Kafka's ``DirectoryId.reserved``. None of them names a real log dir.
_RESERVED_DIRECTORY_IDS = 100


def validate_offline_dirs(
    offline_log_dirs: tuple[str, ...], offline_replicas: tuple[OfflineReplica, ...]
) -> ApiError:
    """INVALID_REQUEST for malformed directory ids or replicas; replicas without a dir."""
    for directory_id in offline_log_dirs:
        try:
            value = int.from_bytes(kafka_string_to_uuid(directory_id), "big")
        except ValueError as error:
            return ApiError.of(Errors.INVALID_REQUEST, f"Invalid offline log dir id: {error}")
        if value < _RESERVED_DIRECTORY_IDS:
            return ApiError.of(
                Errors.INVALID_REQUEST,
                f"Offline log dir id {directory_id} is a reserved directory id.",
            )
    if offline_replicas and not offline_log_dirs:
        return ApiError.of(
            Errors.INVALID_REQUEST, "Offline replicas were given without an offline log dir."
        )
    if len(offline_replicas) > MAX_OFFLINE_REPLICAS:
        return ApiError.of(
            Errors.INVALID_REQUEST,
            f"More than {MAX_OFFLINE_REPLICAS} offline replicas in one heartbeat.",
        )
    if any(replica.partition_id < 0 for replica in offline_replicas):
        return ApiError.of(Errors.INVALID_REQUEST, "Partition ids must be non-negative.")
    return SUCCESS


def _offline_partitions_in_isr(
    image: MetadataImage, broker_id: int, offline_replicas: tuple[OfflineReplica, ...]
) -> Iterator[TopicPartitionRef]:
    """The reported partitions, in image order, where the broker is still in the ISR;
    unknown topics and partitions (deleted meanwhile) are skipped."""
    for replica in sorted(set(offline_replicas)):
        topic = image.topics.by_id.get(replica.topic_id)
        registration = None if topic is None else topic.partitions.get(replica.partition_id)
        if topic is not None and registration is not None and broker_id in registration.isr:
            yield TopicPartitionRef(topic, replica.partition_id, registration)


def handle_directories_offline(
    image: MetadataImage,
    broker_id: int,
    offline_replicas: tuple[OfflineReplica, ...],
    unclean_enabled: Callable[[str], bool],
    replica_offline: ReplicaOffline = no_offline_replicas,
) -> list[PartitionChangeRecord]:
    """Kafka's ``handleDirectoriesOffline``: out of the ISR and leadership of every replica the
    broker reported on an offline dir; no replica another broker reported offline leads."""
    return generate_leader_and_isr_updates(
        image,
        _offline_partitions_in_isr(image, broker_id, offline_replicas),
        unclean_enabled=unclean_enabled,
        broker_to_remove=broker_id,
        replica_offline=replica_offline,
    )
