"""Client quotas in the image: replay (Kafka's ``ClientQuotasDeltaTest`` /
``ClientQuotasImageTest``), snapshots, both codecs, and DescribeClientQuotas' filter
(``ClientQuotaControlManagerTest.testDescribeClientQuotas``' entity set and
``ClientQuotasImage.describe``'s refusals)."""

from __future__ import annotations

import pytest

from pykraft.metadata.client_quotas import (
    CLIENT_ID,
    IP,
    USER,
    DescribeError,
    FilterComponent,
    MatchType,
    QuotaEntity,
    describe_client_quotas,
    entity_data,
    quota_entity,
)
from pykraft.metadata.codec import decode_record, encode_record
from pykraft.metadata.compact_codec import decode_records, encode_records
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.record_schema import MetadataCodecError
from pykraft.metadata.records import ClientQuotaEntityData, ClientQuotaRecord
from pykraft.metadata.snapshot import decode_snapshot, encode_snapshot, snapshot_to_image
from pykraft.protocol.errors import Errors


def entity(**parts: str | None) -> QuotaEntity:
    return quota_entity((name.replace("_", "-"), value) for name, value in parts.items())


def put(quota_entity: QuotaEntity, key: str, value: float) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=entity_data(quota_entity), key=key, value=value)


def remove(quota_entity: QuotaEntity, key: str) -> ClientQuotaRecord:
    return ClientQuotaRecord(entity=entity_data(quota_entity), key=key, remove=True)


def test_replay_sets_replaces_and_removes_keys() -> None:
    alice = entity(user="alice")
    image = apply_records(
        MetadataImage.EMPTY,
        [put(alice, "producer_byte_rate", 1000.0), put(alice, "consumer_byte_rate", 2000.0)],
    )
    assert dict(image.client_quotas.quotas(alice)) == {
        "producer_byte_rate": 1000.0,
        "consumer_byte_rate": 2000.0,
    }
    image = apply_records(
        image, [put(alice, "producer_byte_rate", 5.0), remove(alice, "consumer_byte_rate")]
    )
    assert dict(image.client_quotas.quotas(alice)) == {"producer_byte_rate": 5.0}


def test_the_last_key_removed_forgets_the_entity_and_an_absent_key_is_no_error() -> None:
    alice = entity(user="alice")
    image = apply_records(MetadataImage.EMPTY, [put(alice, "producer_byte_rate", 1.0)])
    image = apply_records(
        image, [remove(alice, "producer_byte_rate"), remove(alice, "request_percentage")]
    )
    assert alice not in image.client_quotas.entities
    assert image.client_quotas.entities == MetadataImage.EMPTY.client_quotas.entities


def test_an_entity_is_the_same_in_any_part_order() -> None:
    record = ClientQuotaRecord(
        entity=(
            ClientQuotaEntityData(entity_type=CLIENT_ID, entity_name="app"),
            ClientQuotaEntityData(entity_type=USER, entity_name=None),
        ),
        key="producer_byte_rate",
        value=7.0,
    )
    image = apply_records(MetadataImage.EMPTY, [record])
    assert dict(image.client_quotas.quotas(entity(user=None, client_id="app"))) == {
        "producer_byte_rate": 7.0
    }


def test_snapshots_and_both_codecs_carry_quotas() -> None:
    records = [
        put(entity(user=None), "producer_byte_rate", 1e6),
        put(entity(user="bob", client_id=None), "request_percentage", 12.5),
        put(entity(ip="10.0.0.1"), "connection_creation_rate", 3.0),
    ]
    image = apply_records(MetadataImage.EMPTY, records, offset=2, epoch=1)
    header, decoded = decode_snapshot(encode_snapshot(image, created_ms=0), "test")
    assert snapshot_to_image(header, decoded, "test") == image
    for record in records:
        assert decode_record(encode_record(record)) == record
    assert decode_records(encode_records(records), len(records)) == tuple(records)


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "5", True, None])
def test_a_quota_value_must_be_a_finite_number(value: object) -> None:
    record = ClientQuotaRecord(entity=(), key="k", value=value)  # type: ignore[arg-type]
    with pytest.raises(MetadataCodecError, match="'value'"):
        encode_record(record)


