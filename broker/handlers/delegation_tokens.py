"""CreateDelegationToken (38) v0-3, RenewDelegationToken (39) v0-2, ExpireDelegationToken (40)
v0-2 and DescribeDelegationToken (41) v0-3 (KIP-48; KIP-373's owner and requester in v3).

Create, Renew and Expire are forwarded to the active controller, which decides them
(``quorum.managers.delegation_tokens``, Kafka's ``DelegationTokenControlManager``); the checks
Kafka's ``ControllerApis.handle*DelegationToken*`` make first are made here, where the client's
principal is known:

- ``allowTokenRequests``: a connection without an authenticated principal (PLAINTEXT, or SSL
  without a client certificate: ``User:ANONYMOUS``) may not use these APIs:
  DELEGATION_TOKEN_REQUEST_NOT_ALLOWED; nor may a connection authenticated *with* a token
  (SCRAM with ``tokenauth=true``: ``broker.authorization_scram``).
- Create for another owner needs CREATE_TOKENS on that owner's USER resource, else
  DELEGATION_TOKEN_AUTHORIZATION_FAILED.

Describe is answered from this broker's metadata image, as Kafka's
``KafkaApis.handleDescribeTokensRequest`` answers it from its token cache: disabled
(no ``delegation.token.secret.key``) is DELEGATION_TOKEN_AUTH_DISABLED; an empty owner list
describes nothing; otherwise each token that matches the owner filter (an owner, requester or
renewer of it) and that the principal owns, requested or renews, or may DESCRIBE
(DELEGATION_TOKEN resource) or DESCRIBE_TOKENS of its owner (USER resource) — Kafka's
``DelegationTokenManager.filterToken``. Create and Describe answer the token's HMAC, as Kafka's do.
"""

from __future__ import annotations

from typing import Any

