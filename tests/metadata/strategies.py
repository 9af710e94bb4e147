"""Hypothesis strategies for metadata records and for valid record sequences."""

from __future__ import annotations

import attrs
from hypothesis import strategies as st

from pykraft.metadata.records import (
    AccessControlEntryRecord,
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ClientQuotaEntityData,
    ClientQuotaRecord,
    ConfigRecord,
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
    uuid_to_kafka_string,
)

INT8 = st.integers(-(2**7), 2**7 - 1)
INT16 = st.integers(-(2**15), 2**15 - 1)
INT32 = st.integers(-(2**31), 2**31 - 1)
INT64 = st.integers(-(2**63), 2**63 - 1)
TEXT = st.text(max_size=20)
UUIDS = st.binary(min_size=16, max_size=16).map(uuid_to_kafka_string)
INT32_LISTS = st.lists(INT32, max_size=5).map(tuple)

ENDPOINTS = st.builds(
    BrokerEndpoint, name=TEXT, host=TEXT, port=st.integers(0, 65535), security_protocol=INT16
)
FEATURES = st.builds(
    BrokerFeature, name=TEXT, min_supported_version=INT16, max_supported_version=INT16
)

REGISTER_BROKER_RECORDS = st.builds(
    RegisterBrokerRecord,
    broker_id=INT32,
    incarnation_id=TEXT,
    broker_epoch=INT64,
    end_points=st.lists(ENDPOINTS, max_size=3).map(tuple),
    features=st.lists(FEATURES, max_size=3).map(tuple),
    rack=st.none() | TEXT,
    fenced=st.booleans(),
    in_controlled_shutdown=st.booleans(),
)

# One strategy per record type, covering each field's whole legal range.
RECORD_STRATEGIES: dict[type, st.SearchStrategy[MetadataRecord]] = {
    RegisterBrokerRecord: REGISTER_BROKER_RECORDS,
    UnregisterBrokerRecord: st.builds(UnregisterBrokerRecord, broker_id=INT32, broker_epoch=INT64),
    TopicRecord: st.builds(TopicRecord, name=TEXT, topic_id=UUIDS),
    PartitionRecord: st.builds(
        PartitionRecord,
        partition_id=INT32,
        topic_id=UUIDS,
        replicas=INT32_LISTS,
        isr=INT32_LISTS,
        removing_replicas=INT32_LISTS,
        adding_replicas=INT32_LISTS,
        leader=INT32,
        leader_recovery_state=st.sampled_from([0, 1]),
        leader_epoch=INT32,
        partition_epoch=INT32,
        eligible_leader_replicas=INT32_LISTS,
        last_known_elr=INT32_LISTS,
    ),
    ConfigRecord: st.builds(
        ConfigRecord, resource_type=INT8, resource_name=TEXT, name=TEXT, value=st.none() | TEXT
    ),
    PartitionChangeRecord: st.builds(
        PartitionChangeRecord,
        partition_id=INT32,
        topic_id=UUIDS,
        isr=st.none() | INT32_LISTS,
        leader=INT32,
        replicas=st.none() | INT32_LISTS,
        removing_replicas=st.none() | INT32_LISTS,
        adding_replicas=st.none() | INT32_LISTS,
        leader_recovery_state=st.sampled_from([-1, 0, 1]),
        eligible_leader_replicas=st.none() | INT32_LISTS,
        last_known_elr=st.none() | INT32_LISTS,
    ),
    FenceBrokerRecord: st.builds(FenceBrokerRecord, id=INT32, epoch=INT64),
    UnfenceBrokerRecord: st.builds(UnfenceBrokerRecord, id=INT32, epoch=INT64),
    RemoveTopicRecord: st.builds(RemoveTopicRecord, topic_id=UUIDS),
    FeatureLevelRecord: st.builds(FeatureLevelRecord, name=TEXT, feature_level=INT16),
    ProducerIdsRecord: st.builds(
        ProducerIdsRecord, broker_id=INT32, broker_epoch=INT64, next_producer_id=INT64
    ),
    BrokerRegistrationChangeRecord: st.builds(
        BrokerRegistrationChangeRecord,
        broker_id=INT32,
        broker_epoch=INT64,
        fenced=st.sampled_from([-1, 0, 1]),
        in_controlled_shutdown=st.sampled_from([0, 1]),
    ),
    NoOpRecord: st.just(NoOpRecord()),
    UserScramCredentialRecord: st.builds(
        UserScramCredentialRecord,
        name=TEXT,
        mechanism=st.sampled_from([1, 2]),
        salt=st.binary(max_size=32),
        stored_key=st.binary(max_size=64),
        server_key=st.binary(max_size=64),
        iterations=INT32,
    ),
    AccessControlEntryRecord: st.builds(
        AccessControlEntryRecord,
        id=UUIDS,
        resource_type=INT8,
        resource_name=TEXT,
        pattern_type=INT8,
        principal=TEXT,
        host=TEXT,
        operation=INT8,
        permission_type=INT8,
    ),
    RemoveAccessControlEntryRecord: st.builds(RemoveAccessControlEntryRecord, id=UUIDS),
    RemoveUserScramCredentialRecord: st.builds(
        RemoveUserScramCredentialRecord, name=TEXT, mechanism=st.sampled_from([1, 2])
    ),
    ClientQuotaRecord: st.builds(
        ClientQuotaRecord,
        entity=st.lists(
            st.builds(ClientQuotaEntityData, entity_type=TEXT, entity_name=st.none() | TEXT),
            max_size=3,
        ).map(tuple),
        key=TEXT,
        value=st.floats(allow_nan=False, allow_infinity=False),
        remove=st.booleans(),
    ),
    DelegationTokenRecord: st.builds(
        DelegationTokenRecord,
        owner=TEXT,
        requester=TEXT,
        renewers=st.lists(TEXT, max_size=3).map(tuple),
        issue_timestamp=INT64,
        max_timestamp=INT64,
        expiration_timestamp=INT64,
        token_id=TEXT,
    ),
    RemoveDelegationTokenRecord: st.builds(RemoveDelegationTokenRecord, token_id=TEXT),
}

