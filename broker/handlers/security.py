"""The ACL and SCRAM Kafka APIs, forwarded to the controller (Kafka's ``AclApis`` and
``KafkaApis.handle*UserScramCredentials*``, KIP-554).

CreateAcls, DescribeAcls and DeleteAcls (v1-v3) need ALTER (create, delete) or DESCRIBE on the
cluster; a refusal is CLUSTER_AUTHORIZATION_FAILED on every entry. Without an authorizer they
answer SECURITY_DISABLED ("No Authorizer is configured."), as ``AclApis`` does. The
controller validates each ACL and filter (``AclControlManager``'s INVALID_REQUEST messages) and
answers per entry; a code the wire carries that Kafka does not define reaches it as UNKNOWN and
is refused there, so nothing is half-created.

DescribeUserScramCredentials and AlterUserScramCredentials (v0) need DESCRIBE / ALTER on the
cluster (CLUSTER_AUTHORIZATION_FAILED: the whole answer, or every user); they are served with
or without an authorizer, as in Kafka. The salted password travels only to the controller,
which keeps the derived ``(stored_key, server_key)`` — nothing here logs it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import attrs

from pykraft.broker.handlers.forwarding import bound_handlers, forward_to_controller
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api import security
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.acl import (
    AclBinding,
    AclBindingFilter,
    AclOperation,
    AclPermissionType,
    PatternType,
    ResourceType,
)
from pykraft.metadata.auth.scram import ScramMechanism
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

E = TypeVar("E", ResourceType, PatternType, AclOperation, AclPermissionType, ScramMechanism)
T = TypeVar("T")

SECURITY_DISABLED_MESSAGE = "No Authorizer is configured."

_CreateAcls: Any = response_class(ApiKey.CREATE_ACLS)
_DescribeAcls: Any = response_class(ApiKey.DESCRIBE_ACLS)
_DeleteAcls: Any = response_class(ApiKey.DELETE_ACLS)
_AlterScram: Any = response_class(ApiKey.ALTER_USER_SCRAM_CREDENTIALS)
_DescribeScram: Any = response_class(ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS)


def security_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    return bound_handlers(
        services,
        {
            ApiKey.CREATE_ACLS: create_acls,
            ApiKey.DESCRIBE_ACLS: describe_acls,
            ApiKey.DELETE_ACLS: delete_acls,
            ApiKey.ALTER_USER_SCRAM_CREDENTIALS: alter_scram,
            ApiKey.DESCRIBE_USER_SCRAM_CREDENTIALS: describe_scram,
        },
    )


def _code(cls: type[E], value: int) -> E:
    """A wire code as Kafka's enum; a code Kafka does not define is UNKNOWN (refused later)."""
    try:
        return cls(value)
    except ValueError:
        return cls(0)


@attrs.frozen
class Refusal:
    """Why a request was not forwarded, or the controller's error."""

    error: ApiError


async def _forward(
    services: BrokerServices,
    context: RequestContext,
    operation: AclOperation,
    call: Callable[[], Awaitable[T]],
    *,
    acl_api: bool,
) -> T | Refusal:
    """``operation`` on the cluster, then the controller's answer; or why not: SECURITY_DISABLED
    (an ACL API without an authorizer), CLUSTER_AUTHORIZATION_FAILED, or the controller's
    error."""
    if acl_api and not services.authorizer.enabled:
        return Refusal(ApiError(Errors.SECURITY_DISABLED, SECURITY_DISABLED_MESSAGE))
    answer = await forward_to_controller(services, context, operation, call)
    return Refusal(answer) if isinstance(answer, ApiError) else answer


# ------------------------------------------------------------------ ACLs


def acl_from_wire(creation: Any) -> AclBinding:
    return AclBinding(
        resource_type=_code(ResourceType, creation.resource_type),
        resource_name=creation.resource_name,
        pattern_type=_code(PatternType, creation.resource_pattern_type),
        principal=creation.principal,
        host=creation.host,
        operation=_code(AclOperation, creation.operation),
        permission_type=_code(AclPermissionType, creation.permission_type),
    )


def filter_from_wire(wire: Any) -> AclBindingFilter:
    return AclBindingFilter(
        resource_type=_code(ResourceType, wire.resource_type_filter),
        resource_name=wire.resource_name_filter,
        pattern_type=_code(PatternType, wire.pattern_type_filter),
        principal=wire.principal_filter,
        host=wire.host_filter,
        operation=_code(AclOperation, wire.operation),
        permission_type=_code(AclPermissionType, wire.permission_type),
    )


async def create_acls(services: BrokerServices, context: RequestContext, request: Any) -> Any:
    result = _CreateAcls.AclCreationResult
    creations = [acl_from_wire(c) for c in request.creations]
    answer = await _forward(
        services,
        context,
        AclOperation.ALTER,
        lambda: services.controller.create_acls(creations),
        acl_api=True,
    )
    if isinstance(answer, Refusal):
        errors = [answer.error for _ in creations]
    else:
        errors = list(answer.results)
    results = [result(error_code=int(e.error), error_message=e.message) for e in errors]
    return _CreateAcls(version=request.version, throttle_time_ms=0, results=results)


