"""The controller's HTTP contract (metadata/api): every request and answer type decodes what it
encodes, through real JSON text (Hypothesis), and a body of the wrong shape is refused with one
``JsonBodyError`` naming the field (the controller answers it 400 INVALID_REQUEST)."""

from __future__ import annotations

from typing import Any

import attrs
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from pykraft.metadata.api import admin, brokers, errors, records, topics
from pykraft.metadata.api.errors import SUCCESS, ApiError, ErrorBody, SnapshotRef
from pykraft.metadata.api.json_fields import Fields, parse_json_object
from pykraft.metadata.records import ConfigResourceType
from pykraft.protocol.errors import Errors
from tests.metadata.api_codec_support import (
    api_errors,
    endpoints,
    ints,
    names,
    optional_names,
    round_trip,
    small,
)
from tests.metadata.strategies import record_sequences

# ---------------------------------------------------------------------------- topics


@st.composite
def create_topic_requests(draw: st.DrawFn) -> topics.CreateTopicsRequest:
    assignments = draw(
        st.dictionaries(st.integers(0, 1000), st.lists(small, max_size=3).map(tuple), max_size=3)
    )
    configs = draw(st.dictionaries(names, st.none() | st.text(max_size=8), max_size=3))
    topic = topics.CreatableTopic(
        name=draw(names),
        num_partitions=draw(small),
        replication_factor=draw(small),
        assignments=tuple(
            topics.CreatableReplicaAssignment(index, replicas)
            for index, replicas in sorted(assignments.items())
        ),
        configs=tuple(topics.CreatableTopicConfig(k, v) for k, v in configs.items()),
    )
    return topics.CreateTopicsRequest((topic,), validate_only=draw(st.booleans()))


@given(create_topic_requests())
def test_create_topic_request(value: topics.CreateTopicsRequest) -> None:
    round_trip(topics.create_topic_request_to_json, topics.create_topic_request_from_json, value)


@given(
    st.builds(
        topics.CreatableTopicResult,
        name=names,
        error=st.just(SUCCESS),
        topic_id=optional_names,
        num_partitions=small,
        replication_factor=small,
    )
)
def test_created_topic(value: topics.CreatableTopicResult) -> None:
    round_trip(topics.created_topic_to_json, topics.created_topic_from_json, value)


@given(st.builds(topics.DeletableTopicResult, optional_names, optional_names))
def test_deleted_topic(value: topics.DeletableTopicResult) -> None:
    round_trip(topics.deleted_topic_to_json, topics.deleted_topic_from_json, value)


@given(
    names,
    st.builds(
        topics.CreatePartitionsRequest,
        st.tuples(
            st.builds(
                topics.CreatePartitionsTopic,
                st.just(""),
                small,
                st.none() | st.lists(st.lists(small, max_size=3).map(tuple), max_size=3).map(tuple),
            )
        ),
        st.booleans(),
    ),
)
def test_create_partitions_request(name: str, value: topics.CreatePartitionsRequest) -> None:
    (topic,) = value.topics
    named = topics.CreatePartitionsRequest(
        (topics.CreatePartitionsTopic(name, topic.count, topic.assignments),), value.validate_only
    )
    round_trip(
        topics.create_partitions_request_to_json,
        lambda fields: topics.create_partitions_request_from_json(name, fields),
        named,
    )


@given(st.builds(topics.PartitionCount, name=names, partitions=small))
def test_partition_count(value: topics.PartitionCount) -> None:
    round_trip(topics.partition_count_to_json, topics.partition_count_from_json, value)


@given(
    st.lists(
        st.builds(topics.TopicListing, name=names, topic_id=names, partitions=small), max_size=3
    ).map(tuple)
)
def test_topic_listings(value: tuple[topics.TopicListing, ...]) -> None:
    round_trip(topics.topic_listings_to_json, topics.topic_listings_from_json, value)


id_lists = st.lists(small, max_size=4).map(tuple)
partition_descriptions = st.builds(
    topics.PartitionDescription,
    partition=small,
    leader=small,
    leader_epoch=small,
    replicas=id_lists,
    isr=id_lists,
    adding_replicas=id_lists,
    removing_replicas=id_lists,
    partition_epoch=small,
    leader_recovery_state=st.integers(0, 1),
    eligible_leader_replicas=st.none() | id_lists,
    last_known_elr=st.none() | id_lists,
)


@given(
    st.builds(
        topics.TopicDescription,
        name=names,
        topic_id=names,
        partitions=st.lists(partition_descriptions, max_size=3).map(tuple),
        configs=st.dictionaries(names, st.text(max_size=8), max_size=3),
    )
)
def test_topic_description(value: topics.TopicDescription) -> None:
    round_trip(topics.topic_description_to_json, topics.topic_description_from_json, value)


# ---------------------------------------------------------------------------- admin