ANY_RECORD = st.one_of(*RECORD_STRATEGIES.values())


BROKER_IDS = st.integers(0, 4)
REPLICA_LISTS = st.lists(BROKER_IDS, min_size=1, max_size=3, unique=True).map(tuple)
TOPIC_NAMES = st.sampled_from(["pet", "food", "toy", "pet.v2"])


class _Model:
    """Just enough of the cluster to propose only records the controller could."""

    def __init__(self) -> None:
        self.broker_epochs: dict[int, int] = {}
        self.topics: dict[str, tuple[str, set[int]]] = {}  # topic id -> (name, partition ids)
        self.used_topic_ids: set[str] = set()
        self.acl_ids: set[str] = set()
        self.scram: set[tuple[str, int]] = set()  # (user, mechanism)

    def live_names(self) -> set[str]:
        return {name for name, _ in self.topics.values()}


def _partition(draw: st.DrawFn, topic_id: str, partition_id: int) -> PartitionRecord:
    replicas = draw(REPLICA_LISTS)
    return PartitionRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        replicas=replicas,
        isr=draw(st.lists(st.sampled_from(replicas), unique=True).map(tuple)),
        leader=draw(st.sampled_from((-1, *replicas))),
        leader_recovery_state=draw(st.sampled_from([0, 1])),
        leader_epoch=draw(st.integers(0, 5)),
        partition_epoch=draw(st.integers(0, 5)),
        eligible_leader_replicas=draw(st.just(()) | REPLICA_LISTS),
        last_known_elr=draw(st.just(()) | REPLICA_LISTS),
    )


def _change(draw: st.DrawFn, topic_id: str, partition_id: int) -> PartitionChangeRecord:
    maybe_replicas = st.none() | REPLICA_LISTS
    return PartitionChangeRecord(
        partition_id=partition_id,
        topic_id=topic_id,
        isr=draw(maybe_replicas),
        leader=draw(st.sampled_from([-2, -2, -1, 0, 1, 2, 3, 4])),
        replicas=draw(maybe_replicas),
        removing_replicas=draw(st.none() | st.just(())),
        adding_replicas=draw(st.none() | st.just(())),
        leader_recovery_state=draw(st.sampled_from([-1, -1, 0, 1])),
        eligible_leader_replicas=draw(maybe_replicas),
        last_known_elr=draw(st.none() | st.just(())),
    )


def _broker_record(draw: st.DrawFn, model: _Model) -> MetadataRecord:
    if bool(model.broker_epochs) and draw(st.booleans()):
        broker_id = draw(st.sampled_from(sorted(model.broker_epochs)))
        epoch = model.broker_epochs[broker_id]
        kind = draw(st.sampled_from(["fence", "unfence", "change", "unregister"]))
        if kind == "unregister":
            del model.broker_epochs[broker_id]
            return UnregisterBrokerRecord(broker_id=broker_id, broker_epoch=epoch)
        if kind == "fence":
            return FenceBrokerRecord(id=broker_id, epoch=epoch)
        if kind == "unfence":
            return UnfenceBrokerRecord(id=broker_id, epoch=epoch)
        return BrokerRegistrationChangeRecord(
            broker_id=broker_id,
            broker_epoch=epoch,
            fenced=draw(st.sampled_from([-1, 0, 1])),
            in_controlled_shutdown=draw(st.sampled_from([0, 1])),
        )
    record = draw(REGISTER_BROKER_RECORDS)
    broker_id = draw(BROKER_IDS)
    model.broker_epochs[broker_id] = record.broker_epoch
    return attrs.evolve(record, broker_id=broker_id)


