"""POST /v1/features (``metadata/api/features.py``): requests and responses survive the JSON
trip; bad bodies are refused naming the field."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pykraft.metadata.api import features
from pykraft.metadata.api.features import UpgradeType
from pykraft.metadata.api.json_fields import Fields
from tests.metadata.api_codec_support import api_errors, names, round_trip, small
from tests.metadata.test_api_refusals import refused

updates = st.builds(features.FeatureUpdate, names, small, st.sampled_from(list(UpgradeType)))


@given(st.builds(features.UpdateFeaturesRequest, st.lists(updates, max_size=3).map(tuple)))
def test_update_features_request(value: features.UpdateFeaturesRequest) -> None:
    round_trip(
        features.update_features_request_to_json, features.update_features_request_from_json, value
    )


@given(
    st.builds(
        features.UpdateFeaturesResponse,
        st.lists(st.builds(features.FeatureResult, names, api_errors), max_size=3).map(tuple),
    )
)
def test_update_features_response(value: features.UpdateFeaturesResponse) -> None:
    round_trip(
        features.update_features_response_to_json,
        features.update_features_response_from_json,
        value,
    )


def test_the_upgrade_type_defaults_to_upgrade_and_validate_only_to_false() -> None:
    request = features.update_features_request_from_json(
        Fields({"feature_updates": [{"feature": "f", "max_version_level": 1}]})
    )
    assert request == features.UpdateFeaturesRequest((features.FeatureUpdate("f", 1),), False)


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (
            {"feature_updates": [{"feature": "f", "max_version_level": 1, "upgrade_type": "x"}]},
            "upgrade_type must be 'upgrade' or 'safe_downgrade' or 'unsafe_downgrade' or "
            "'unknown'.",
        ),
        ({"feature_updates": [{"feature": "f"}]}, "max_version_level"),
        ({}, "feature_updates"),
    ],
)
def test_bad_bodies_are_refused(body: dict[str, object], message: str) -> None:
    assert message in refused(features.update_features_request_from_json, body)


@pytest.mark.parametrize(
    ("code", "kind"),
    [(0, "UNKNOWN"), (1, "UPGRADE"), (3, "UNSAFE_DOWNGRADE"), (4, "UNKNOWN"), (-1, "UNKNOWN")],
)
def test_upgrade_type_of_code(code: int, kind: str) -> None:
    assert UpgradeType.of_code(code) == UpgradeType[kind]