# ClientQuotaControlManagerTest.testDescribeClientQuotas' entities.
ENTITIES = {
    "user=a": entity(user="a"),
    "user=b": entity(user="b"),
    "user=default": entity(user=None),
    "client=x": entity(client_id="x"),
    "client=default": entity(client_id=None),
    "user=a,client=x": entity(user="a", client_id="x"),
    "user=a,client=default": entity(user="a", client_id=None),
    "user=default,client=x": entity(user=None, client_id="x"),
    "ip=1.2.3.4": entity(ip="1.2.3.4"),
    "ip=default": entity(ip=None),
}


def quotas_image() -> MetadataImage:
    records = [put(e, "request_percentage", 50.0) for e in ENTITIES.values()]
    return apply_records(MetadataImage.EMPTY, records)


def exact(entity_type: str, name: str) -> FilterComponent:
    return FilterComponent(entity_type, MatchType.EXACT, name)


def default(entity_type: str) -> FilterComponent:
    return FilterComponent(entity_type, MatchType.DEFAULT)


def specified(entity_type: str) -> FilterComponent:
    return FilterComponent(entity_type, MatchType.SPECIFIED)


def names(components: list[FilterComponent], strict: bool) -> set[str]:
    result = describe_client_quotas(quotas_image().client_quotas, components, strict)
    assert not isinstance(result, DescribeError), result
    by_entity = {e: name for name, e in ENTITIES.items()}
    return {by_entity[e] for e, _ in result}


@pytest.mark.parametrize(
    ("components", "strict", "expected"),
    [
        ([exact(USER, "a")], False, {"user=a", "user=a,client=x", "user=a,client=default"}),
        ([exact(USER, "a")], True, {"user=a"}),
        ([default(USER)], False, {"user=default", "user=default,client=x"}),
        ([default(USER)], True, {"user=default"}),
        (
            [specified(USER)],
            True,
            {"user=a", "user=b", "user=default"},
        ),
        (
            [exact(USER, "a"), specified(CLIENT_ID)],
            True,
            {"user=a,client=x", "user=a,client=default"},
        ),
        ([specified(USER), default(CLIENT_ID)], True, {"user=a,client=default"}),
        ([exact(CLIENT_ID, "x")], True, {"client=x"}),
        ([exact(USER, "nobody")], False, set()),
        ([specified(IP)], False, {"ip=1.2.3.4", "ip=default"}),
        ([], False, set(ENTITIES)),
        ([], True, set()),
    ],
)
def test_describe_filters_as_kafka(
    components: list[FilterComponent], strict: bool, expected: set[str]
) -> None:
    assert names(components, strict) == expected


@pytest.mark.parametrize(
    ("components", "error", "message"),
    [
        ([exact("", "a")], Errors.INVALID_REQUEST, "Invalid empty entity type."),
        ([exact(USER, "a"), default(USER)], Errors.INVALID_REQUEST, "more than once"),
        ([exact("group", "a")], Errors.UNSUPPORTED_VERSION, "Unsupported entity type group"),
        ([FilterComponent(USER, MatchType.EXACT)], Errors.INVALID_REQUEST, "set match string"),
        ([FilterComponent(USER, MatchType.DEFAULT, "a")], Errors.INVALID_REQUEST, "DEFAULT"),
        ([FilterComponent(USER, MatchType.SPECIFIED, "a")], Errors.INVALID_REQUEST, "SPECIFIED"),
        ([FilterComponent(USER, 7)], Errors.UNSUPPORTED_VERSION, "Unknown match type 7"),
        ([specified(IP), exact(USER, "a")], Errors.INVALID_REQUEST, "IP filter component"),
    ],
)
def test_describe_refuses_bad_filters(
    components: list[FilterComponent], error: Errors, message: str
) -> None:
    result = describe_client_quotas(quotas_image().client_quotas, components, strict=False)
    assert isinstance(result, DescribeError)
    assert result.error is error
    assert message in result.message
