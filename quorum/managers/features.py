"""UpdateFeatures: finalized feature levels, checked against what the controllers and every
registered broker support (Kafka's ``FeatureControlManager.updateFeatures``, KIP-584, KIP-778).

Each named feature is decided on its own (a request naming a feature twice keeps the last
entry, as Kafka's map of updates does), in this order, every refusal INVALID_UPDATE_VERSION
with Kafka's "Invalid update version L for feature F. ..." message:

1. an UNKNOWN upgrade type (an unknown v1 code);
2. a level below 0;
3. a level the controller does not support, then one some registered broker (fenced or not)
   does not support — a feature a node does not list is supported at level 0 only
   (``QuorumFeatures.DISABLED``);
4. a level below the finalized one with the UPGRADE type, or above it with a downgrade type;
5. ``metadata.version`` below 1 (there is no metadata version 0: ``MetadataVersion
   .fromFeatureLevel``).

Every accepted feature writes one ``FeatureLevelRecord`` (level 0 removes the feature), all in
one atomic batch, unless ``validate_only``; refused ones write nothing. Results come back sorted
by feature name (Kafka's ``TreeMap``).

What the cluster supports today: ``eligible.leader.replicas.version`` 0-1 (KIP-966, which
brokers register too); no other feature. Its metadata log has one format, so every other
feature's level above 0 is refused at step 3 — what Kafka answers for a feature its software
does not know. The rules above still run in full against the ranges brokers register, which the
tests exercise. Kafka's extra ``metadata.version`` downgrade rules (lossy downgrades refused,
UNSAFE_DOWNGRADE unsupported) need a table of which levels change the metadata format, which
pykraft, with no metadata versions, does not have.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

import attrs

from pykraft.metadata.api.errors import SUCCESS, ApiError
from pykraft.metadata.api.features import (
    FeatureResult,
    FeatureUpdate,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
    UpgradeType,
)
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import FeatureLevelRecord, MetadataRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.elr import ELR_FEATURE, ELR_MAX_LEVEL, ELR_MIN_LEVEL
from pykraft.quorum.managers.result import ControllerResult

METADATA_VERSION = "metadata.version"


@attrs.frozen
class VersionRange:
    """Kafka's ``VersionRange``: the levels a node supports, both ends included."""

    min_version: int
    max_version: int

    def contains(self, level: int) -> bool:
        return self.min_version <= level <= self.max_version

    def __str__(self) -> str:
        if self.min_version == self.max_version:
            return str(self.min_version)
        return f"{self.min_version}-{self.max_version}"


# ``QuorumFeatures.DISABLED``: a feature a node does not list is supported at level 0 only.
DISABLED = VersionRange(0, 0)

# What this controller's software supports (Kafka's ``QuorumFeatures.localSupportedFeatures``):
# KIP-966's eligible.leader.replicas.version 0-1 (quorum/managers/elr.py).
CONTROLLER_SUPPORTED_FEATURES: Mapping[str, VersionRange] = MappingProxyType(
    {ELR_FEATURE: VersionRange(ELR_MIN_LEVEL, ELR_MAX_LEVEL)}
)


def reason_not_supported(level: int, what: str, supported: VersionRange) -> str | None:
    """``QuorumFeatures.reasonNotSupported``."""
    if supported.contains(level):
        return None
    if supported.max_version == 0:
        return f"{what} does not support this feature."
    return f"{what} only supports versions {supported}"


def _brokers_not_supporting(image: MetadataImage, feature: str, level: int) -> str | None:
    for broker_id, broker in sorted(image.cluster.brokers.items()):
        ranges = {f.name: f for f in broker.features}
        listed = ranges.get(feature)
        supported = (
            DISABLED
            if listed is None
            else VersionRange(listed.min_supported_version, listed.max_supported_version)
        )
        reason = reason_not_supported(level, f"broker {broker_id}", supported)
        if reason is not None:
            return reason
    return None


def _invalid(feature: str, level: int, message: str) -> ApiError:
    """``FeatureControlManager.invalidUpdateVersion``."""
    text = f"Invalid update version {level} for feature {feature}. {message}"
    return ApiError.of(Errors.INVALID_UPDATE_VERSION, text)


def update_feature(
    image: MetadataImage, update: FeatureUpdate, controller_supported: Mapping[str, VersionRange]
) -> ApiError:
    """``FeatureControlManager.updateFeature``: SUCCESS or why ``update`` is refused."""
    feature, level, kind = update.feature, update.max_version_level, update.upgrade_type
    if kind == UpgradeType.UNKNOWN:
        return _invalid(feature, level, "The controller does not support the given upgrade type.")
    current = image.features.get(feature, 0)
    if level < 0:
        return _invalid(feature, level, "A feature version cannot be less than 0.")
    reason = reason_not_supported(
        level, "Local controller", controller_supported.get(feature, DISABLED)
    ) or _brokers_not_supporting(image, feature, level)
    if reason is not None:
        return _invalid(feature, level, reason)
    if level < current and kind == UpgradeType.UPGRADE:
        return _invalid(
            feature,
            level,
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        )
    if level > current and kind != UpgradeType.UPGRADE:
        return _invalid(feature, level, "Can't downgrade to a newer version.")
    if feature == METADATA_VERSION and level < 1:
        return ApiError.of(
            Errors.INVALID_UPDATE_VERSION,
            f"Invalid metadata.version {level}. Unknown metadata.version.",
        )
    return SUCCESS


def update_features(
    image: MetadataImage,
    request: UpdateFeaturesRequest,
    controller_supported: Mapping[str, VersionRange] = CONTROLLER_SUPPORTED_FEATURES,
) -> ControllerResult[UpdateFeaturesResponse]:
    """``FeatureControlManager.updateFeatures``: one result per named feature; the accepted
    ones' records as one atomic batch (none when ``validate_only``)."""
    last_by_feature = {update.feature: update for update in request.updates}
    results: list[FeatureResult] = []
    records: list[MetadataRecord] = []
    for feature, update in sorted(last_by_feature.items()):
        error = update_feature(image, update, controller_supported)
        results.append(FeatureResult(feature=feature, error=error))
        if error.is_success():
            records.append(FeatureLevelRecord(name=feature, feature_level=update.max_version_level))
    written = () if request.validate_only else tuple(records)
    return ControllerResult(written, UpdateFeaturesResponse(results=tuple(results)))
