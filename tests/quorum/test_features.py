"""UpdateFeatures in the controller (``quorum/managers/features.py``), after Kafka's
FeatureControlManagerTest: testUpdateFeatures, testUpdateFeaturesErrorCases (downgrade without a
downgrade type, a "downgrade" to a newer level, a level a broker does not support, below 0),
validate_only, and the level-0 removal."""

from __future__ import annotations

from collections.abc import Mapping

import pytest

from pykraft.metadata.api.errors import SUCCESS
from pykraft.metadata.api.features import FeatureUpdate, UpdateFeaturesRequest, UpgradeType
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import BrokerFeature, FeatureLevelRecord, RegisterBrokerRecord
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.elr import ELR_FEATURE
from pykraft.quorum.managers.features import (
    CONTROLLER_SUPPORTED_FEATURES,
    VersionRange,
    reason_not_supported,
    update_features,
)
from tests.quorum.helpers import Harness, apply, incarnation

UP, SAFE, UNSAFE = UpgradeType.UPGRADE, UpgradeType.SAFE_DOWNGRADE, UpgradeType.UNSAFE_DOWNGRADE
# What a controller that knew "foo" and metadata.version would support.
SUPPORTING = {"foo": VersionRange(0, 5), "metadata.version": VersionRange(1, 21)}


def image_of(
    brokers: Mapping[int, Mapping[str, tuple[int, int]]], finalized: Mapping[str, int]
) -> MetadataImage:
    """Brokers registered with their supported ranges, then the finalized levels."""
    return apply(
        MetadataImage.EMPTY,
        [
            RegisterBrokerRecord(
                broker_id=broker_id,
                incarnation_id=incarnation(broker_id),
                broker_epoch=broker_id,
                features=tuple(
                    BrokerFeature(name=name, min_supported_version=low, max_supported_version=high)
                    for name, (low, high) in ranges.items()
                ),
            )
            for broker_id, ranges in brokers.items()
        ]
        + [FeatureLevelRecord(name=name, feature_level=level) for name, level in finalized.items()],
    )


FOO_0_3 = {1: {"foo": (0, 3)}, 2: {"foo": (0, 4)}}


def check(
    image: MetadataImage,
    update: FeatureUpdate,
    expected: str | None,
    supported: Mapping[str, VersionRange] = SUPPORTING,
) -> None:
    """``expected``: None for success, else the INVALID_UPDATE_VERSION message's reason."""
    result = update_features(image, UpdateFeaturesRequest((update,)), supported)
    [answer] = result.response.results
    assert answer.feature == update.feature
    if expected is None:
        assert answer.error == SUCCESS
        assert result.records == (
            FeatureLevelRecord(name=update.feature, feature_level=update.max_version_level),
        )
    else:
        assert answer.error.error == Errors.INVALID_UPDATE_VERSION
        assert answer.error.message is not None and answer.error.message.endswith(expected)
        assert result.records == ()


FOO_AT_2 = image_of(FOO_0_3, {"foo": 2})


@pytest.mark.parametrize(
    ("update", "expected"),
    [
        (FeatureUpdate("foo", 3, UP), None),
        (FeatureUpdate("foo", 2, UP), None),  # the same level again: written, harmless
        (FeatureUpdate("foo", 1, SAFE), None),
        (FeatureUpdate("foo", 0, UNSAFE), None),  # level 0 removes the feature
        (
            FeatureUpdate("foo", 1, UP),
            "Can't downgrade the version of this feature without setting the upgrade type to "
            "either safe or unsafe downgrade.",
        ),
        (FeatureUpdate("foo", 3, SAFE), "Can't downgrade to a newer version."),
        (FeatureUpdate("foo", 3, UNSAFE), "Can't downgrade to a newer version."),
        (FeatureUpdate("foo", -1, SAFE), "A feature version cannot be less than 0."),
        # Broker 1 supports 0-3, broker 2 0-4: the first broker that cannot is named.
        (FeatureUpdate("foo", 4, UP), "broker 1 only supports versions 0-3"),
        (FeatureUpdate("foo", 6, UP), "Local controller only supports versions 0-5"),
        # A feature neither node lists: only level 0 (QuorumFeatures.DISABLED).
        (FeatureUpdate("bar", 1, UP), "Local controller does not support this feature."),
        (FeatureUpdate("bar", 0, UP), None),
        (
            FeatureUpdate("foo", 3, UpgradeType.UNKNOWN),
            "The controller does not support the given upgrade type.",
        ),
    ],
)
def test_one_feature(update: FeatureUpdate, expected: str | None) -> None:
    check(FOO_AT_2, update, expected)