@given(
    st.builds(
        admin.ClusterDescription,
        controller_id=st.none() | small,
        controllers=st.lists(
            st.builds(admin.ControllerAddress, node_id=small, url=optional_names), max_size=3
        ).map(tuple),
        metadata_offset=ints,
        metadata_epoch=small,
        brokers=small,
        topics=small,
        partitions=small,
        features=st.dictionaries(names, small, max_size=3),
    )
)
def test_cluster(value: admin.ClusterDescription) -> None:
    round_trip(admin.cluster_to_json, admin.cluster_from_json, value)


@given(
    st.lists(
        st.builds(
            admin.BrokerDescription,
            broker_id=small,
            broker_epoch=ints,
            incarnation_id=names,
            endpoints=st.lists(endpoints, max_size=2).map(tuple),
            rack=optional_names,
            fenced=st.booleans(),
            in_controlled_shutdown=st.booleans(),
        ),
        max_size=3,
    ).map(tuple)
)
def test_brokers(value: tuple[admin.BrokerDescription, ...]) -> None:
    round_trip(admin.brokers_to_json, admin.brokers_from_json, value)


@given(
    st.builds(
        admin.ElectLeadersRequest,
        st.sampled_from(list(admin.ElectionType)),
        st.none()
        | st.lists(st.builds(admin.TopicPartitions, names, id_lists), max_size=3).map(tuple),
    )
)
def test_elect_leaders_request(value: admin.ElectLeadersRequest) -> None:
    round_trip(admin.elect_leaders_request_to_json, admin.elect_leaders_request_from_json, value)


@given(
    st.builds(
        admin.ElectLeadersResponse,
        st.just(SUCCESS),
        st.lists(
            st.builds(
                admin.ReplicaElectionResult,
                names,
                st.lists(st.builds(admin.PartitionResult, small, api_errors), max_size=3).map(
                    tuple
                ),
            ),
            max_size=3,
        ).map(tuple),
    )
)
def test_elect_leaders_response(value: admin.ElectLeadersResponse) -> None:
    round_trip(admin.elect_leaders_response_to_json, admin.elect_leaders_response_from_json, value)


@st.composite
def alter_configs_requests(draw: st.DrawFn) -> admin.IncrementalAlterConfigsRequest:
    kind = draw(st.sampled_from([ConfigResourceType.TOPIC, ConfigResourceType.BROKER]))
    sets = draw(st.dictionaries(names, st.none() | st.text(max_size=8), max_size=3))
    deletes = draw(st.lists(names, max_size=3))
    changes = [admin.AlterableConfig(k, admin.AlterConfigOp.SET, v) for k, v in sets.items()]
    changes += [admin.AlterableConfig(k, admin.AlterConfigOp.DELETE) for k in deletes]
    return admin.IncrementalAlterConfigsRequest(
        (admin.AlterConfigsResource(kind.value, draw(names), tuple(changes)),), draw(st.booleans())
    )


@given(alter_configs_requests())
def test_alter_configs_request(value: admin.IncrementalAlterConfigsRequest) -> None:
    (resource,) = value.resources
    kind = ConfigResourceType(resource.resource_type)
    round_trip(
        admin.alter_configs_request_to_json,
        lambda fields: admin.alter_configs_request_from_json(kind, resource.resource_name, fields),
        value,
    )


@given(
    st.builds(
        admin.ConfigsDescription,
        resource_type=st.sampled_from(["topic", "broker"]),
        resource_name=names,
        configs=st.dictionaries(names, st.text(max_size=8), max_size=4),
    )
)
def test_configs(value: admin.ConfigsDescription) -> None:
    round_trip(admin.configs_to_json, admin.configs_from_json, value)


optional_small = st.none() | small


@given(
    st.builds(
        admin.QuorumDescription,
        node_id=small,
        state=names,
        leader_id=optional_small,
        leader_url=optional_names,
        raft_term=optional_small,
        committed_offset=ints,
        applied_offset=ints,
        log_start_offset=ints,
        raft=st.builds(
            admin.RaftStatus,
            commit_index=optional_small,
            last_applied=optional_small,
            log_entries=optional_small,
            has_quorum=st.none() | st.booleans(),
        ),
        voters=st.lists(
            st.builds(
                admin.VoterStatus,
                node_id=small,
                raft_address=names,
                url=optional_names,
                connected=st.none() | st.booleans(),
                match_index=optional_small,
                lag=optional_small,
            ),
            max_size=3,
        ).map(tuple),
    )
)
def test_quorum(value: admin.QuorumDescription) -> None:
    round_trip(admin.quorum_to_json, admin.quorum_from_json, value)


# ---------------------------------------------------------------------------- records, errors


