"""Hypothesis strategies for metadata records and for valid record sequences."""

from __future__ import annotations

from hypothesis import strategies as st

from metadata.records import (
    BrokerEndpoint,
    BrokerFeature,
    BrokerRegistrationChangeRecord,
    ConfigRecord,
    FeatureLevelRecord,
    FenceBrokerRecord,
    MetadataRecord,
    NoOpRecord,
    PartitionChangeRecord,
    PartitionRecord,
    ProducerIdsRecord,
    RegisterBrokerRecord,
    RemoveTopicRecord,
    TopicRecord,
    UnfenceBrokerRecord,
    UnregisterBrokerRecord,
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

# One strategy per record type, covering each field's whole legal range.
RECORD_STRATEGIES: dict[type, st.SearchStrategy[MetadataRecord]] = {
    RegisterBrokerRecord: st.builds(
        RegisterBrokerRecord,
        broker_id=INT32,
        incarnation_id=TEXT,
        broker_epoch=INT64,
        end_points=st.lists(ENDPOINTS, max_size=3).map(tuple),
        features=st.lists(FEATURES, max_size=3).map(tuple),
        rack=st.none() | TEXT,
        fenced=st.booleans(),
        in_controlled_shutdown=st.booleans(),
    ),
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
}

ANY_RECORD = st.one_of(*RECORD_STRATEGIES.values())
