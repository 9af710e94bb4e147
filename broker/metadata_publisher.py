"""What a broker does with each published metadata image (Kafka's ``BrokerMetadataPublisher``),
shared by ``BrokerServer`` and the replication simulation so both run the same publishing.

Theory of operation
-------------------
Nothing is applied before ``install``: ``broker.lifecycle_core`` calls for it once the controller
says the broker caught up with the metadata log up to its own registration, as Kafka's
``BrokerServer`` installs its publishers only after the initial catch-up. The controller
registered this incarnation in the same batch that took the previous incarnation's leaderships
away, so the broker never acts on an image that still shows it leading from before a crash.

``install(image)`` first deletes stray logs (``ReplicaManager.delete_stray_logs``: topics deleted
or replicas moved away while the broker was down, KAFKA-14616), then publishes the whole image
as one delta from the empty image. Every later ``publish(delta, image)`` applies, in Kafka's
order: ``ReplicaManager.apply_delta(local_changes(delta, broker_id))`` (deletes, leaders,
followers), then the topic config overrides that changed (``DynamicConfigPublisher``), then the
listeners (the group coordinator loads and unloads its ``__consumer_offsets`` partitions). The
authorizer is rebuilt first when the image's ACLs changed (Kafka's ``AclPublisher``).
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.broker.authorization import RequestAuthorizer
from pykraft.broker.replica_manager import ReplicaManager
from pykraft.broker.topic_configs import changed_topic_configs
from pykraft.metadata.delta import MetadataDelta
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.local_changes import LocalReplicaChanges, local_changes

# (this broker's changes, the new image): after the replica layer applied them.
ChangesListener = Callable[[LocalReplicaChanges, MetadataImage], None]


class BrokerMetadataPublisher:
    def __init__(
        self,
        broker_id: int,
        replica_manager: ReplicaManager,
        *,
        wall_clock_ms: Callable[[], int],
        listeners: tuple[ChangesListener, ...] = (),
        authorizer: RequestAuthorizer | None = None,
    ) -> None:
        self.broker_id = broker_id
        self.replica_manager = replica_manager
        # Wall time dates the logs a change creates (segment timestamps).
        self._wall_clock_ms = wall_clock_ms
        self._listeners = listeners
        self._authorizer = authorizer
        # Invariant: once True, stays True; nothing is published before.
        self.installed = False

    def install(self, image: MetadataImage) -> LocalReplicaChanges:
        """Start publishing: stray logs go, then the whole of ``image`` is applied."""
        assert not self.installed, "the publisher is installed once"
        self.installed = True
        self.replica_manager.delete_stray_logs(image)
        return self.publish(MetadataDelta.between(MetadataImage.EMPTY, image), image)

    def publish(self, delta: MetadataDelta, image: MetadataImage) -> LocalReplicaChanges:
        """Apply one published delta; returns this broker's changes in it."""
        assert self.installed, "publishing before the initial catch-up"
        if self._authorizer is not None:  # Kafka's AclPublisher: only when the ACLs changed
            self._authorizer.update(image.acls)
        changes = local_changes(delta, self.broker_id)
        self.replica_manager.apply_delta(changes, image, self._wall_clock_ms())
        self.replica_manager.broker_topic_stats.remove_deleted_topics(delta.topics)
        # After the partitions, as Kafka's BrokerMetadataPublisher runs its
        # DynamicConfigPublisher after ReplicaManager.applyDelta.
        self.replica_manager.update_topic_configs(changed_topic_configs(delta, image), image)
        quotas = self.replica_manager.replication_quotas
        if quotas is not None:  # KIP-73 throttle rates and throttled replicas, every publish
            quotas.update(image)
        for listener in self._listeners:
            listener(changes, image)
        return changes
