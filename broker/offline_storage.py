"""What the broker does when its storage fails (Kafka's ``ReplicaManager.handleLogDirFailure``).

Issue 9: one bad partition or one failing disk never takes the rest of the broker down.

* A partition ``LogManager`` could not load is offline from the start: requests for it answer
  KAFKA_STORAGE_ERROR (Kafka's ``HostedPartition.Offline``) and it is never recreated over its
  damage. When the metadata makes this broker a follower of another leader, the damaged
  directory is set aside (``<dir>.<uuid>-stray``) and the replica starts empty, so replication
  re-fetches it.
* An ``OSError`` on a partition's append or read (or a follower's append, reported by the
  fetcher manager) takes its whole log dir offline, as Kafka does: ``LogManager`` releases the
  dir's files, and ``on_log_dir_failure`` here stops fetching its partitions and has the
  replica manager forget them (waiting requests are answered). Once no log dir is left,
  ``on_all_log_dirs_offline`` asks the broker to halt.

* The controller is told (KIP-858): ``offline_log_dirs`` is what every heartbeat reports — the
  failed dirs' ``directory.id``s and this broker's replicas on them (topic id, partition) — and
  ``on_directory_failure`` sends a heartbeat at once. The controller takes the broker out of
  those ISRs and moves their leadership to another in-sync replica
  (``quorum.managers.directories``, which says how this differs from Kafka's replica→dir
  assignment). The metadata then makes this broker a follower of those partitions; it cannot
  host them (``get_or_create_log`` answers None), so it fetches nothing for them. A restart
  with the dir healthy again loads them, and they re-join the ISR through normal catch-up.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from pathlib import Path

from pykraft.broker.offline_log_dirs import OfflineLogDirs
from pykraft.broker.partition import PartitionError
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import NO_LEADER
from pykraft.protocol.errors import Errors
from pykraft.replica.data_path import FetcherManager
from pykraft.storage.log_config import LogConfig
from pykraft.storage.log_manager import KafkaStorageError, LogManager
from pykraft.storage.partition_log import PartitionLog
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class OfflineStorage:
    def __init__(
        self,
        broker_id: int,
        log_manager: LogManager,
        fetcher_manager: FetcherManager,
        *,
        forget_partition: Callable[[TopicPartition], None],
    ) -> None:
        self.broker_id = broker_id
        self.log_manager = log_manager
        self.fetcher_manager = fetcher_manager
        self._forget_partition = forget_partition
        # Called once every log dir is offline: Kafka halts the broker then.
        self.on_all_log_dirs_offline: Callable[[], None] | None = None
        # Called when a log dir fails, to heartbeat at once (KIP-858).
        self.on_directory_failure: Callable[[], None] | None = None
        log_manager.on_log_dir_failure = self.on_log_dir_failure

    def check_online(self, topic_partition: TopicPartition) -> None:
        """Raise KAFKA_STORAGE_ERROR for an offline partition."""
        reason = self.log_manager.offline_partitions.get(topic_partition)
        if reason is not None:
            raise PartitionError(
                Errors.KAFKA_STORAGE_ERROR, f"{topic_partition} is offline: {reason}"
            )

    def get_or_create_log(
        self, topic_partition: TopicPartition, now_ms: int, config: LogConfig
    ) -> PartitionLog | None:
        """The partition's log, or None while it is offline (never recreated over damage)."""
        try:
            return self.log_manager.get_or_create_log(topic_partition, now_ms, config)
        except KafkaStorageError as error:
            logger.error("cannot host %s: %s", topic_partition, error)
            return None

    def maybe_set_aside(self, topic_partition: TopicPartition, *, leader_id: int) -> None:
        """Another replica leads: a log this broker could not load is re-fetched instead."""
        if leader_id in (NO_LEADER, self.broker_id):
            return
        try:
            self.log_manager.set_aside_offline_partition(topic_partition)
        except OSError as error:
            logger.error("cannot set aside the damaged log of %s: %s", topic_partition, error)

    def on_log_dir_failure(self, log_dir: Path, gone: Sequence[TopicPartition]) -> None:
        logger.error(
            "log dir %s failed: %d partitions offline: %s",
            log_dir,
            len(gone),
            ", ".join(map(str, gone)),
        )
        self.fetcher_manager.remove_fetcher_for_partitions(gone)
        for topic_partition in gone:
            self._forget_partition(topic_partition)
        if not self.log_manager.online_dirs and self.on_all_log_dirs_offline is not None:
            logger.error("every log dir is offline")
            self.on_all_log_dirs_offline()
        elif self.on_directory_failure is not None:
            self.on_directory_failure()

    def offline_log_dirs(self, image: MetadataImage) -> OfflineLogDirs:
        """What the next heartbeat reports: the offline dirs' ids and this broker's replicas on
        them, by topic id (a topic the image no longer has is left out)."""
        found = self.log_manager.offline_replicas()
        replicas = []
        for topic_partition in sorted(tp for partitions in found.values() for tp in partitions):
            topic = image.topics.by_name.get(topic_partition.topic)
            if topic is not None:
                replicas.append((topic.topic_id, topic_partition.partition))
        return OfflineLogDirs(directory_ids=tuple(sorted(found)), replicas=tuple(replicas))

    def maybe_fail_log_dir(self, topic_partition: TopicPartition, error: PartitionError) -> None:
        """An I/O error (not an already offline partition) takes the log dir offline."""
        cause = error.__cause__
        if isinstance(cause, OSError) and not isinstance(cause, KafkaStorageError):
            self.handle_storage_error(topic_partition, str(cause))

    def handle_storage_error(self, topic_partition: TopicPartition, reason: str = "") -> None:
        """The log of ``topic_partition`` failed with an I/O error (append, read, or a
        follower's append): its whole log dir goes offline."""
        log_dir = self.log_manager.log_dir_of(topic_partition)
        if log_dir is not None:
            what = f"{topic_partition}: {reason or 'I/O error'}"
            self.log_manager.handle_log_dir_failure(log_dir, what)
