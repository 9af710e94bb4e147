"""The feature-levels route of the controller's HTTP API: Kafka's UpdateFeatures (KIP-584,
KIP-778's upgrade types), the pure controller's input and output
(``quorum/managers/features.py``).

POST /v1/features {"feature_updates": [{"feature": "metadata.version", "max_version_level": 21,
                   "upgrade_type": "upgrade" | "safe_downgrade" | "unsafe_downgrade"}],
                   "validate_only": false}
               -> {"results": [{"feature", "error", "message"}]}  (one per feature, by name)
"""

from __future__ import annotations

import enum

import attrs

from pykraft.metadata.api.errors import ApiError, error_field_from_json, error_field_to_json
from pykraft.metadata.api.json_fields import Fields, JsonObject, one_of


class UpgradeType(enum.IntEnum):
    """Kafka's ``FeatureUpdate.UpgradeType`` codes (UpdateFeatures v1's ``UpgradeType``)."""

    UNKNOWN = 0
    UPGRADE = 1
    SAFE_DOWNGRADE = 2
    UNSAFE_DOWNGRADE = 3

    @classmethod
    def of_code(cls, code: int) -> UpgradeType:
        """``FeatureUpdate.UpgradeType.fromCode``: an unknown code is UNKNOWN."""
        try:
            return cls(code)
        except ValueError:
            return cls.UNKNOWN


@attrs.frozen
class FeatureUpdate:
    feature: str
    # Below 1 asks to remove the finalized feature (Kafka writes it as level 0).
    max_version_level: int
    upgrade_type: UpgradeType = UpgradeType.UPGRADE


@attrs.frozen
class UpdateFeaturesRequest:
    updates: tuple[FeatureUpdate, ...]
    validate_only: bool = False


@attrs.frozen
class FeatureResult:
    feature: str
    error: ApiError


@attrs.frozen
class UpdateFeaturesResponse:
    # By feature name, as Kafka's TreeMap of results.
    results: tuple[FeatureResult, ...]


_UPGRADE_NAMES = tuple(kind.name.lower() for kind in UpgradeType if kind != UpgradeType.UNKNOWN)


def update_features_request_to_json(request: UpdateFeaturesRequest) -> JsonObject:
    return {
        "feature_updates": [
            {
                "feature": update.feature,
                "max_version_level": update.max_version_level,
                "upgrade_type": update.upgrade_type.name.lower(),
            }
            for update in request.updates
        ],
        "validate_only": request.validate_only,
    }


def _update_from_json(fields: Fields) -> FeatureUpdate:
    # "unknown" travels too: the controller answers it INVALID_UPDATE_VERSION, per feature.
    kind = one_of(
        fields.string("upgrade_type", "upgrade").lower(),
        (*_UPGRADE_NAMES, "unknown"),
        "upgrade_type",
    )
    return FeatureUpdate(
        feature=fields.string("feature"),
        max_version_level=fields.integer("max_version_level"),
        upgrade_type=UpgradeType[kind.upper()],
    )


def update_features_request_from_json(fields: Fields) -> UpdateFeaturesRequest:
    return UpdateFeaturesRequest(
        updates=tuple(_update_from_json(item) for item in fields.objects("feature_updates")),
        validate_only=fields.boolean("validate_only", False),
    )


def update_features_response_to_json(response: UpdateFeaturesResponse) -> JsonObject:
    return {
        "results": [
            {"feature": result.feature, **error_field_to_json(result.error)}
            for result in response.results
        ]
    }


def update_features_response_from_json(fields: Fields) -> UpdateFeaturesResponse:
    return UpdateFeaturesResponse(
        results=tuple(
            FeatureResult(feature=item.string("feature"), error=error_field_from_json(item))
            for item in fields.objects("results")
        )
    )
