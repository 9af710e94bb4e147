"""Delegation token requests of the controller (KIP-48, KIP-373): types.

The requests are the pure controller's inputs for Kafka's CreateDelegationToken,
RenewDelegationToken and ExpireDelegationToken, which a broker forwards to the controller as
Kafka's ``KafkaApis.handle*DelegationTokenRequest`` do. Principals are strings in Kafka's
``KafkaPrincipal.toString`` form (``User:alice``); ``requester`` / ``principal`` is the
authenticated principal of the connection the broker received the request on.
DescribeDelegationToken reads the committed image and needs no controller request.

POST /v1/delegation-tokens {"requester", "owner"?, "renewers": [..], "max_lifetime_ms"}
    -> {error, message, owner, requester, issue_timestamp_ms, expiry_timestamp_ms,
        max_timestamp_ms, token_id, hmac (base64)}
POST /v1/delegation-tokens/renew {"principal", "hmac", "renew_period_ms"}
    -> {error, message, expiry_timestamp_ms}
POST /v1/delegation-tokens/expire {"principal", "hmac", "expiry_time_period_ms"}
    -> {error, message, expiry_timestamp_ms}

Only brokers call these routes (CLUSTER_ACTION): the body names the principal the broker
authenticated, which the controller believes, as Kafka's controller believes a forwarded
request's envelope.
"""

from __future__ import annotations

import base64
import binascii

import attrs

from pykraft.metadata.api.errors import (
    SUCCESS,
    ApiError,
    error_field_from_json,
    error_field_to_json,
)
from pykraft.metadata.api.json_fields import Fields, JsonBodyError, JsonObject

# Bound (STYLE.md §7): Kafka has none; a token with more renewers is refused.
MAX_RENEWERS = 1000


@attrs.frozen(kw_only=True)
class CreateDelegationTokenRequest:
    requester: str
    # None or "" (Kafka's null/empty owner name): the requester owns the token (KIP-373).
    owner: str | None = None
    renewers: tuple[str, ...] = ()
    # <= 0: delegation.token.max.lifetime.ms; else the smaller of the two.
    max_lifetime_ms: int = -1


@attrs.frozen(kw_only=True)
class CreateDelegationTokenResponse:
    error: ApiError = SUCCESS
    owner: str = ""
    requester: str = ""
    # -1 is what the broker answers when it refuses by itself (Kafka's short
    # ``CreateDelegationTokenResponse.prepareResponse``); the controller's refusals carry 0.
    issue_timestamp_ms: int = -1
    expiry_timestamp_ms: int = -1
    max_timestamp_ms: int = -1
    token_id: str = ""
    hmac: bytes = attrs.field(default=b"", repr=False)


@attrs.frozen(kw_only=True)
class RenewDelegationTokenRequest:
    principal: str
    hmac: bytes = attrs.field(repr=False)
    # <= 0: delegation.token.expiry.time.ms; else the smaller of the two.
    renew_period_ms: int


@attrs.frozen(kw_only=True)
class ExpireDelegationTokenRequest:
    principal: str
    hmac: bytes = attrs.field(repr=False)
    # < 0: remove the token now; else its expiry becomes now + period (capped at max).
    expiry_time_period_ms: int


@attrs.frozen(kw_only=True)
class DelegationTokenExpiryResponse:
    """The response to a renewal or an expiry: Kafka's two responses have the same fields."""

    error: ApiError = SUCCESS
    expiry_timestamp_ms: int = -1


def _b64(value: bytes) -> str:
    return base64.b64encode(value).decode("ascii")


def _hmac_from_json(fields: Fields) -> bytes:
    try:
        return base64.b64decode(fields.string("hmac"), validate=True)
    except (binascii.Error, ValueError):
        raise JsonBodyError("The field 'hmac' must be standard base64.") from None


def create_request_to_json(request: CreateDelegationTokenRequest) -> JsonObject:
    return {
        "requester": request.requester,
        "owner": request.owner,
        "renewers": list(request.renewers),
        "max_lifetime_ms": request.max_lifetime_ms,
    }


def create_request_from_json(fields: Fields) -> CreateDelegationTokenRequest:
    renewers = fields.strings("renewers", ())
    if len(renewers) > MAX_RENEWERS:
        raise JsonBodyError(f"At most {MAX_RENEWERS} renewers per token; got {len(renewers)}.")
    return CreateDelegationTokenRequest(
        requester=fields.string("requester"),
        owner=fields.optional_string("owner"),
        renewers=renewers,
        max_lifetime_ms=fields.integer("max_lifetime_ms", -1),
    )


def create_response_to_json(response: CreateDelegationTokenResponse) -> JsonObject:
    return {
        **error_field_to_json(response.error),
        "owner": response.owner,
        "requester": response.requester,
        "issue_timestamp_ms": response.issue_timestamp_ms,
        "expiry_timestamp_ms": response.expiry_timestamp_ms,
        "max_timestamp_ms": response.max_timestamp_ms,
        "token_id": response.token_id,
        "hmac": _b64(response.hmac),
    }


def create_response_from_json(fields: Fields) -> CreateDelegationTokenResponse:
    return CreateDelegationTokenResponse(
        error=error_field_from_json(fields),
        owner=fields.string("owner"),
        requester=fields.string("requester"),
        issue_timestamp_ms=fields.integer("issue_timestamp_ms"),
        expiry_timestamp_ms=fields.integer("expiry_timestamp_ms"),
        max_timestamp_ms=fields.integer("max_timestamp_ms"),
        token_id=fields.string("token_id"),
        hmac=_hmac_from_json(fields),
    )


def renew_request_to_json(request: RenewDelegationTokenRequest) -> JsonObject:
    return {
        "principal": request.principal,
        "hmac": _b64(request.hmac),
        "renew_period_ms": request.renew_period_ms,
    }


def renew_request_from_json(fields: Fields) -> RenewDelegationTokenRequest:
    return RenewDelegationTokenRequest(
        principal=fields.string("principal"),
        hmac=_hmac_from_json(fields),
        renew_period_ms=fields.integer("renew_period_ms"),
    )


def expire_request_to_json(request: ExpireDelegationTokenRequest) -> JsonObject:
    return {
        "principal": request.principal,
        "hmac": _b64(request.hmac),
        "expiry_time_period_ms": request.expiry_time_period_ms,
    }


def expire_request_from_json(fields: Fields) -> ExpireDelegationTokenRequest:
    return ExpireDelegationTokenRequest(
        principal=fields.string("principal"),
        hmac=_hmac_from_json(fields),
        expiry_time_period_ms=fields.integer("expiry_time_period_ms"),
    )


def expiry_response_to_json(response: DelegationTokenExpiryResponse) -> JsonObject:
    return {
        **error_field_to_json(response.error),
        "expiry_timestamp_ms": response.expiry_timestamp_ms,
    }


def expiry_response_from_json(fields: Fields) -> DelegationTokenExpiryResponse:
    return DelegationTokenExpiryResponse(
        error=error_field_from_json(fields),
        expiry_timestamp_ms=fields.integer("expiry_timestamp_ms"),
    )