def _described(acls: tuple[AclBinding, ...]) -> list[Any]:
    """DescribeAcls groups the ACLs by resource pattern (``AclApis.handleDescribeAcls``)."""
    resource = _DescribeAcls.DescribeAclsResource
    by_pattern: dict[tuple[ResourceType, str, PatternType], list[AclBinding]] = {}
    for acl in acls:
        key = (acl.resource_type, acl.resource_name, acl.pattern_type)
        by_pattern.setdefault(key, []).append(acl)
    return [
        resource(
            resource_type=int(kind),
            resource_name=name,
            pattern_type=int(pattern),
            acls=[
                resource.AclDescription(
                    principal=acl.principal,
                    host=acl.host,
                    operation=int(acl.operation),
                    permission_type=int(acl.permission_type),
                )
                for acl in grouped
            ],
        )
        for (kind, name, pattern), grouped in by_pattern.items()
    ]


async def describe_acls(services: BrokerServices, context: RequestContext, request: Any) -> Any:
    acl_filter = filter_from_wire(request)
    answer = await _forward(
        services,
        context,
        AclOperation.DESCRIBE,
        lambda: services.controller.describe_acls(acl_filter),
        acl_api=True,
    )
    refused = answer.error if isinstance(answer, Refusal) else ApiError(Errors.NONE)
    return _DescribeAcls(
        version=request.version,
        throttle_time_ms=0,
        error_code=int(refused.error),
        error_message=refused.message,
        resources=[] if isinstance(answer, Refusal) else _described(answer),
    )


def _matching(acl: AclBinding) -> Any:
    return _DeleteAcls.DeleteAclsFilterResult.DeleteAclsMatchingAcl(
        error_code=0,
        error_message=None,
        resource_type=int(acl.resource_type),
        resource_name=acl.resource_name,
        pattern_type=int(acl.pattern_type),
        principal=acl.principal,
        host=acl.host,
        operation=int(acl.operation),
        permission_type=int(acl.permission_type),
    )


async def delete_acls(services: BrokerServices, context: RequestContext, request: Any) -> Any:
    result = _DeleteAcls.DeleteAclsFilterResult
    filters = [filter_from_wire(f) for f in request.filters]
    answer = await _forward(
        services,
        context,
        AclOperation.ALTER,
        lambda: services.controller.delete_acls(filters),
        acl_api=True,
    )
    if isinstance(answer, Refusal):
        outcomes = [security.DeleteAclsFilterResult(answer.error) for _ in filters]
    else:
        outcomes = list(answer.results)
    results = [
        result(
            error_code=int(r.error.error),
            error_message=r.error.message,
            matching_acls=[_matching(acl) for acl in r.matching_acls],
        )
        for r in outcomes
    ]
    return _DeleteAcls(version=request.version, throttle_time_ms=0, filter_results=results)


# ------------------------------------------------------------------ SCRAM (KIP-554)


def scram_request_from_wire(request: Any) -> security.AlterUserScramCredentialsRequest:
    return security.AlterUserScramCredentialsRequest(
        deletions=tuple(
            security.ScramCredentialDeletion(d.name, _code(ScramMechanism, d.mechanism))
            for d in request.deletions
        ),
        upsertions=tuple(
            security.ScramCredentialUpsertion(
                name=u.name,
                mechanism=_code(ScramMechanism, u.mechanism),
                iterations=u.iterations,
                salt=bytes(u.salt),
                salted_password=bytes(u.salted_password),
            )
            for u in request.upsertions
        ),
    )


async def alter_scram(services: BrokerServices, context: RequestContext, request: Any) -> Any:
    """ALTER on the cluster, else CLUSTER_AUTHORIZATION_FAILED for every user named."""
    result = _AlterScram.AlterUserScramCredentialsResult
    alteration = scram_request_from_wire(request)
    answer = await _forward(
        services,
        context,
        AclOperation.ALTER,
        lambda: services.controller.alter_user_scram_credentials(alteration),
        acl_api=False,
    )
    if isinstance(answer, Refusal):
        named = [*(d.name for d in alteration.deletions), *(u.name for u in alteration.upsertions)]
        outcomes = [
            security.AlterUserScramCredentialsResult(user, answer.error)
            for user in dict.fromkeys(named)
        ]
    else:
        outcomes = list(answer.results)
    results = [
        result(user=r.user, error_code=int(r.error.error), error_message=r.error.message)
        for r in outcomes
    ]
    return _AlterScram(version=request.version, throttle_time_ms=0, results=results)


async def describe_scram(services: BrokerServices, context: RequestContext, request: Any) -> Any:
    """DESCRIBE on the cluster, else CLUSTER_AUTHORIZATION_FAILED for the whole answer."""
    result = _DescribeScram.DescribeUserScramCredentialsResult
    users = None if not request.users else [u.name for u in request.users]
    answer = await _forward(
        services,
        context,
        AclOperation.DESCRIBE,
        lambda: services.controller.describe_user_scram_credentials(users),
        acl_api=False,
    )
    if isinstance(answer, Refusal):
        answer = security.DescribeUserScramCredentialsResponse(answer.error)
    return _DescribeScram(
        version=request.version,
        throttle_time_ms=0,
        error_code=int(answer.error.error),
        error_message=answer.error.message,
        results=[
            result(
                user=r.user,
                error_code=int(r.error.error),
                error_message=r.error.message,
                credential_infos=[
                    result.CredentialInfo(mechanism=int(i.mechanism), iterations=i.iterations)
                    for i in r.credential_infos
                ],
            )
            for r in answer.results
        ],
    )
