"""AlterClientQuotas in the controller, mirroring Kafka's ``ClientQuotaControlManagerTest``
(``testInvalidEntityTypes``, ``testAlterAndRemove``, ``testEntityTypes``,
``testConfigKeysForEntityType*``, ``testIsValidIpEntity*``, the value checks of
``validateQuotaKeyValue``) and the route's JSON (a round trip and its refusals)."""

from __future__ import annotations

import pytest

from pykraft.metadata.api.client_quotas import (
    AlterClientQuotasRequest,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
    QuotaAlteration,
    QuotaOp,
    alter_client_quotas_request_from_json,
    alter_client_quotas_request_to_json,
    alter_client_quotas_response_from_json,
    alter_client_quotas_response_to_json,
    describe_client_quotas_request_from_json,
    describe_client_quotas_request_to_json,
    describe_client_quotas_response_from_json,
    describe_client_quotas_response_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError
from pykraft.metadata.client_quotas import FilterComponent, MatchType, QuotaEntity, quota_entity
from pykraft.metadata.delta import apply_records
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import ClientQuotaRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.client_quotas import alter_client_quotas


def entity(**parts: str | None) -> QuotaEntity:
    return quota_entity((name.replace("_", "-"), value) for name, value in parts.items())


def alter(
    image: MetadataImage,
    *entries: tuple[QuotaEntity, dict[str, float | None]],
    validate_only: bool = False,
) -> tuple[MetadataImage, list[tuple[Errors, str | None]]]:
    request = AlterClientQuotasRequest(
        tuple(
            QuotaAlteration(e, tuple(QuotaOp(k, v) for k, v in ops.items())) for e, ops in entries
        ),
        validate_only,
    )
    result = alter_client_quotas(image, request)
    answers = [(r.error.error, r.error.message) for r in result.response.entries]
    return apply_records(image, result.records), answers


OK = (Errors.NONE, None)


def test_alter_and_remove() -> None:
    user, user_client = entity(user="user-1"), entity(user="user-1", client_id="client-id-1")
    image, answers = alter(
        MetadataImage.EMPTY,
        (user, {"producer_byte_rate": 10000.0, "consumer_byte_rate": 20000.0}),
        (user_client, {"request_percentage": 50.5}),
    )
    assert answers == [OK, OK]
    assert dict(image.client_quotas.quotas(user)) == {
        "producer_byte_rate": 10000.0,
        "consumer_byte_rate": 20000.0,
    }
    image, answers = alter(image, (user, {"producer_byte_rate": None, "consumer_byte_rate": 5.0}))
    assert answers == [OK]
    assert dict(image.client_quotas.quotas(user)) == {"consumer_byte_rate": 5.0}
    image, answers = alter(image, (user, {"consumer_byte_rate": None}))
    assert user not in image.client_quotas.entities
    assert user_client in image.client_quotas.entities


def test_only_changes_are_written() -> None:
    user = entity(user="a")
    image, _ = alter(MetadataImage.EMPTY, (user, {"producer_byte_rate": 100.0}))
    request = AlterClientQuotasRequest(
        (
            QuotaAlteration(
                user, (QuotaOp("producer_byte_rate", 100.0), QuotaOp("consumer_byte_rate", None))
            ),
        )
    )
    assert alter_client_quotas(image, request).records == ()


def test_validate_only_answers_and_writes_nothing() -> None:
    request = AlterClientQuotasRequest(
        (QuotaAlteration(entity(user="a"), (QuotaOp("producer_byte_rate", 1.0),)),),
        validate_only=True,
    )
    result = alter_client_quotas(MetadataImage.EMPTY, request)
    assert result.records == ()
    assert result.response.entries[0].error.error is Errors.NONE
    bad = AlterClientQuotasRequest(
        (QuotaAlteration(entity(user="a"), (QuotaOp("producer_byte_rate", -1.0),)),),
        validate_only=True,
    )
    assert alter_client_quotas(MetadataImage.EMPTY, bad).response.entries[0].error.error is (
        Errors.INVALID_REQUEST
    )


def test_default_entities_and_every_valid_combination() -> None:
    entities = [
        entity(user=None),
        entity(client_id=None),
        entity(user=None, client_id=None),
        entity(user="u", client_id=None),
        entity(user=None, client_id="c"),
        entity(ip=None),
        entity(ip="192.168.1.1"),
        entity(ip="::1"),
    ]
    entries: list[tuple[QuotaEntity, dict[str, float | None]]] = [
        (
            e,
            {"connection_creation_rate": 10.0}
            if dict(e).keys() == {"ip"}
            else {"request_percentage": 1.5},
        )
        for e in entities
    ]
    image, answers = alter(MetadataImage.EMPTY, *entries)
    assert answers == [OK] * len(entities)
    assert set(image.client_quotas.entities) == set(entities)
    records = image.client_quotas.to_records()
    assert all(isinstance(r, ClientQuotaRecord) for r in records) and len(records) == len(entities)


@pytest.mark.parametrize(
    ("quota_entity", "ops", "message"),
    [
        ((), {"producer_byte_rate": 1.0}, "Invalid empty client quota entity"),
        (
            entity(group="g"),
            {"producer_byte_rate": 1.0},
            "Unhandled client quota entity type: group",
        ),
        (entity(user=""), {"producer_byte_rate": 1.0}, "Empty user not supported"),
        (entity(client_id=""), {"producer_byte_rate": 1.0}, "Empty client-id not supported"),
        (
            entity(user="u", ip="1.2.3.4"),
            {"request_percentage": 1.0},
            "Invalid quota entity combination",
        ),
        (entity(ip="not an ip"), {"connection_creation_rate": 1.0}, "not a valid IP"),
        (
            entity(ip="1.2.3.4"),
            {"producer_byte_rate": 1.0},
            "Invalid configuration key producer_byte_rate",
        ),
        (
            entity(user="u"),
            {"connection_creation_rate": 1.0},
            "Invalid configuration key connection_creation_rate",
        ),
        (entity(user="u"), {"no_such_key": 1.0}, "Invalid configuration key no_such_key"),
        (
            entity(user="u"),
            {"producer_byte_rate": 0.0},
            "Quota producer_byte_rate must be greater than 0",
        ),
        (entity(user="u"), {"request_percentage": -1.0}, "must be greater than 0"),
        (entity(user="u"), {"request_percentage": float("nan")}, "must be a finite number"),
        (entity(user="u"), {"request_percentage": float("inf")}, "must be a finite number"),
        (
            entity(user="u"),
            {"producer_byte_rate": 10.5},
            "producer_byte_rate cannot be a fractional value.",
        ),
        (entity(user="u"), {"consumer_byte_rate": 1e19}, "too large for a LONG."),
        (entity(ip="1.2.3.4"), {"connection_creation_rate": 2.0**31}, "too large for an INT."),
        (entity(ip="1.2.3.4"), {"connection_creation_rate": 1.5}, "cannot be a fractional value."),
    ],
)
def test_invalid_alterations_are_refused_and_write_nothing(
    quota_entity: QuotaEntity, ops: dict[str, float | None], message: str
) -> None:
    image, answers = alter(MetadataImage.EMPTY, (quota_entity, ops))
    assert answers[0][0] is Errors.INVALID_REQUEST
    assert message in (answers[0][1] or "")
    assert image.client_quotas.entities == MetadataImage.EMPTY.client_quotas.entities


def test_an_almost_integral_value_is_integral() -> None:
    # Kafka's epsilon: 1e-6.
    _, answers = alter(MetadataImage.EMPTY, (entity(user="u"), {"producer_byte_rate": 100.0000001}))
    assert answers == [OK]


def test_one_failing_entity_leaves_the_others_applied() -> None:
    good, bad = entity(user="good"), entity(user="bad")
    image, answers = alter(
        MetadataImage.EMPTY,
        (good, {"producer_byte_rate": 1.0}),
        (bad, {"producer_byte_rate": 1.0, "request_percentage": -5.0}),
    )
    assert answers[0] == OK and answers[1][0] is Errors.INVALID_REQUEST
    assert good in image.client_quotas.entities and bad not in image.client_quotas.entities


def test_a_duplicate_entity_is_refused_and_the_first_mention_stands() -> None:
    user = entity(user="u")
    image, answers = alter(
        MetadataImage.EMPTY,
        (user, {"producer_byte_rate": 1.0}),
        (user, {"producer_byte_rate": 2.0}),
    )
    assert len(answers) == 1 and answers[0][0] is Errors.INVALID_REQUEST
    assert "Ignoring duplicate entity" in (answers[0][1] or "")
    assert image.client_quotas.quotas(user)["producer_byte_rate"] == 1.0


def test_a_duplicate_key_fails_its_entity() -> None:
    request = AlterClientQuotasRequest(
        (
            QuotaAlteration(
                entity(user="u"),
                (QuotaOp("producer_byte_rate", 1.0), QuotaOp("producer_byte_rate", None)),
            ),
        )
    )
    result = alter_client_quotas(MetadataImage.EMPTY, request)
    assert result.records == ()
    assert "Duplicate quota key producer_byte_rate" in (
        result.response.entries[0].error.message or ""
    )


def test_the_route_json_round_trips() -> None:
    request = AlterClientQuotasRequest(
        (
            QuotaAlteration(
                entity(user=None, client_id="c"),
                (QuotaOp("producer_byte_rate", 5.0), QuotaOp("consumer_byte_rate", None)),
            ),
        ),
        validate_only=True,
    )
    body = alter_client_quotas_request_to_json(request)
    assert alter_client_quotas_request_from_json(Fields(body)) == request
    result = alter_client_quotas(MetadataImage.EMPTY, request)
    answer = alter_client_quotas_response_to_json(result.response)
    assert alter_client_quotas_response_from_json(Fields(answer)) == result.response


@pytest.mark.parametrize(
    "body",
    [
        {
            "entries": [
                {
                    "entity": [{"entity_type": "user", "entity_name": "a"}],
                    "ops": [{"key": "k", "value": "1"}],
                }
            ]
        },
        {
            "entries": [
                {"entity": [{"entity_type": "user", "entity_name": "a"}], "ops": [{"key": "k"}]}
            ]
        },
        {"entries": [{"entity": [{"entity_type": "user", "entity_name": 5}], "ops": []}]},
        {"entries": [{"entity": [], "ops": [{"key": "k", "value": True}]}]},
        {"entries": [{"entity": [], "ops": []}] * 1001},
    ],
)
def test_the_route_refuses_bad_bodies(body: dict[str, object]) -> None:
    with pytest.raises(JsonBodyError):
        alter_client_quotas_request_from_json(Fields(body))


def test_the_describe_route_json_round_trips_and_refuses_unknown_match_types() -> None:
    request = DescribeClientQuotasRequest(
        (
            FilterComponent("user", MatchType.DEFAULT),
            FilterComponent("client-id", MatchType.EXACT, "app"),
        ),
        strict=True,
    )
    body = describe_client_quotas_request_to_json(request)
    assert body["components"][0]["match_type"] == "DEFAULT"
    assert describe_client_quotas_request_from_json(Fields(body)) == request
    response = DescribeClientQuotasResponse(
        ((entity(user=None, client_id="app"), (("producer_byte_rate", 5.0),)),)
    )
    answer = describe_client_quotas_response_to_json(response)
    assert describe_client_quotas_response_from_json(Fields(answer)) == response
    with pytest.raises(JsonBodyError, match="match_type"):
        describe_client_quotas_request_from_json(
            Fields({"components": [{"entity_type": "user", "match_type": "ANY", "match": None}]})
        )
