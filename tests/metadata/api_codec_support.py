"""Strategies and the JSON round trip shared by the HTTP contract's codec tests."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.json_fields import Fields, JsonObject, parse_json_object
from pykraft.metadata.records import BrokerEndpoint, BrokerFeature
from pykraft.protocol.errors import Errors

ints = st.integers(min_value=-(2**63), max_value=2**63 - 1)
small = st.integers(min_value=-1, max_value=2**31 - 1)
names = st.text(min_size=1, max_size=12)
optional_names = st.none() | names
api_errors = st.builds(ApiError, st.sampled_from(list(Errors)), st.none() | st.text(max_size=20))

endpoints = st.builds(
    BrokerEndpoint, name=names, host=names, port=small, security_protocol=st.integers(0, 3)
)
features = st.builds(
    BrokerFeature, name=names, min_supported_version=small, max_supported_version=small
)


def over_the_wire(encoded: JsonObject) -> Fields:
    """What the other side reads: the JSON text, parsed by the one bounded parser."""
    return Fields(parse_json_object(json.dumps(encoded).encode()))


def round_trip(
    encode: Callable[[Any], JsonObject], decode: Callable[[Fields], Any], value: Any
) -> None:
    assert decode(over_the_wire(encode(value))) == value
