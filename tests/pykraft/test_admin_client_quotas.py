"""``admin_client_quotas``: DescribeClientQuotas / AlterClientQuotas requests decoded by the
broker's own codec (kafka-python's classes, both flexible and not), and answers decoded here."""

from __future__ import annotations

import pytest
from kafka.protocol.admin import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
    DescribeClientQuotasRequest,
    DescribeClientQuotasResponse,
)

from pykraft.admin_client_quotas import (
    MATCH_DEFAULT,
    MATCH_EXACT,
    QuotaFilterComponent,
    decode_alter,
    decode_describe,
    encode_alter,
    encode_describe,
)
from pykraft.protocol.errors import Errors


@pytest.mark.parametrize("version", [0, 1])
def test_describe_request_carries_the_filter(version: int) -> None:
    components = [QuotaFilterComponent("user", MATCH_EXACT, "alice"),
                  QuotaFilterComponent("client-id", MATCH_DEFAULT)]  # fmt: skip
    body = encode_describe(version, components, strict=True)
    request = DescribeClientQuotasRequest.decode(body, version=version)
    assert request.strict is True
    assert [(c.entity_type, c.match_type, c.match) for c in request.components] == [
        ("user", 0, "alice"), ("client-id", 1, None),
    ]  # fmt: skip


@pytest.mark.parametrize("version", [0, 1])
def test_alter_request_sets_and_removes(version: int) -> None:
    body = encode_alter(version, (("user", None),), {"consumer_byte_rate": 10.0, "x": None})
    [entry] = AlterClientQuotasRequest.decode(body, version=version).entries
    assert [(e.entity_type, e.entity_name) for e in entry.entity] == [("user", None)]
    assert [(o.key, o.value, o.remove) for o in entry.ops] == [
        ("consumer_byte_rate", 10.0, False), ("x", 0.0, True),
    ]  # fmt: skip


@pytest.mark.parametrize("version", [0, 1])
def test_answers_decode(version: int) -> None:
    entry = DescribeClientQuotasResponse.EntryData
    described = DescribeClientQuotasResponse(
        version=version, throttle_time_ms=0, error_code=0, error_message=None,
        entries=[entry(entity=[entry.EntityData(entity_type="user", entity_name="a")],
                       values=[entry.ValueData(key="consumer_byte_rate", value=5.0)])],
    )  # fmt: skip
    assert decode_describe(bytes(described.encode(version=version)), version) == (
        Errors.NONE, None, {(("user", "a"),): {"consumer_byte_rate": 5.0}},
    )  # fmt: skip
    result = AlterClientQuotasResponse.EntryData
    altered = AlterClientQuotasResponse(
        version=version, throttle_time_ms=0,
        entries=[result(error_code=Errors.INVALID_REQUEST.value, error_message="bad",
                        entity=[result.EntityData(entity_type="user", entity_name="a")])],
    )  # fmt: skip
    assert decode_alter(bytes(altered.encode(version=version)), version) == [
        (Errors.INVALID_REQUEST, "bad")
    ]
