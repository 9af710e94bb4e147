"""``POST /v1/configs`` (metadata/api/config_batch.py): every resource of one alter request
round-trips through real JSON, results keep their order and errors, and a body of the wrong
shape or over the bound is refused with a ``JsonBodyError``."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.metadata.api import admin, config_batch
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.json_fields import JsonBodyError
from pykraft.metadata.records import ConfigResourceType
from pykraft.protocol.errors import Errors
from tests.metadata.api_codec_support import over_the_wire, round_trip

names = st.text(min_size=1, max_size=12)
kinds = st.sampled_from([t.value for t in ConfigResourceType])
values = st.none() | st.text(max_size=8)


_OP_ORDER = [
    admin.AlterConfigOp.SET,
    admin.AlterConfigOp.APPEND,
    admin.AlterConfigOp.SUBTRACT,
    admin.AlterConfigOp.DELETE,
]


@st.composite
def resources(draw: st.DrawFn, replace: bool) -> admin.AlterConfigsResource:
    ops = [admin.AlterConfigOp.SET] if replace else list(admin.AlterConfigOp)
    keys = draw(st.lists(names, unique=True, max_size=4))
    changes = []
    for key in keys:
        op = draw(st.sampled_from(ops))
        value = None if op is admin.AlterConfigOp.DELETE else draw(values)
        changes.append(admin.AlterableConfig(key, op, value))
    # The body groups a resource's configs by op (set, append, subtract, delete); the keys are
    # distinct, so their order carries nothing.
    changes.sort(key=lambda change: _OP_ORDER.index(change.op))
    return admin.AlterConfigsResource(draw(kinds), draw(st.text(max_size=12)), tuple(changes))


@given(st.lists(resources(replace=False), max_size=5), st.booleans())
def test_an_incremental_request_round_trips(
    listed: list[admin.AlterConfigsResource], validate_only: bool
) -> None:
    value = admin.IncrementalAlterConfigsRequest(tuple(listed), validate_only)
    round_trip(
        config_batch.alter_configs_batch_to_json,
        config_batch.alter_configs_batch_from_json,
        value,
    )


@given(st.lists(resources(replace=True), max_size=5), st.booleans())
def test_a_legacy_request_round_trips(
    listed: list[admin.AlterConfigsResource], validate_only: bool
) -> None:
    value = admin.LegacyAlterConfigsRequest(tuple(listed), validate_only)
    round_trip(
        config_batch.alter_configs_batch_to_json,
        config_batch.alter_configs_batch_from_json,
        value,
    )


api_errors = st.sampled_from(list(Errors)).flatmap(
    lambda error: st.builds(ApiError, st.just(error), st.none() | st.text(max_size=20))
)


@given(
    st.lists(
        st.builds(admin.AlterConfigsResourceResult, kinds, st.text(max_size=12), api_errors),
        max_size=6,
    )
)
def test_results_round_trip_in_order(results: list[admin.AlterConfigsResourceResult]) -> None:
    round_trip(
        config_batch.alter_configs_results_to_json,
        config_batch.alter_configs_results_from_json,
        admin.IncrementalAlterConfigsResponse(tuple(results)),
    )


def test_a_replace_request_names_its_configs_in_set_only() -> None:
    body = {
        "replace": True,
        "resources": [{"resource_type": "topic", "resource_name": "t", "delete": ["a"]}],
    }
    with pytest.raises(JsonBodyError, match="'set' only"):
        config_batch.alter_configs_batch_from_json(over_the_wire(body))


def test_more_resources_than_the_bound_are_refused() -> None:
    resource = {"resource_type": "topic", "resource_name": "t"}
    body = {"resources": [resource] * (config_batch.MAX_BATCH_RESOURCES + 1)}
    with pytest.raises(JsonBodyError, match="At most 1000 resources"):
        config_batch.alter_configs_batch_from_json(over_the_wire(body))


@pytest.mark.parametrize(
    "resource",
    [
        {"resource_type": "group", "resource_name": "g"},
        {"resource_name": "t"},
        {"resource_type": "topic"},
        {"resource_type": "topic", "resource_name": "t", "set": ["a"]},
    ],
)
def test_a_resource_of_the_wrong_shape_is_refused(resource: dict[str, object]) -> None:
    with pytest.raises(JsonBodyError):
        config_batch.alter_configs_batch_from_json(over_the_wire({"resources": [resource]}))
