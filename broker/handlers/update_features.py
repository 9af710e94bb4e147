"""UpdateFeatures (v0-v1, KIP-584; v1: upgrade types and ``validate_only``, KIP-778): finalize
feature levels, forwarded to the controller.

Kafka 3.9's broker forwards the request (``KafkaApis``: ``maybeForwardToController``);
``ControllerApis.handleUpdateFeatures`` checks ALTER on the cluster and
``QuorumController.updateFeatures`` decides each feature (``FeatureControlManager``; here
``quorum/managers/features.py``, behind ``POST /v1/features``). The broker checks the client's
principal itself (the controller sees only the broker) and answers:

* a refused principal: top-level CLUSTER_AUTHORIZATION_FAILED and no results
  (``UpdateFeaturesRequest.getErrorResponse``);
* a controller that cannot answer: its error at the top level;
* otherwise one result per named feature, by name: NONE or INVALID_UPDATE_VERSION with why.

v0 has no upgrade type: its ``allow_downgrade`` reads as SAFE_DOWNGRADE, else UPGRADE
(``UpdateFeaturesRequest.upgradeType`` for version 0); a v1 code Kafka does not know reads as
UNKNOWN, which the controller refuses per feature.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler, kafka_python_handler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.api.features import (
    FeatureUpdate,
    UpdateFeaturesRequest,
    UpdateFeaturesResponse,
    UpgradeType,
)
from pykraft.metadata.auth.acl import AclOperation
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Response = response_class(ApiKey.UPDATE_FEATURES)
_Result = _Response.UpdatableFeatureResult

FIRST_UPGRADE_TYPE_VERSION = 1


def upgrade_type(version: int, update: Any) -> UpgradeType:
    if version < FIRST_UPGRADE_TYPE_VERSION:
        return UpgradeType.SAFE_DOWNGRADE if update.allow_downgrade else UpgradeType.UPGRADE
    return UpgradeType.of_code(update.upgrade_type)


def update_features_request(message: Any) -> UpdateFeaturesRequest:
    version = message.version
    return UpdateFeaturesRequest(
        updates=tuple(
            FeatureUpdate(
                feature=update.feature,
                max_version_level=update.max_version_level,
                upgrade_type=upgrade_type(version, update),
            )
            for update in message.feature_updates
        ),
        validate_only=version >= FIRST_UPGRADE_TYPE_VERSION and bool(message.validate_only),
    )


def top_level_error(version: int, error: ApiError) -> Any:
    return _Response(
        version=version,
        throttle_time_ms=0,
        error_code=error.code,
        error_message=error.message,
        results=[],
    )


def encode_update_features_response(version: int, response: UpdateFeaturesResponse) -> Any:
    return _Response(
        version=version,
        throttle_time_ms=0,
        error_code=Errors.NONE.code,
        error_message=None,
        results=[
            _Result(
                feature=result.feature,
                error_code=result.error.code,
                error_message=result.error.message,
            )
            for result in response.results
        ],
    )


async def update_features(services: BrokerServices, context: RequestContext, message: Any) -> Any:
    version = message.version
    if not services.authorizer.authorize_cluster(context, AclOperation.ALTER):
        return top_level_error(version, ApiError.of(Errors.CLUSTER_AUTHORIZATION_FAILED))
    try:
        response = await services.controller.update_features(update_features_request(message))
    except ControllerError as error:
        return top_level_error(version, ApiError.of(error.code, error.message))
    return encode_update_features_response(version, response)


def update_features_handler(services: BrokerServices) -> ApiHandler:
    async def handle(context: RequestContext, message: Any) -> Any:
        return await update_features(services, context, message)

    return kafka_python_handler(handle)