from pykraft.broker.controller_api import ControllerError
from pykraft.broker.handlers.forwarding import bound_handlers
from pykraft.broker.handlers.services import BrokerServices
from pykraft.broker.kafka_apis import ApiHandler
from pykraft.broker.network import RequestContext
from pykraft.metadata.api.delegation_tokens import (
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DelegationTokenExpiryResponse,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.acl import AclOperation, ResourceType
from pykraft.metadata.auth.principal import ANONYMOUS, KafkaPrincipal
from pykraft.metadata.delegation_tokens import TokenInformation, token_hmac
from pykraft.protocol.api_keys import ApiKey
from pykraft.protocol.apis import response_class
from pykraft.protocol.errors import Errors

_Create: Any = response_class(ApiKey.CREATE_DELEGATION_TOKEN)
_Renew: Any = response_class(ApiKey.RENEW_DELEGATION_TOKEN)
_Expire: Any = response_class(ApiKey.EXPIRE_DELEGATION_TOKEN)
_Describe: Any = response_class(ApiKey.DESCRIBE_DELEGATION_TOKEN)


def delegation_token_handlers(services: BrokerServices) -> dict[ApiKey, ApiHandler]:
    return bound_handlers(
        services,
        {
            ApiKey.CREATE_DELEGATION_TOKEN: create_delegation_token_handler,
            ApiKey.RENEW_DELEGATION_TOKEN: renew_delegation_token_handler,
            ApiKey.EXPIRE_DELEGATION_TOKEN: expire_delegation_token_handler,
            ApiKey.DESCRIBE_DELEGATION_TOKEN: describe_delegation_token_handler,
        },
    )


def allow_token_requests(context: RequestContext) -> bool:
    """Kafka's ``allowTokenRequests``: not over an unauthenticated connection, nor one
    authenticated with a token."""
    return context.principal != ANONYMOUS and not context.principal.token_authenticated


def _split(principal: str) -> tuple[str, str]:
    principal_type, _, name = principal.partition(":")
    return principal_type, name


async def create_delegation_token_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    requester = str(context.principal)
    owner_name = getattr(request, "owner_principal_name", None)
    owner = (
        str(KafkaPrincipal(request.owner_principal_type or "", owner_name))
        if owner_name
        else requester
    )

    def answer(response: CreateDelegationTokenResponse) -> Any:
        owner_type, owner_principal_name = _split(response.owner or owner)
        requester_type, requester_name = _split(response.requester or requester)
        return _Create(
            version=request.version,
            error_code=int(response.error.error),
            principal_type=owner_type,
            principal_name=owner_principal_name,
            token_requester_principal_type=requester_type,
            token_requester_principal_name=requester_name,
            issue_timestamp_ms=response.issue_timestamp_ms,
            expiry_timestamp_ms=response.expiry_timestamp_ms,
            max_timestamp_ms=response.max_timestamp_ms,
            token_id=response.token_id,
            hmac=response.hmac,
            throttle_time_ms=0,
        )

    def refused(error: Errors) -> Any:
        return answer(CreateDelegationTokenResponse(error=ApiError.of(error)))

    if not allow_token_requests(context):
        return refused(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
    if owner != requester and not services.authorizer.authorize(
        context, AclOperation.CREATE_TOKENS, ResourceType.USER, owner
    ):
        return refused(Errors.DELEGATION_TOKEN_AUTHORIZATION_FAILED)
    renewers = tuple(f"{r.principal_type}:{r.principal_name}" for r in request.renewers)
    forwarded = CreateDelegationTokenRequest(
        requester=requester, owner=owner, renewers=renewers, max_lifetime_ms=request.max_lifetime_ms
    )
    try:
        return answer(await services.controller.create_delegation_token(forwarded))
    except ControllerError as error:
        return answer(CreateDelegationTokenResponse(error=ApiError(error.code, error.message)))


async def _expiry(
    services: BrokerServices,
    context: RequestContext,
    forward: RenewDelegationTokenRequest | ExpireDelegationTokenRequest,
) -> DelegationTokenExpiryResponse:
    if not allow_token_requests(context):
        return DelegationTokenExpiryResponse(
            error=ApiError.of(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED)
        )
    try:
        if isinstance(forward, RenewDelegationTokenRequest):
            return await services.controller.renew_delegation_token(forward)
        return await services.controller.expire_delegation_token(forward)
    except ControllerError as error:
        return DelegationTokenExpiryResponse(error=ApiError(error.code, error.message))


async def renew_delegation_token_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    forward = RenewDelegationTokenRequest(
        principal=str(context.principal),
        hmac=bytes(request.hmac),
        renew_period_ms=request.renew_period_ms,
    )
    response = await _expiry(services, context, forward)
    return _Renew(
        version=request.version,
        error_code=int(response.error.error),
        expiry_timestamp_ms=response.expiry_timestamp_ms,
        throttle_time_ms=0,
    )


async def expire_delegation_token_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    forward = ExpireDelegationTokenRequest(
        principal=str(context.principal),
        hmac=bytes(request.hmac),
        expiry_time_period_ms=request.expiry_time_period_ms,
    )
    response = await _expiry(services, context, forward)
    return _Expire(
        version=request.version,
        error_code=int(response.error.error),
        expiry_timestamp_ms=response.expiry_timestamp_ms,
        throttle_time_ms=0,
    )


def _eligible(
    services: BrokerServices,
    context: RequestContext,
    owners: list[str] | None,
    token: TokenInformation,
) -> bool:
    """Kafka's ``DelegationTokenManager.filterToken``."""
    if owners is not None and not any(token.owner_or_renewer(owner) for owner in owners):
        return False
    authorizer = services.authorizer
    return (
        token.owner_or_renewer(str(context.principal))
        or authorizer.authorize(
            context, AclOperation.DESCRIBE, ResourceType.DELEGATION_TOKEN, token.token_id
        )
        or authorizer.authorize(
            context, AclOperation.DESCRIBE_TOKENS, ResourceType.USER, token.owner
        )
    )


async def describe_delegation_token_handler(
    services: BrokerServices, context: RequestContext, request: Any
) -> Any:
    def answer(error: Errors, tokens: list[Any]) -> Any:
        return _Describe(
            version=request.version, error_code=int(error), tokens=tokens, throttle_time_ms=0
        )

    if not allow_token_requests(context):
        return answer(Errors.DELEGATION_TOKEN_REQUEST_NOT_ALLOWED, [])
    key = services.delegation_token_secret_key
    if not key:
        return answer(Errors.DELEGATION_TOKEN_AUTH_DISABLED, [])
    owners = (
        None
        if request.owners is None
        else [f"{o.principal_type}:{o.principal_name}" for o in request.owners]
    )
    if owners == []:
        return answer(Errors.NONE, [])
    tokens = services.metadata().delegation_tokens.tokens
    described = _Describe.DescribedDelegationToken
    renewer = described.DescribedDelegationTokenRenewer
    listed = []
    for token_id in sorted(tokens):
        token = tokens[token_id]
        if not _eligible(services, context, owners, token):
            continue
        owner_type, owner_name = _split(token.owner)
        requester_type, requester_name = _split(token.requester)
        listed.append(
            described(
                principal_type=owner_type,
                principal_name=owner_name,
                token_requester_principal_type=requester_type,
                token_requester_principal_name=requester_name,
                issue_timestamp=token.issue_timestamp_ms,
                expiry_timestamp=token.expiry_timestamp_ms,
                max_timestamp=token.max_timestamp_ms,
                token_id=token.token_id,
                hmac=token_hmac(token.token_id, key),
                renewers=[
                    renewer(principal_type=t, principal_name=n)
                    for t, n in map(_split, token.renewers)
                ],
            )
        )
    return answer(Errors.NONE, listed)
