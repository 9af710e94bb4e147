"""MetadataDelta: replay metadata records onto an image (Kafka's ``MetadataDelta``).

Theory of operation. A delta starts from a base ``MetadataImage`` and accumulates the effect of
records replayed in log order; ``apply()`` returns the new image, sharing everything untouched
with the base. The broker replays each committed batch, applies, then asks
``local_changes(delta, broker_id)`` what to lead, follow and delete; the controller replays its
own batches to keep its image current. The per-area rules follow Kafka's ``ClusterDelta``,
``TopicsDelta``/``TopicDelta``, ``ConfigurationsDelta``, ``FeaturesDelta`` and
``ProducerIdsDelta``:

- RegisterBrokerRecord replaces any earlier incarnation of the broker id; UnregisterBrokerRecord
  removes the broker (even an unknown one, as Kafka does).
- Fence/Unfence/BrokerRegistrationChange need a registered broker whose epoch matches the record's.
- TopicRecord creates an empty topic; PartitionRecord (re)sets a partition of a live topic;
  PartitionChangeRecord merges into a known partition (``PartitionRegistration.merge``);
  RemoveTopicRecord removes the topic and every config of the topic's resource.
- ConfigRecord sets a key, or deletes it when the value is None.
- FeatureLevelRecord sets a level; level 0 removes the feature.
- ProducerIdsRecord sets ``next_producer_id``. NoOpRecord changes nothing but the offset.
- ACL and SCRAM credential records: ``metadata.auth.images`` (Kafka's ``AclsDelta``,
  ``ScramDelta``); client quota records: ``metadata.client_quotas`` (``ClientQuotasDelta``);
  delegation token records: ``metadata.delegation_tokens`` (``DelegationTokenDelta``).

A record that refers to something unknown raises ``MetadataReplayError`` and leaves the delta
unchanged. Nothing here does I/O or reads a clock.
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs
from immutables import Map

from pykraft.metadata.auth.images import AclsDelta, ScramDelta
from pykraft.metadata.client_quotas import ClientQuotasDelta
from pykraft.metadata.delegation_tokens import DelegationTokenDelta
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.image import (
    BrokerRegistration,
    ClusterImage,
    ConfigResource,
    ConfigsImage,
    MetadataImage,
    ProducerIdsImage,
)
from pykraft.metadata.records import (
    AccessControlEntryRecord,
    BrokerRegistrationChangeRecord,
    BrokerRegistrationFencingChange,
    BrokerRegistrationInControlledShutdownChange,
    ClientQuotaRecord,
    ConfigRecord,
    ConfigResourceType,
    DelegationTokenRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveAccessControlEntryRecord,
    RemoveDelegationTokenRecord,
    RemoveTopicRecord,
    RemoveUserScramCredentialRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
    UserScramCredentialRecord,
)
from pykraft.metadata.topics_delta import TopicDelta, TopicsDelta

__all__ = [
    "ClusterDelta",
    "ConfigsDelta",
    "MetadataDelta",
    "TopicDelta",
    "TopicsDelta",
    "apply_records",
]


class ClusterDelta:
    def __init__(self, image: ClusterImage) -> None:
        self.image = image
        # broker id -> new registration, or None when the broker was unregistered.
        self.changed_brokers: dict[int, BrokerRegistration | None] = {}

    def broker(self, broker_id: int) -> BrokerRegistration | None:
        if broker_id in self.changed_brokers:
            return self.changed_brokers[broker_id]
        return self.image.brokers.get(broker_id)

    def replay_register(self, record: RegisterBrokerRecord) -> None:
        self.changed_brokers[record.broker_id] = BrokerRegistration(
            id=record.broker_id,
            epoch=record.broker_epoch,
            incarnation_id=record.incarnation_id,
            endpoints=record.end_points,
            features=record.features,
            rack=record.rack,
            fenced=record.fenced,
            in_controlled_shutdown=record.in_controlled_shutdown,
        )

    def replay_unregister(self, record: UnregisterBrokerRecord) -> None:
        self.changed_brokers[record.broker_id] = None

    def replay_fence(self, record: FenceBrokerRecord | UnfenceBrokerRecord) -> None:
        action = "fence" if isinstance(record, FenceBrokerRecord) else "unfence"
        broker = self._broker_at_epoch(record, record.id, record.epoch, action)
        self._put(
            broker,
            fenced=isinstance(record, FenceBrokerRecord),
            in_controlled_shutdown=broker.in_controlled_shutdown,
        )

    def replay_change(self, record: BrokerRegistrationChangeRecord) -> None:
        broker = self._broker_at_epoch(record, record.broker_id, record.broker_epoch, "change")
        try:
            fencing = BrokerRegistrationFencingChange(record.fenced)
            shutdown = BrokerRegistrationInControlledShutdownChange(record.in_controlled_shutdown)
        except ValueError as exc:
            raise MetadataReplayError(record, str(exc)) from None
        fenced = {
            BrokerRegistrationFencingChange.FENCE: True,
            BrokerRegistrationFencingChange.UNFENCE: False,
            BrokerRegistrationFencingChange.NONE: broker.fenced,
        }[fencing]
        in_controlled_shutdown = (
            shutdown is BrokerRegistrationInControlledShutdownChange.IN_CONTROLLED_SHUTDOWN
            or broker.in_controlled_shutdown
        )
        self._put(broker, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown)

    def _put(
        self, broker: BrokerRegistration, *, fenced: bool, in_controlled_shutdown: bool
    ) -> None:
        updated = attrs.evolve(broker, fenced=fenced, in_controlled_shutdown=in_controlled_shutdown)
        # Kafka's ClusterDelta records nothing when the registration is unchanged.
        if updated != broker:
            self.changed_brokers[broker.id] = updated

    def _broker_at_epoch(
        self, record: MetadataRecord, broker_id: int, epoch: int, action: str
    ) -> BrokerRegistration:
        broker = self.broker(broker_id)
        if broker is None:
            raise MetadataReplayError(
                record, f"tried to {action} broker {broker_id}, but it is not registered"
            )
        if broker.epoch != epoch:
            raise MetadataReplayError(
                record,
                f"tried to {action} broker {broker_id} at epoch {epoch}, but its registration "
                f"has epoch {broker.epoch}",
            )
        return broker

    def apply(self) -> ClusterImage:
        if not self.changed_brokers:
            return self.image
        brokers = self.image.brokers.mutate()
        for broker_id, broker in self.changed_brokers.items():
            if broker is not None:
                brokers[broker_id] = broker
            elif broker_id in brokers:
                del brokers[broker_id]
        return ClusterImage(brokers=brokers.finish())


class ConfigsDelta:
    def __init__(self, image: ConfigsImage) -> None:
        self.image = image
        # Working copies of the resources touched; an empty dict deletes the resource.
        self.changed_resources: dict[ConfigResource, dict[str, str]] = {}

    def _working(self, resource: ConfigResource) -> dict[str, str]:
        working = self.changed_resources.get(resource)
        if working is None:
            working = dict(self.image.resources.get(resource, Map()))
            self.changed_resources[resource] = working
        return working

    def replay_config(self, record: ConfigRecord) -> None:
        working = self._working((record.resource_type, record.resource_name))
        if record.value is None:
            working.pop(record.name, None)
        else:
            working[record.name] = record.value

    def delete_resource(self, resource: ConfigResource) -> None:
        self.changed_resources[resource] = {}

    def apply(self) -> ConfigsImage:
        if not self.changed_resources:
            return self.image
        resources = self.image.resources.mutate()
        for resource, config in self.changed_resources.items():
            if config:
                resources[resource] = Map(config)
            elif resource in resources:
                del resources[resource]
        return ConfigsImage(resources=resources.finish())


class MetadataDelta:
    """Records replayed onto ``image``; ``apply()`` makes the next image."""

    def __init__(self, image: MetadataImage = MetadataImage.EMPTY) -> None:
        self.image = image
        # Offset and epoch of the last record replayed (the base image's until one is).
        self.offset = image.offset
        self.epoch = image.epoch
        self.cluster = ClusterDelta(image.cluster)
        self.topics = TopicsDelta(image.topics)
        self.configs = ConfigsDelta(image.configs)
        # feature name -> new level, or None when the feature was removed.
        self.changed_features: dict[str, int | None] = {}
        self.producer_ids: ProducerIdsImage | None = None
        self.acls = AclsDelta(image.acls)
        self.scram = ScramDelta(image.scram)
        self.client_quotas = ClientQuotasDelta(image.client_quotas)
        self.delegation_tokens = DelegationTokenDelta(image.delegation_tokens)
        # Set by ``between``: the image a snapshot load produced.
        self._target: MetadataImage | None = None

    @classmethod
    def between(cls, base: MetadataImage, target: MetadataImage) -> MetadataDelta:
        """The delta from ``base`` to ``target`` — how a broker that loads a snapshot learns what
        changed (Kafka's snapshot load with ``finishSnapshot``). ``apply()`` returns ``target``.
        """
        delta = cls(base)
        delta.offset, delta.epoch = target.offset, target.epoch
        delta.topics = TopicsDelta.between(base.topics, target.topics)
        for broker_id in base.cluster.brokers:
            if broker_id not in target.cluster.brokers:
                delta.cluster.changed_brokers[broker_id] = None
        for broker_id, broker in target.cluster.brokers.items():
            if base.cluster.brokers.get(broker_id) != broker:
                delta.cluster.changed_brokers[broker_id] = broker
        delta._target = target
        return delta

    def replay(
        self, record: MetadataRecord, offset: int | None = None, epoch: int | None = None
    ) -> None:
        """Apply one record; ``offset``/``epoch`` (if given) are where the log holds it."""
        if offset is not None and offset <= self.offset:
            raise MetadataReplayError(
                record, f"offset {offset} is not after the last replayed offset {self.offset}"
            )
        if self._target is not None:
            raise MetadataReplayError(record, "a snapshot delta takes no further records")
        self._dispatch(record)
        if offset is not None:
            self.offset = offset
        if epoch is not None:
            self.epoch = epoch

    def _dispatch(self, record: MetadataRecord) -> None:
        match record:
            case RegisterBrokerRecord():
                self.cluster.replay_register(record)
            case UnregisterBrokerRecord():
                self.cluster.replay_unregister(record)
            case FenceBrokerRecord() | UnfenceBrokerRecord():
                self.cluster.replay_fence(record)
            case BrokerRegistrationChangeRecord():
                self.cluster.replay_change(record)
            case TopicRecord():
                self.topics.replay_topic(record)
            case PartitionRecord():
                self.topics.replay_partition(record)
            case PartitionChangeRecord():
                self.topics.replay_partition_change(record)
            case RemoveTopicRecord():
                name = self.topics.replay_remove_topic(record)
                self.configs.delete_resource((ConfigResourceType.TOPIC.value, name))
            case ConfigRecord():
                self.configs.replay_config(record)
            case FeatureLevelRecord():
                level = record.feature_level
                self.changed_features[record.name] = level if level != 0 else None
            case ProducerIdsRecord():
                self.producer_ids = ProducerIdsImage(next_producer_id=record.next_producer_id)
            case AccessControlEntryRecord() | RemoveAccessControlEntryRecord():
                self.acls.replay(record)
            case UserScramCredentialRecord() | RemoveUserScramCredentialRecord():
                self.scram.replay(record)
            case ClientQuotaRecord():
                self.client_quotas.replay(record)
            case DelegationTokenRecord() | RemoveDelegationTokenRecord():
                self.delegation_tokens.replay(record)
            case NoOpRecord():
                pass  # Only moves the offset (Kafka's NoOpRecord keeps idle brokers current).
            case _:
                raise MetadataReplayError(record, "it is not a metadata record")

    def apply(self, offset: int | None = None, epoch: int | None = None) -> MetadataImage:
        """The image after every replayed record, stamped with ``offset``/``epoch`` if given
        (else those of the last record replayed with them)."""
        offset = self.offset if offset is None else offset
        epoch = self.epoch if epoch is None else epoch
        if self._target is not None:
            return attrs.evolve(self._target, offset=offset, epoch=epoch)
        return MetadataImage(
            offset=offset,
            epoch=epoch,
            cluster=self.cluster.apply(),
            topics=self.topics.apply(),
            configs=self.configs.apply(),
            features=self._apply_features(),
            producer_ids=self.producer_ids or self.image.producer_ids,
            acls=self.acls.apply(),
            scram=self.scram.apply(),
            client_quotas=self.client_quotas.apply(),
            delegation_tokens=self.delegation_tokens.apply(),
        )

    def _apply_features(self) -> Map[str, int]:
        if not self.changed_features:
            return self.image.features
        features = self.image.features.mutate()
        for name, level in self.changed_features.items():
            if level is not None:
                features[name] = level
            elif name in features:
                del features[name]
        return features.finish()


def apply_records(
    image: MetadataImage,
    records: Iterable[MetadataRecord],
    offset: int | None = None,
    epoch: int | None = None,
) -> MetadataImage:
    """Replay ``records`` onto ``image`` and return the new image stamped ``offset``/``epoch``
    (the offset of the last record). Raises MetadataReplayError; ``image`` is never changed."""
    delta = MetadataDelta(image)
    for record in records:
        delta.replay(record)
    return delta.apply(offset=offset, epoch=epoch)
