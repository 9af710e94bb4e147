"""The partitions this broker hosts, created, led, followed and deleted as a metadata change
says (the ``applyDelta`` half of Kafka's ``ReplicaManager``).

Theory of operation
-------------------
``carry_out(ready, wall_clock_ms)`` carries out one ``replica.replica_core.MetadataReady`` in the
order that module writes once: deletes (stop the fetcher, stop the partition, delete the log
through ``LogManager``), then leaders (stop fetching, open or create the log with the topic's
configs, ``make_leader``: persist the epoch, apply, answer), then followers (``make_follower``),
then the core's ``fetcher_handoff`` for the followers whose leader epoch moved. A transition
that ``replaces_log`` deletes the old log first (the topic was deleted and re-created under the
same name while this broker was away). Every partition whose role or epoch moved is reported to
``on_partition_changed`` (its waiters answer now). A log that cannot be opened, or whose epoch
cannot be written, takes its log dir offline (``broker.offline_storage``) and the rest of the
change applies (Kafka's ``applyLocalLeadersDelta``).

``update_topic_configs`` gives open logs their topic's new ``LogConfig`` (Kafka's
``DynamicConfigPublisher`` -> ``LogManager.updateTopicConfig``); ``delete_stray_logs`` deletes,
at start-up, the logs the image does not place here (KAFKA-14616).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Mapping

from pykraft.broker.offline_storage import OfflineStorage
from pykraft.broker.partition import Partition, PartitionContext
from pykraft.broker.topic_configs import broker_default_log_config, dynamic_broker_configs
from pykraft.metadata.image import ConfigsImage, MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges
from pykraft.metadata.records import ConfigResourceType
from pykraft.replica.data_path import FetcherManager
from pykraft.replica.replica_core import MetadataReady, PartitionTransition, ReplicaCore
from pykraft.storage.log_config import LogConfig, LogConfigError
from pykraft.storage.log_manager import LogManager
from pykraft.storage.topic_partition import TopicPartition

logger = logging.getLogger(__name__)


class HostedPartitions:
    def __init__(
        self,
        broker_id: int,
        core: ReplicaCore,
        log_manager: LogManager,
        fetcher_manager: FetcherManager,
        partition_context: PartitionContext,
        *,
        on_partition_changed: Callable[[TopicPartition], None],
    ) -> None:
        self.broker_id = broker_id
        self.core = core
        self.log_manager = log_manager
        self.fetcher_manager = fetcher_manager
        self.partition_context = partition_context
        self._on_partition_changed = on_partition_changed
        self._partitions: dict[TopicPartition, Partition] = {}
        # server.properties' log.* settings; the dynamic broker configs apply over them.
        self._static_log_config = log_manager.default_config
        # The dynamic broker configs the log manager's default was last built from, and the
        # image's configs they and the topics' were last read from.
        self._broker_configs: dict[str, str] = {}
        self._configs: ConfigsImage | None = None
        self.offline_storage = OfflineStorage(
            broker_id, log_manager, fetcher_manager, forget_partition=self._forget_partition
        )

    @property
    def partitions(self) -> Mapping[TopicPartition, Partition]:
        return self._partitions

    def get(self, topic_partition: TopicPartition) -> Partition | None:
        return self._partitions.get(topic_partition)

    def topic_ids(self) -> dict[TopicPartition, str]:
        """Each hosted partition's topic id (``ReplicaCore.apply_metadata``'s ``hosted``)."""
        return {tp: partition.topic_id for tp, partition in self._partitions.items()}

    def carry_out(self, ready: MetadataReady, wall_clock_ms: int) -> None:
        """Deletes, then leaders, then followers; ``wall_clock_ms`` dates the logs created."""
        self._apply_deletes(ready.deletes)
        self._apply_leaders(ready.leaders, wall_clock_ms)
        self._apply_followers(ready.followers, wall_clock_ms)

    def update_topic_configs(self, topics: Collection[str], new_image: MetadataImage) -> None:
        """Give the local logs of ``topics`` their config in ``new_image`` (Kafka's
        ``DynamicConfigPublisher``): a changed or removed override (retention.ms,
        cleanup.policy, segment.bytes, ...) reaches open logs without a restart. A changed
        dynamic broker config (this broker's or the cluster default) becomes the log manager's
        default and reaches every hosted topic (``LogManager.reconfigureDefaultLogConfig``)."""
        if not topics and new_image.configs is self._configs:
            # No config changed since (images share what a delta left alone): a NoOpRecord
            # every 500 ms walked every log here, 1 ms per publish at 10,000 partitions.
            return
        self._configs = new_image.configs
        hosted = {topic_partition.topic for topic_partition in self.log_manager.logs}
        broker_configs = dynamic_broker_configs(new_image, self.broker_id)
        if broker_configs != self._broker_configs:
            self._broker_configs = broker_configs
            self.log_manager.default_config = self._default_log_config(new_image)
            topics = hosted
        for topic in sorted(set(topics) & hosted):
            config = self._log_config(topic, new_image)
            changed = self.log_manager.update_topic_config(topic, config)
            if changed:
                logger.info(
                    "topic %s: log config of %d partitions updated to %s",
                    topic,
                    len(changed),
                    config,
                )

    def _apply_deletes(self, deletes: tuple[TopicPartition, ...]) -> None:
        if not deletes:
            return
        self.fetcher_manager.remove_fetcher_for_partitions(deletes)
        for topic_partition in deletes:
            self._delete_partition(topic_partition)

    def _delete_partition(self, topic_partition: TopicPartition) -> None:
        self._forget_partition(topic_partition)
        if self.log_manager.delete_log(topic_partition):
            logger.info("deleted the log of %s", topic_partition)

    def _apply_leaders(self, leaders: tuple[PartitionTransition, ...], wall_clock_ms: int) -> None:
        if not leaders:
            return
        self.fetcher_manager.remove_fetcher_for_partitions(
            [leader.topic_partition for leader in leaders]
        )
        for leader in leaders:
            topic_partition = leader.topic_partition
            partition = self._get_or_create_partition(leader, wall_clock_ms)
            if partition is None:
                continue
            epoch_before = partition.leader_epoch
            try:
                partition.make_leader(leader.leader_and_isr)
            except OSError as error:
                # Kafka applyLocalLeadersDelta: a disk error skips this partition's change (the
                # core, never advanced, stays as it was) and its log dir goes offline.
                logger.error(
                    "cannot lead %s: writing its leader epoch failed: %s", topic_partition, error
                )
                self.offline_storage.handle_storage_error(topic_partition, str(error))
                continue
            if partition.leader_epoch != epoch_before:
                # Waiting fetches carry the old epoch: they must hear about the new one now.
                self._on_partition_changed(topic_partition)

    def _apply_followers(
        self, followers: tuple[PartitionTransition, ...], wall_clock_ms: int
    ) -> None:
        restarted: list[tuple[PartitionTransition, int]] = []
        for follower in followers:
            topic_partition = follower.topic_partition
            leader_id = follower.leader_and_isr.leader
            self.offline_storage.maybe_set_aside(topic_partition, leader_id=leader_id)
            partition = self._get_or_create_partition(follower, wall_clock_ms)
            if partition is None or not partition.make_follower(follower.leader_and_isr):
                continue
            # Kafka completeDelayedOperationsWhenNotPartitionLeader: waiting produces answer
            # NOT_LEADER_OR_FOLLOWER, waiting fetches answer with the new epoch.
            self._on_partition_changed(topic_partition)
            restarted.append((follower, partition.log_end_offset))
        handoff = self.core.fetcher_handoff(restarted)
        if handoff.removals:
            self.fetcher_manager.remove_fetcher_for_partitions(handoff.removals)
        if handoff.additions:
            self.fetcher_manager.add_fetcher_for_partitions(handoff.additions)

    def delete_stray_logs(self, image: MetadataImage) -> list[TopicPartition]:
        """Delete local logs ``image`` does not place on this broker; call once at start-up.

        Kafka deletes such stray replicas on its first metadata publish (KAFKA-14616): logs of
        topics deleted, or of replicas moved away, while this broker was down. Without a topic
        id on disk, a topic re-created under the same name is not recognised as stray here.
        """
        stray, manager = [], self.log_manager
        for topic_partition in sorted({*manager.logs, *manager.offline_partitions}):
            topic = image.topics.by_name.get(topic_partition.topic)
            registration = (
                None if topic is None else topic.partitions.get(topic_partition.partition)
            )
            if registration is None or self.broker_id not in registration.replicas:
                stray.append(topic_partition)
        for topic_partition in stray:
            logger.info("deleting stray replica %s: not assigned to this broker", topic_partition)
            self._delete_partition(topic_partition)
        return stray

    def new_logs_wanted(
        self, changes: LocalReplicaChanges, image_of: Callable[[], MetadataImage]
    ) -> list[tuple[TopicPartition, LogConfig]]:
        """The logs ``changes`` will create, with their topic's config in the image
        ``image_of`` makes (only when there are some: most deltas move leaders of held topics),
        for ``broker.new_logs`` to create first off the event loop: only of topics this broker
        holds no log of (a new topic, such as ``__consumer_offsets`` on a group's first use),
        so never a log that a re-created topic replaces or one already loaded."""
        held = {tp.topic for tp in self.log_manager.logs}
        held.update(tp.topic for tp in self.log_manager.offline_partitions)
        wanted = sorted(tp for tp in {*changes.leaders, *changes.followers} if tp.topic not in held)
        if not wanted:
            return []
        image = image_of()
        return [(tp, self._log_config(tp.topic, image)) for tp in wanted]

    def _get_or_create_partition(
        self, transition: PartitionTransition, wall_clock_ms: int
    ) -> Partition | None:
        """The partition to make leader or follower; None while its log is offline."""
        topic_partition, topic_id = transition.topic_partition, transition.topic_id
        if transition.replaces_log:
            # The topic was deleted and re-created while this broker missed the delete.
            logger.info(
                "%s now belongs to topic id %s; deleting the old log", topic_partition, topic_id
            )
            self._delete_partition(topic_partition)
        partition = self._partitions.get(topic_partition)
        if partition is None:
            # An existing log (loaded at start-up with the broker defaults) takes it too.
            config = self._log_config(topic_partition.topic, self.core.image)
            log = self.offline_storage.get_or_create_log(topic_partition, wall_clock_ms, config)
            if log is None:
                return None
            partition = Partition(
                topic_partition,
                topic_id,
                log,
                self.broker_id,
                self.partition_context,
                replicas=self.core,
            )
            self._partitions[topic_partition] = partition
        return partition

    def _forget_partition(self, topic_partition: TopicPartition) -> None:
        """Stop serving it (deleted, or its log dir failed); answer whatever waits on it."""
        partition = self._partitions.pop(topic_partition, None)
        if partition is not None:
            partition.stop()
        self.core.forget(topic_partition)
        self._on_partition_changed(topic_partition)

    def _default_log_config(self, image: MetadataImage) -> LogConfig:
        """server.properties' log config under this broker's dynamic broker configs."""
        try:
            return broker_default_log_config(image, self.broker_id, self._static_log_config)
        except LogConfigError as error:
            logger.warning("dynamic broker configs: %s; using the static log defaults", error)
            return self._static_log_config

    def _log_config(self, topic: str, image: MetadataImage) -> LogConfig:
        defaults = self._default_log_config(image)
        try:
            return LogConfig.from_properties(
                image.configs.config(ConfigResourceType.TOPIC, topic), defaults=defaults
            )
        except LogConfigError as error:
            # The controller validated it; a value it accepts but storage does not is logged.
            logger.warning("topic %s: %s; using the broker's log defaults", topic, error)
            return defaults
