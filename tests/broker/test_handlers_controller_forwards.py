"""UnregisterBroker (v0) and UpdateFeatures (v0-v1) on the broker: ALTER on the cluster checked
first, then forwarded to the controller (ControllerApis.handleUnregisterBroker /
handleUpdateFeatures), here the real QuorumController in process. Kafka's
ControllerApisTest.testUnregisterBroker* (BROKER_ID_NOT_REGISTERED, CLUSTER_AUTHORIZATION_FAILED)
and UpdateFeaturesRequestTest (v0's allow_downgrade as SAFE_DOWNGRADE)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from kafka.protocol.admin import UpdateFeaturesRequest, UpdateFeaturesResponse

from pykraft.broker.handlers import ControllerError, broker_handlers
from pykraft.broker.kafka_apis import KafkaApis
from pykraft.metadata.api import features
from pykraft.metadata.api.brokers import UnregisterBrokerRequest
from pykraft.metadata.api.features import FeatureUpdate, UpgradeType
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.records import FeatureLevelRecord
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.errors import Errors
from pykraft.protocol.kraft_messages import UnregisterBrokerRequest as UnregisterMessage
from pykraft.protocol.kraft_messages import UnregisterBrokerResponse as UnregisterAnswer
from tests.broker.replica_harness import NOW_MS, OTHER, Cluster, InProcessController, services
from tests.broker.test_authorization import acl, authorizer, dispatch


class Controller(InProcessController):
    """The in-process controller, with the two calls these APIs forward."""

    def __init__(self, cluster: Cluster, failure: ControllerError | None = None) -> None:
        super().__init__(cluster)
        self.failure = failure

    async def unregister_broker(self, broker_id: int) -> None:
        self.calls.append(("unregister_broker", broker_id))
        if self.failure is not None:
            raise self.failure
        request = UnregisterBrokerRequest(broker_id)
        result = self.controller.unregister_broker(self.cluster.image, request, NOW_MS)
        self._commit(result.records, result.response.error)

    async def update_features(
        self, request: features.UpdateFeaturesRequest
    ) -> features.UpdateFeaturesResponse:
        self.calls.append(("update_features", request))
        if self.failure is not None:
            raise self.failure
        result = self.controller.update_features(self.cluster.image, request, NOW_MS)
        if result.records:
            self.cluster.publish(*result.records)
        return result.response


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[Cluster]:
    harness = Cluster(tmp_path)
    try:
        harness.start()
        yield harness
    finally:
        harness.close()


def apis(cluster: Cluster, controller: Controller, *bindings: Any) -> KafkaApis:
    """Every handler; with ``bindings``, an authorizer holding them (else none)."""
    overrides: dict[str, Any] = {"controller": controller}
    if bindings:
        overrides["authorizer"] = authorizer(*bindings)
    kafka_apis = KafkaApis()
    kafka_apis.register_all(broker_handlers(services(cluster, **overrides)))
    return kafka_apis


ALTER_CLUSTER = acl(AclOperation.ALTER, "kafka-cluster", ResourceType.CLUSTER)
DESCRIBE_CLUSTER = acl(AclOperation.DESCRIBE, "kafka-cluster", ResourceType.CLUSTER)


# ------------------------------------------------------------------ UnregisterBroker


def unregister(kafka_apis: KafkaApis, broker_id: int) -> Any:
    body = dispatch(
        kafka_apis, ApiKey.UNREGISTER_BROKER, 0, UnregisterMessage(version=0, broker_id=broker_id)
    )
    return UnregisterAnswer.decode(body, version=0)


def test_unregister_a_registered_broker(cluster: Cluster) -> None:
    controller = Controller(cluster)
    answer = unregister(apis(cluster, controller), OTHER)
    assert (answer.error_code, answer.error_message) == (Errors.NONE, None)
    assert OTHER not in cluster.image.cluster.brokers
    assert controller.calls == [("unregister_broker", OTHER)]


def test_unregister_an_unknown_broker_is_broker_id_not_registered(cluster: Cluster) -> None:
    answer = unregister(apis(cluster, Controller(cluster)), 99)
    # Kafka's handleUnregisterBroker answers the code only.
    assert (answer.error_code, answer.error_message) == (Errors.BROKER_ID_NOT_REGISTERED, None)


def test_unregister_a_controller_failure_is_the_error(cluster: Cluster) -> None:
    failing = Controller(cluster, ControllerError("NOT_CONTROLLER", "No controller is active"))
    answer = unregister(apis(cluster, failing), OTHER)
    assert (answer.error_code, answer.error_message) == (Errors.NOT_CONTROLLER, None)


def test_unregister_needs_alter_on_the_cluster(cluster: Cluster) -> None:
    controller = Controller(cluster)
    answer = unregister(apis(cluster, controller, DESCRIBE_CLUSTER), OTHER)
    assert answer.error_code == Errors.CLUSTER_AUTHORIZATION_FAILED
    assert controller.calls == [] and OTHER in cluster.image.cluster.brokers
    answer = unregister(apis(cluster, controller, ALTER_CLUSTER), OTHER)
    assert answer.error_code == Errors.NONE


# ------------------------------------------------------------------ UpdateFeatures

_Key = UpdateFeaturesRequest.FeatureUpdateKey
SAFE = UpgradeType.SAFE_DOWNGRADE


def update(
    kafka_apis: KafkaApis, version: int, keys: list[Any], validate_only: bool = False
) -> Any:
    request = UpdateFeaturesRequest(
        version=version, timeout_ms=60000, feature_updates=keys, validate_only=validate_only
    )
    body = dispatch(kafka_apis, ApiKey.UPDATE_FEATURES, version, request)
    return UpdateFeaturesResponse.decode(body, version=version)


def results(answer: Any) -> list[tuple[str, int, str | None]]:
    return [(r.feature, r.error_code, r.error_message) for r in answer.results]


@pytest.mark.parametrize(
    ("version", "key", "expected"),
    [
        (0, _Key(feature="f", max_version_level=2, allow_downgrade=False), UpgradeType.UPGRADE),
        (
            0,
            _Key(feature="f", max_version_level=1, allow_downgrade=True),
            UpgradeType.SAFE_DOWNGRADE,
        ),
        (1, _Key(feature="f", max_version_level=2, upgrade_type=1), UpgradeType.UPGRADE),
        (1, _Key(feature="f", max_version_level=1, upgrade_type=2), SAFE),
        (1, _Key(feature="f", max_version_level=0, upgrade_type=3), UpgradeType.UNSAFE_DOWNGRADE),
        (1, _Key(feature="f", max_version_level=0, upgrade_type=7), UpgradeType.UNKNOWN),
    ],
)
def test_the_upgrade_type_forwarded(
    cluster: Cluster, version: int, key: Any, expected: UpgradeType
) -> None:
    controller = Controller(cluster)
    update(apis(cluster, controller), version, [key])
    [(name, request)] = controller.calls
    assert name == "update_features"
    assert request == features.UpdateFeaturesRequest(
        (FeatureUpdate("f", key.max_version_level, expected),), validate_only=False
    )


@pytest.mark.parametrize("version", [0, 1])
def test_pykrafts_features_are_refused_above_level_0(cluster: Cluster, version: int) -> None:
    answer = update(
        apis(cluster, Controller(cluster)),
        version,
        [
            _Key(feature="metadata.version", max_version_level=21, upgrade_type=1),
            _Key(feature="group.version", max_version_level=0, upgrade_type=1),
        ],
    )
    assert (answer.error_code, answer.error_message) == (Errors.NONE, None)
    assert results(answer) == [
        ("group.version", Errors.NONE, None),
        (
            "metadata.version",
            Errors.INVALID_UPDATE_VERSION,
            "Invalid update version 21 for feature metadata.version. "
            "Local controller does not support this feature.",
        ),
    ]


def test_validate_only_writes_nothing(cluster: Cluster) -> None:
    cluster.publish(FeatureLevelRecord(name="group.version", feature_level=1))
    key = _Key(feature="group.version", max_version_level=0, upgrade_type=2)
    kafka_apis = apis(cluster, Controller(cluster))
    answer = update(kafka_apis, 1, [key], validate_only=True)
    assert results(answer) == [("group.version", Errors.NONE, None)]
    assert dict(cluster.image.features) == {"group.version": 1}
    update(kafka_apis, 1, [key])
    assert dict(cluster.image.features) == {}


def test_update_features_a_controller_failure_is_the_top_level_error(cluster: Cluster) -> None:
    failing = Controller(cluster, ControllerError("REQUEST_TIMED_OUT", "No answer in 30 s"))
    key = _Key(feature="f", max_version_level=0, upgrade_type=1)
    answer = update(apis(cluster, failing), 1, [key])
    assert (answer.error_code, answer.error_message, answer.results) == (
        Errors.REQUEST_TIMED_OUT,
        "No answer in 30 s",
        [],
    )


def test_update_features_needs_alter_on_the_cluster(cluster: Cluster) -> None:
    controller = Controller(cluster)
    key = _Key(feature="f", max_version_level=0, upgrade_type=1)
    answer = update(apis(cluster, controller, DESCRIBE_CLUSTER), 1, [key])
    assert (answer.error_code, answer.results) == (Errors.CLUSTER_AUTHORIZATION_FAILED, [])
    assert controller.calls == []
    answer = update(apis(cluster, controller, ALTER_CLUSTER), 1, [key])
    assert (answer.error_code, results(answer)) == (Errors.NONE, [("f", Errors.NONE, None)])