def _topic_record(draw: st.DrawFn, model: _Model) -> MetadataRecord | None:
    kind = draw(st.sampled_from(["topic", "partition", "change", "remove"]))
    if kind == "topic" or not model.topics:
        name = draw(TOPIC_NAMES)
        topic_id = draw(UUIDS)
        if name in model.live_names() or topic_id in model.used_topic_ids:
            return None
        model.topics[topic_id] = (name, set())
        model.used_topic_ids.add(topic_id)
        return TopicRecord(name=name, topic_id=topic_id)
    topic_id = draw(st.sampled_from(sorted(model.topics)))
    name, partitions = model.topics[topic_id]
    if kind == "remove":
        del model.topics[topic_id]
        return RemoveTopicRecord(topic_id=topic_id)
    if kind == "change" and partitions:
        return _change(draw, topic_id, draw(st.sampled_from(sorted(partitions))))
    partition_id = draw(st.integers(0, 3))
    partitions.add(partition_id)
    return _partition(draw, topic_id, partition_id)


def _auth_record(draw: st.DrawFn, model: _Model) -> MetadataRecord:
    """ACLs with Kafka's codes and SCRAM credentials, removing only what exists."""
    if bool(model.acl_ids) and draw(st.booleans()):
        acl_id = draw(st.sampled_from(sorted(model.acl_ids)))
        model.acl_ids.discard(acl_id)
        return RemoveAccessControlEntryRecord(id=acl_id)
    if bool(model.scram) and draw(st.booleans()):
        user, mechanism = draw(st.sampled_from(sorted(model.scram)))
        model.scram.discard((user, mechanism))
        return RemoveUserScramCredentialRecord(name=user, mechanism=mechanism)
    if draw(st.booleans()):
        acl_id = draw(UUIDS)
        model.acl_ids.add(acl_id)
        return AccessControlEntryRecord(
            id=acl_id,
            resource_type=draw(st.sampled_from([2, 3, 4, 5])),
            resource_name=draw(st.sampled_from(["pet", "p", "*", "kafka-cluster"])),
            pattern_type=draw(st.sampled_from([3, 4])),
            principal=draw(st.sampled_from(["User:alice", "User:*"])),
            host=draw(st.sampled_from(["*", "127.0.0.1"])),
            operation=draw(st.integers(2, 14)),
            permission_type=draw(st.sampled_from([2, 3])),
        )
    user, mechanism = draw(st.sampled_from(["alice", "bob"])), draw(st.sampled_from([1, 2]))
    model.scram.add((user, mechanism))
    return UserScramCredentialRecord(
        name=user,
        mechanism=mechanism,
        salt=draw(st.binary(min_size=1, max_size=8)),
        stored_key=draw(st.binary(min_size=1, max_size=8)),
        server_key=draw(st.binary(min_size=1, max_size=8)),
        iterations=draw(st.integers(4096, 16384)),
    )


def _other_record(draw: st.DrawFn) -> MetadataRecord:
    return draw(
        st.one_of(
            st.builds(
                ConfigRecord,
                resource_type=st.sampled_from([2, 4]),
                resource_name=st.sampled_from(["pet", "food", "", "1"]),
                name=st.sampled_from(["retention.ms", "cleanup.policy"]),
                value=st.none() | st.sampled_from(["1", "compact"]),
            ),
            st.builds(
                FeatureLevelRecord,
                name=st.sampled_from(["metadata.version", "kraft.version"]),
                feature_level=st.integers(0, 3),
            ),
            st.builds(
                ProducerIdsRecord,
                broker_id=BROKER_IDS,
                broker_epoch=st.integers(0, 9),
                next_producer_id=st.integers(0, 10_000),
            ),
            st.just(NoOpRecord()),
        )
    )


@st.composite
def record_sequences(draw: st.DrawFn, max_records: int = 40) -> list[MetadataRecord]:
    """A sequence of records a controller could have written: every replay succeeds."""
    model = _Model()
    records: list[MetadataRecord] = []
    for _ in range(draw(st.integers(0, max_records))):
        area = draw(st.sampled_from(["broker", "topic", "topic", "other", "auth"]))
        if area == "broker":
            record: MetadataRecord | None = _broker_record(draw, model)
        elif area == "topic":
            record = _topic_record(draw, model)
        elif area == "auth":
            record = _auth_record(draw, model)
        else:
            record = _other_record(draw)
        if record is not None:
            records.append(record)
    return records
