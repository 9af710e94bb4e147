"""Error answers to requests the broker does not serve (``protocol.unsupported``).

Every API version a schema defines but the broker does not serve must get a response that
decodes at the request's own version and carries UNSUPPORTED_VERSION in every error code it
has — Kafka's ``AbstractRequest.getErrorResponse`` shape — or, where no answer can be built,
None (the connection closes).
"""

from __future__ import annotations

from typing import Any

import pytest

from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import SUPPORTED_API_VERSIONS
from pykraft.protocol.errors import Errors
from pykraft.protocol.kafka_3_9_versions import KAFKA_3_9_BROKER_API_VERSIONS
from pykraft.protocol.kafka_messages import MESSAGE_CLASSES
from pykraft.protocol.unsupported import can_answer, error_response


def unserved_versions() -> list[tuple[int, int]]:
    cases = []
    for api_key, (request_cls, _) in sorted(MESSAGE_CLASSES.items()):
        if api_key == ApiKey.API_VERSIONS:
            continue  # KIP-511's v0 answer, apis.encode_unsupported_api_versions_response
        low, high = request_cls.valid_versions
        low = min(low, KAFKA_3_9_BROKER_API_VERSIONS.get(ApiKey(api_key), (low,))[0])
        served = SUPPORTED_API_VERSIONS.get(ApiKey(api_key))
        cases += [(api_key, v) for v in range(low, high + 1) if served is None or v not in served]
    return cases


def error_codes(fields: Any, value: Any, version: int) -> list[int]:
    """Every error_code the schema puts in this version of a decoded message, depth first."""
    found = []
    for name, field in fields.items():
        if not field.for_version_q(version):
            continue
        if name == "error_code":
            found.append(getattr(value, name))
        elif field.is_struct_array():
            for item in getattr(value, name) or []:
                found += error_codes(field.fields, item, version)
    return found


@pytest.mark.parametrize(("api_key", "api_version"), unserved_versions())
def test_every_unserved_version_gets_a_decodable_unsupported_version_answer(
    api_key: int, api_version: int
) -> None:
    request_cls, response_cls = MESSAGE_CLASSES[api_key]
    request = request_cls(version=api_version)
    if api_key == ApiKey.PRODUCE:
        request.acks = -1
    body = error_response(api_key, api_version, bytes(request.encode(version=api_version)))
    assert body is not None
    response = response_cls.decode(body, version=api_version)
    codes = error_codes(response_cls._struct.fields, response, api_version)
    assert set(codes) <= {Errors.UNSUPPORTED_VERSION}


def test_the_mirror_names_every_partition_of_the_request() -> None:
    request_cls, response_cls = MESSAGE_CLASSES[ApiKey.OFFSET_DELETE]
    topic = request_cls.OffsetDeleteRequestTopic
    partition = topic.OffsetDeleteRequestPartition(partition_index=2)
    topics = [topic(name="pets", partitions=[partition])]
    request = request_cls(version=0, group_id="g", topics=topics)
    body = error_response(ApiKey.OFFSET_DELETE, 0, bytes(request.encode(version=0)))
    assert body is not None
    response = response_cls.decode(body, version=0)
    assert response.error_code == Errors.UNSUPPORTED_VERSION
    assert [(t.name, [(p.partition_index, p.error_code) for p in t.partitions])
            for t in response.topics] == [("pets", [(2, Errors.UNSUPPORTED_VERSION)])]  # fmt: skip


@pytest.mark.parametrize(
    ("api_key", "api_version", "reason"),
    [
        (999, 0, "no schema knows the key"),
        (ApiKey.VOTE, 0, "no schema here for a controller API"),
        (ApiKey.METADATA, 99, "no schema defines the version"),
    ],
)
def test_no_answer_without_a_schema(api_key: int, api_version: int, reason: str) -> None:
    assert not can_answer(api_key, api_version), reason
    assert error_response(api_key, api_version, b"") is None, reason


def test_no_answer_to_a_body_that_does_not_decode() -> None:
    # DescribeLogDirs v5 (not advertised): a compact array of four topics, then nothing.
    assert error_response(ApiKey.DESCRIBE_LOG_DIRS, 5, b"\x05") is None


def test_produce_and_fetch_answers_name_every_partition_despite_renamed_fields() -> None:
    # Kafka's ProduceRequest/FetchRequest.getErrorResponse list every partition requested.
    produce_cls, produce_response_cls = MESSAGE_CLASSES[ApiKey.PRODUCE]
    data = produce_cls.TopicProduceData
    request = produce_cls(
        version=11, acks=-1, timeout_ms=1000,
        topic_data=[data(name="pets", partition_data=[data.PartitionProduceData(index=4)])],
    )  # fmt: skip
    body = error_response(ApiKey.PRODUCE, 11, bytes(request.encode(version=11)))
    assert body is not None
    produced = produce_response_cls.decode(body, version=11)
    answered = [
        (t.name, [(p.index, p.error_code) for p in t.partition_responses])
        for t in produced.responses
    ]
    assert answered == [("pets", [(4, Errors.UNSUPPORTED_VERSION)])]

    fetch_cls, fetch_response_cls = MESSAGE_CLASSES[ApiKey.FETCH]
    topic = fetch_cls.FetchTopic
    fetch = fetch_cls(
        version=17, topics=[topic(topic_id="00000000-0000-0000-0000-000000000001",
                                  partitions=[topic.FetchPartition(partition=6)])],
    )  # fmt: skip
    body = error_response(ApiKey.FETCH, 17, bytes(fetch.encode(version=17)))
    assert body is not None
    fetched = fetch_response_cls.decode(body, version=17)
    assert fetched.error_code == Errors.UNSUPPORTED_VERSION
    assert [[(p.partition_index, p.error_code) for p in t.partitions]
            for t in fetched.responses] == [[(6, Errors.UNSUPPORTED_VERSION)]]  # fmt: skip