@settings(max_examples=50)
@given(st.lists(record_sequences(max_records=6), max_size=3), ints, ints)
def test_records_page(groups: list[list[Any]], from_offset: int, log_end_offset: int) -> None:
    """The controller splices stored record JSON; the broker decodes every record strictly."""
    from pykraft.metadata.codec import encode_record

    base = max(0, from_offset)
    batches, encoded = [], []
    for index, group in enumerate(groups):
        last = base + len(group) - 1
        batches.append(
            records.MetadataBatch(
                base_offset=base,
                last_offset=last,
                epoch=index,
                append_time_ms=index,
                records=tuple(group),
            )
        )
        encoded.append(
            records.EncodedBatch(
                base_offset=base,
                last_offset=last,
                epoch=index,
                append_time_ms=index,
                records=[encode_record(r).encode() for r in group],
            )
        )
        base = last + 1
    raw = records.records_page_json(from_offset, base, log_end_offset, encoded)
    assert records.records_page_from_json(
        Fields(parse_json_object(raw, max_depth=None))
    ) == records.RecordsPage(
        from_offset=from_offset,
        next_offset=base,
        log_end_offset=log_end_offset,
        batches=tuple(batches),
    )


@given(
    st.builds(
        records.RecordsQuery,
        from_offset=st.integers(0, 2**63 - 1),
        max_wait_ms=st.integers(0, 10**6),
        max_records=st.integers(1, 10**6),
    ),
    st.one_of(st.just((-1, -1)), st.tuples(st.integers(0, 2**31 - 1), st.integers(-1, 2**62))),
)
def test_records_query(value: records.RecordsQuery, broker: tuple[int, int]) -> None:
    # Anonymous readers send no broker; a broker sends its id and epoch (-1 not registered).
    value = attrs.evolve(value, broker_id=broker[0], broker_epoch=broker[1])
    assert records.records_query_from_params(records.records_query_to_params(value)) == value


@given(
    st.lists(
        st.builds(
            records.SnapshotListing,
            snapshot_id=names,
            end_offset=ints,
            epoch=small,
            size_bytes=small,
        ),
        max_size=3,
    ).map(tuple)
)
def test_snapshots(value: tuple[records.SnapshotListing, ...]) -> None:
    round_trip(records.snapshots_to_json, records.snapshots_from_json, value)


snapshot_refs = st.builds(SnapshotRef, snapshot_id=names, end_offset=ints, epoch=small)


@given(
    st.one_of(
        st.builds(
            ErrorBody,
            error=st.sampled_from([e.name for e in Errors if e.name not in ("NOT_CONTROLLER",)]),
            message=st.text(max_size=20),
        ),
        st.builds(
            ErrorBody,
            error=st.just("NOT_CONTROLLER"),
            message=st.text(max_size=20),
            leader=optional_names,
            leader_id=optional_small,
        ),
        st.builds(
            ErrorBody,
            error=st.just(errors.SNAPSHOT_REQUIRED),
            message=st.text(max_size=20),
            snapshot=st.none() | snapshot_refs,
            log_start_offset=st.none() | ints,
        ),
    )
)
def test_error_body(value: ErrorBody) -> None:
    round_trip(errors.error_body_to_json, errors.error_body_from_json, value)


def test_the_redirect_names_the_leader_only_on_not_controller() -> None:
    leader = "http://127.0.0.1:19093"
    assert (
        errors.redirect_of(ErrorBody(error="NOT_CONTROLLER", message="m.", leader=leader)) == leader
    )
    assert errors.redirect_of(ErrorBody(error="NOT_CONTROLLER", message="m.")) is None
    assert (
        errors.redirect_of(ErrorBody(error="TOPIC_ALREADY_EXISTS", message="m.", leader=leader))
        is None
    )


@pytest.mark.parametrize(("error", "status"), [
    (Errors.NOT_CONTROLLER, 421), (Errors.TOPIC_ALREADY_EXISTS, 409),
    (Errors.UNKNOWN_TOPIC_OR_PARTITION, 404), (Errors.UNKNOWN_SERVER_ERROR, 500),
    (Errors.INVALID_REPLICATION_FACTOR, 400), (Errors.STALE_BROKER_EPOCH, 409),
])  # fmt: skip
def test_status_of(error: Errors, status: int) -> None:
    assert errors.status_of(error) == status


def test_not_controller_without_a_leader_is_503() -> None:
    assert errors.status_of(Errors.NOT_CONTROLLER, leader_known=False) == 503


def test_an_error_name_this_side_does_not_know_reads_as_unknown_server_error() -> None:
    # Kafka's Errors.forCode: an unknown code is UNKNOWN_SERVER_ERROR.
    answer = {
        "partitions": [
            {
                "topic_id": "t",
                "partition_index": 0,
                "error": "NO_SUCH_ERROR",
                "message": None,
                "leader_id": 1,
                "leader_epoch": 1,
                "isr": [1],
                "partition_epoch": 1,
                "leader_recovery_state": 0,
            }
        ]
    }
    (result,) = brokers.alter_partition_response_from_json(Fields(answer)).partitions
    assert result.error == ApiError(Errors.UNKNOWN_SERVER_ERROR)
