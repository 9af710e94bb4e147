"""The controller's broker RPCs over HTTP (metadata/api/brokers.py): every request and answer
decodes what it encodes, through real JSON text (Hypothesis); heartbeat counters are optional
both ways."""

from __future__ import annotations

import attrs
from hypothesis import given
from hypothesis import strategies as st

from pykraft.metadata.api import brokers, routes
from pykraft.metadata.api.errors import SUCCESS
from pykraft.metadata.api.json_fields import Fields
from tests.metadata.api_codec_support import (
    api_errors,
    endpoints,
    features,
    ints,
    names,
    optional_names,
    round_trip,
    small,
)

# ---------------------------------------------------------------------------- broker RPCs


@given(
    st.builds(
        brokers.BrokerRegistrationRequest,
        broker_id=small,
        incarnation_id=names,
        listeners=st.lists(endpoints, max_size=3).map(tuple),
        rack=optional_names,
        features=st.lists(features, max_size=3).map(tuple),
        previous_broker_epoch=ints,
    )
)
def test_registration_request(value: brokers.BrokerRegistrationRequest) -> None:
    round_trip(brokers.registration_request_to_json, brokers.registration_request_from_json, value)


@given(
    st.builds(
        brokers.BrokerRegistrationReply,
        broker_id=small,
        broker_epoch=ints,
        heartbeat_interval_ms=small,
        session_timeout_ms=small,
    )
)
def test_registration_reply(value: brokers.BrokerRegistrationReply) -> None:
    round_trip(brokers.registration_reply_to_json, brokers.registration_reply_from_json, value)


@given(
    st.builds(
        brokers.BrokerHeartbeatRequest,
        broker_id=small,
        broker_epoch=ints,
        current_metadata_offset=ints,
        want_fence=st.booleans(),
        want_shut_down=st.booleans(),
        offline_log_dirs=st.lists(names, max_size=3).map(tuple),
        offline_replicas=st.lists(st.builds(brokers.OfflineReplica, names, small), max_size=3).map(
            tuple
        ),
        counters=st.none() | st.builds(brokers.BrokerTopicCounters, *[st.integers(0, 2**62)] * 6),
    )
)
def test_heartbeat_request(value: brokers.BrokerHeartbeatRequest) -> None:
    round_trip(brokers.heartbeat_request_to_json, brokers.heartbeat_request_from_json, value)


def test_heartbeat_counters_are_optional_both_ways() -> None:
    """A broker that sends no counters heartbeats as before (and sends no key); a field the
    codec does not know, in the counters or beside them, is ignored."""
    old = brokers.BrokerHeartbeatRequest(broker_id=1, broker_epoch=2, current_metadata_offset=3)
    assert "broker_topic_metrics" not in brokers.heartbeat_request_to_json(old)
    assert (
        brokers.heartbeat_request_from_json(
            Fields({"broker_id": 1, "broker_epoch": 2, "current_metadata_offset": 3})
        )
        == old
    )
    counters = brokers.BrokerTopicCounters(messages_in=5, bytes_out=7)
    body = brokers.heartbeat_request_to_json(attrs.evolve(old, counters=counters))
    body["broker_topic_metrics"]["future_counter"] = 9
    body["future_field"] = True
    assert brokers.heartbeat_request_from_json(Fields(body)).counters == counters
    # The broker's own time of reading them (review 2), inside the counters object.
    sampled = attrs.evolve(old, counters=counters, counters_sampled_ms=81_234)
    encoded = brokers.heartbeat_request_to_json(sampled)
    assert encoded["broker_topic_metrics"]["sampled_ms"] == 81_234
    assert brokers.heartbeat_request_from_json(Fields(encoded)) == sampled


@given(
    st.builds(
        brokers.BrokerHeartbeatResponse,
        error=st.just(SUCCESS),
        is_caught_up=st.booleans(),
        is_fenced=st.booleans(),
        in_controlled_shutdown=st.booleans(),
        should_shut_down=st.booleans(),
    )
)
def test_heartbeat_response(value: brokers.BrokerHeartbeatResponse) -> None:
    round_trip(brokers.heartbeat_response_to_json, brokers.heartbeat_response_from_json, value)


@given(st.builds(brokers.UnregisterBrokerRequest, small))
def test_unregister_answer(value: brokers.UnregisterBrokerRequest) -> None:
    round_trip(brokers.unregister_answer_to_json, brokers.unregister_answer_from_json, value)


@given(st.integers(0, 2**31 - 1))
def test_unregister_path(broker_id: int) -> None:
    path = routes.UNREGISTER_BROKER.path(broker_id=broker_id)
    assert brokers.unregister_request_from_path(
        path.rpartition("/")[2]
    ) == brokers.UnregisterBrokerRequest(broker_id)


alter_partition_data = st.builds(
    brokers.AlterPartitionData,
    topic_id=names,
    partition_index=small,
    leader_epoch=small,
    partition_epoch=small,
    new_isr_with_epochs=st.lists(st.builds(brokers.BrokerState, small, ints), max_size=4).map(
        tuple
    ),
    leader_recovery_state=st.integers(0, 1),
)


@given(
    st.builds(
        brokers.AlterPartitionRequest,
        small,
        ints,
        st.lists(alter_partition_data, max_size=3).map(tuple),
    )
)
def test_alter_partition_request(value: brokers.AlterPartitionRequest) -> None:
    round_trip(
        brokers.alter_partition_request_to_json, brokers.alter_partition_request_from_json, value
    )


@given(
    st.builds(
        brokers.AlterPartitionResponse,
        st.just(SUCCESS),
        st.lists(
            st.builds(
                brokers.AlterPartitionResult,
                topic_id=names,
                partition_index=small,
                error=api_errors,
                leader_id=small,
                leader_epoch=small,
                isr=st.lists(small, max_size=4).map(tuple),
                partition_epoch=small,
                leader_recovery_state=st.integers(0, 1),
            ),
            max_size=3,
        ).map(tuple),
    )
)
def test_alter_partition_response(value: brokers.AlterPartitionResponse) -> None:
    round_trip(
        brokers.alter_partition_response_to_json, brokers.alter_partition_response_from_json, value
    )


@given(st.builds(brokers.AllocateProducerIdsRequest, small, ints))
def test_producer_ids_request(value: brokers.AllocateProducerIdsRequest) -> None:
    round_trip(brokers.producer_ids_request_to_json, brokers.producer_ids_request_from_json, value)


@given(st.builds(brokers.AllocateProducerIdsResponse, st.just(SUCCESS), ints, small))
def test_producer_ids_response(value: brokers.AllocateProducerIdsResponse) -> None:
    round_trip(
        brokers.producer_ids_response_to_json, brokers.producer_ids_response_from_json, value
    )