def test_a_feature_the_brokers_do_not_list_is_refused_by_the_first_broker() -> None:
    check(
        image_of({3: {}, 1: {"foo": (0, 3)}}, {}),
        FeatureUpdate("foo", 1, UP),
        "broker 3 does not support this feature.",
    )


def test_the_message_names_the_feature_and_level() -> None:
    result = update_features(
        FOO_AT_2, UpdateFeaturesRequest((FeatureUpdate("foo", 9),)), SUPPORTING
    )
    assert result.response.results[0].error.message == (
        "Invalid update version 9 for feature foo. Local controller only supports versions 0-5"
    )


def test_metadata_version_cannot_be_removed() -> None:
    image = image_of({1: {"metadata.version": (1, 21)}}, {"metadata.version": 20})
    check(image, FeatureUpdate("metadata.version", 21, UP), None)
    # Level 0 is not even supported by the controller (its range starts at 1).
    check(
        image,
        FeatureUpdate("metadata.version", 0, UNSAFE),
        "Local controller only supports versions 1-21",
    )
    # Were 0 supported everywhere, there is still no metadata version 0.
    lenient = image_of({1: {"metadata.version": (0, 21)}}, {"metadata.version": 20})
    result = update_features(
        lenient,
        UpdateFeaturesRequest((FeatureUpdate("metadata.version", 0, UNSAFE),)),
        {"metadata.version": VersionRange(0, 21)},
    )
    assert result.response.results[0].error.message == (
        "Invalid metadata.version 0. Unknown metadata.version."
    )


def test_accepted_features_are_one_batch_refused_ones_write_nothing_results_by_name() -> None:
    request = UpdateFeaturesRequest(
        (
            FeatureUpdate("zeta", 0, UP),
            FeatureUpdate("foo", 1, UP),  # refused: a downgrade without the type
            FeatureUpdate("foo", 3, UP),  # the last entry for a name wins, as Kafka's map
            FeatureUpdate("bar", 2, UP),  # refused: unsupported
        )
    )
    result = update_features(FOO_AT_2, request, SUPPORTING)
    assert [(r.feature, r.error.error) for r in result.response.results] == [
        ("bar", Errors.INVALID_UPDATE_VERSION),
        ("foo", Errors.NONE),
        ("zeta", Errors.NONE),
    ]
    assert result.records == (
        FeatureLevelRecord(name="foo", feature_level=3),
        FeatureLevelRecord(name="zeta", feature_level=0),
    )
    assert dict(apply(FOO_AT_2, result.records).features) == {"foo": 3}


def test_validate_only_answers_the_same_and_writes_nothing() -> None:
    updates = (FeatureUpdate("foo", 3, UP), FeatureUpdate("bar", 2, UP))
    written = update_features(FOO_AT_2, UpdateFeaturesRequest(updates), SUPPORTING)
    validated = update_features(FOO_AT_2, UpdateFeaturesRequest(updates, True), SUPPORTING)
    assert validated.response == written.response
    assert written.records and validated.records == ()


def test_pykraft_versions_only_elr_so_other_features_pass_at_level_0_only() -> None:
    # The real controller, through QuorumController.handle, with its own ranges: KIP-966's
    # eligible.leader.replicas.version 0-1 and nothing else.
    assert {ELR_FEATURE: VersionRange(0, 1)} == CONTROLLER_SUPPORTED_FEATURES
    harness = Harness(image_of({1: {"metadata.version": (1, 21)}}, {"group.version": 1}))
    response = harness.run(
        UpdateFeaturesRequest(
            (FeatureUpdate("metadata.version", 21), FeatureUpdate("group.version", 0, SAFE))
        )
    )
    assert [(r.feature, r.error.error) for r in response.results] == [
        ("group.version", Errors.NONE),
        ("metadata.version", Errors.INVALID_UPDATE_VERSION),
    ]
    assert dict(harness.image.features) == {}


@pytest.mark.parametrize(
    ("level", "supported", "expected"),
    [
        (0, VersionRange(0, 0), None),
        (1, VersionRange(0, 0), "x does not support this feature."),
        (3, VersionRange(1, 3), None),
        (4, VersionRange(1, 3), "x only supports versions 1-3"),
        (0, VersionRange(1, 3), "x only supports versions 1-3"),
        (2, VersionRange(2, 2), None),
        (3, VersionRange(2, 2), "x only supports versions 2"),
    ],
)
def test_reason_not_supported(level: int, supported: VersionRange, expected: str | None) -> None:
    assert reason_not_supported(level, "x", supported) == expected
