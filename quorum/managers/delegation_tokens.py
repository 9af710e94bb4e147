"""Delegation tokens in the metadata log (Kafka's ``DelegationTokenControlManager``, KIP-48).

Create, renew and expire each answer one request against the committed image and write at most
one record; the checks, their order and the error codes are Kafka's:

- create: no ``delegation.token.secret.key`` -> DELEGATION_TOKEN_AUTH_DISABLED; a renewer whose
  principal type is not ``User`` -> INVALID_PRINCIPAL_TYPE. The owner is the request's owner, or
  the requester when none is named (KIP-373). ``max_timestamp = now + min(max lifetime,
  requested)``; ``expiry = min(max_timestamp, now + delegation.token.expiry.time.ms)``. The
  token id is a fresh Kafka uuid string (``Uuid.randomUuid().toString()``), the HMAC
  HMAC-SHA512 of the id keyed by the secret (``metadata.delegation_tokens.token_hmac``).
- renew: disabled -> DELEGATION_TOKEN_AUTH_DISABLED; no token with that HMAC ->
  DELEGATION_TOKEN_NOT_FOUND; past its expiry or max timestamp -> DELEGATION_TOKEN_EXPIRED;
  a principal neither owner nor renewer -> DELEGATION_TOKEN_OWNER_MISMATCH (Kafka's
  ``allowedToRenew``: the requester alone may not). A renewal sets expiry to
  ``min(max, now + min(expiry time, period))`` (period <= 0: the configured time).
- expire (Kafka 3.9's ``expireDelegationToken``, as KAFKA-17315 made it): disabled, not found,
  then owner mismatch; a negative period removes the token (``RemoveDelegationTokenRecord``)
  and answers ``now`` as its expiry timestamp, even when the token had already expired (3.6-3.8
  answered the period itself and refused an expired token first); otherwise a token past its
  expiry or max timestamp is DELEGATION_TOKEN_EXPIRED, and a live one gets expiry
  ``min(max, now + period)`` (period 0: now, so it stays until the sweep).
- ``sweep_expired_tokens``: the controller's timer removes every token past its expiry or max
  timestamp (Kafka's ``sweepExpiredDelegationTokens``, every
  ``delegation.token.expiry.check.interval.ms``).

Pure: the image, the settings, ``now_ms`` and a random source in; records and a response out.
"""

from __future__ import annotations

import hmac as hmac_module
from typing import Any, TypeAlias

import attrs

from pykraft.metadata.api.delegation_tokens import (
    MAX_RENEWERS,
    CreateDelegationTokenRequest,
    CreateDelegationTokenResponse,
    DelegationTokenExpiryResponse,
    ExpireDelegationTokenRequest,
    RenewDelegationTokenRequest,
)
from pykraft.metadata.api.errors import ApiError
from pykraft.metadata.auth.principal import USER_TYPE, KafkaPrincipal, PrincipalError
from pykraft.metadata.delegation_tokens import TokenInformation, token_hmac
from pykraft.metadata.image import MetadataImage
from pykraft.metadata.records import RemoveDelegationTokenRecord, uuid_to_kafka_string
from pykraft.protocol.errors import Errors
from pykraft.quorum.managers.result import ControllerResult
from pykraft.quorum.managers.settings import ControllerSettings
from pykraft.quorum.placement import RandomSource

DelegationTokenRequest: TypeAlias = (
    CreateDelegationTokenRequest | RenewDelegationTokenRequest | ExpireDelegationTokenRequest
)

# Bound (STYLE.md §7): tokens one sweep removes in one batch; the next sweep takes the rest.
MAX_TOKENS_PER_SWEEP = 1000


def secret_key(settings: ControllerSettings) -> str | None:
    """The secret, or None when tokens are disabled (Kafka's ``tokenAuthEnabled``: a set,
    non-empty ``delegation.token.secret.key``)."""
    return settings.delegation_token_secret_key or None


def is_expired(token: TokenInformation, now_ms: int) -> bool:
    return token.max_timestamp_ms < now_ms or token.expiry_timestamp_ms < now_ms


def token_for_hmac(image: MetadataImage, hmac: bytes, key: str) -> TokenInformation | None:
    """The token whose HMAC is ``hmac`` (Kafka's ``DelegationTokenCache.tokenForHmac``)."""
    for token in image.delegation_tokens.tokens.values():
        if hmac_module.compare_digest(token_hmac(token.token_id, key), hmac):
            return token
    return None


def _new_token_id(image: MetadataImage, rng: RandomSource) -> str:
    while True:
        token_id = uuid_to_kafka_string(rng.randrange(1 << 128).to_bytes(16, "big"))
        if token_id not in image.delegation_tokens.tokens:
            return token_id


def _renewer_error(renewers: tuple[str, ...]) -> ApiError | None:
    if len(renewers) > MAX_RENEWERS:
        return ApiError.of(Errors.INVALID_REQUEST, f"more than {MAX_RENEWERS} renewers")
    for renewer in renewers:
        try:
            principal = KafkaPrincipal.parse(renewer)
        except PrincipalError as exc:
            return ApiError.of(Errors.INVALID_PRINCIPAL_TYPE, str(exc))
        if principal.principal_type != USER_TYPE:
            return ApiError.of(
                Errors.INVALID_PRINCIPAL_TYPE, f"Renewer {renewer} is not of type User"
            )
    return None


def create_delegation_token(
    image: MetadataImage,
    request: CreateDelegationTokenRequest,
    settings: ControllerSettings,
    rng: RandomSource,
    now_ms: int,
) -> ControllerResult[CreateDelegationTokenResponse]:
    owner = request.owner or request.requester
    # A refusal sets only the error code: the timestamps keep the schema's default, 0 (Kafka's
    # createDelegationToken), unlike the broker's own refusals' -1.
    failed = CreateDelegationTokenResponse(
        owner=owner,
        requester=request.requester,
        issue_timestamp_ms=0,
        expiry_timestamp_ms=0,
        max_timestamp_ms=0,
    )
    key = secret_key(settings)
    if key is None:
        return ControllerResult((), attrs.evolve(failed, error=_disabled()))
    renewer_error = _renewer_error(request.renewers)
    if renewer_error is not None:
        return ControllerResult((), attrs.evolve(failed, error=renewer_error))
    max_lifetime_ms = settings.delegation_token_max_lifetime_ms
    if request.max_lifetime_ms > 0:
        max_lifetime_ms = min(max_lifetime_ms, request.max_lifetime_ms)
    max_timestamp_ms = now_ms + max_lifetime_ms
    expiry_timestamp_ms = min(max_timestamp_ms, now_ms + settings.delegation_token_expiry_time_ms)
    token = TokenInformation(
        token_id=_new_token_id(image, rng),
        owner=owner,
        requester=request.requester,
        renewers=request.renewers,
        issue_timestamp_ms=now_ms,
        expiry_timestamp_ms=expiry_timestamp_ms,
        max_timestamp_ms=max_timestamp_ms,
    )
    response = attrs.evolve(
        failed,
        issue_timestamp_ms=token.issue_timestamp_ms,
        expiry_timestamp_ms=token.expiry_timestamp_ms,
        max_timestamp_ms=token.max_timestamp_ms,
        token_id=token.token_id,
        hmac=token_hmac(token.token_id, key),
    )
    return ControllerResult((token.to_record(),), response)


def _disabled() -> ApiError:
    return ApiError.of(
        Errors.DELEGATION_TOKEN_AUTH_DISABLED, "Delegation Token authentication is disabled"
    )


def _token(
    image: MetadataImage, hmac: bytes, settings: ControllerSettings
) -> TokenInformation | ApiError:
    """The token with this HMAC, or why not: disabled, then not found (Kafka's first checks)."""
    key = secret_key(settings)
    if key is None:
        return _disabled()
    token = token_for_hmac(image, hmac, key)
    if token is None:
        return ApiError.of(Errors.DELEGATION_TOKEN_NOT_FOUND)
    return token


def _owner_mismatch(token: TokenInformation, principal: str) -> bool:
    """``principal`` is neither the owner nor a renewer (Kafka's ``allowedToRenew`` is false;
    the requester alone is not allowed)."""
    return principal != token.owner and principal not in token.renewers


def _refused(error: ApiError) -> ControllerResult[DelegationTokenExpiryResponse]:
    """The controller's refusals leave the response's expiry timestamp at its schema default,
    0 (Kafka's ``DelegationTokenControlManager`` sets only the error code); the broker's own
    DELEGATION_TOKEN_REQUEST_NOT_ALLOWED answers -1 (``DelegationTokenManager.ErrorTimestamp``)."""
    return ControllerResult((), DelegationTokenExpiryResponse(error=error, expiry_timestamp_ms=0))


def renew_delegation_token(
    image: MetadataImage,
    request: RenewDelegationTokenRequest,
    settings: ControllerSettings,
    now_ms: int,
) -> ControllerResult[DelegationTokenExpiryResponse]:
    # Kafka's renewDelegationToken: an expired token is refused before the owner is checked.
    token = _token(image, request.hmac, settings)
    if isinstance(token, ApiError):
        return _refused(token)
    if is_expired(token, now_ms):
        return _refused(ApiError.of(Errors.DELEGATION_TOKEN_EXPIRED))
    if _owner_mismatch(token, request.principal):
        return _refused(ApiError.of(Errors.DELEGATION_TOKEN_OWNER_MISMATCH))
    period_ms = settings.delegation_token_expiry_time_ms
    if request.renew_period_ms > 0:
        period_ms = min(period_ms, request.renew_period_ms)
    expiry_ms = min(token.max_timestamp_ms, now_ms + period_ms)
    renewed = attrs.evolve(token, expiry_timestamp_ms=expiry_ms)
    return ControllerResult(
        (renewed.to_record(),), DelegationTokenExpiryResponse(expiry_timestamp_ms=expiry_ms)
    )


def expire_delegation_token(
    image: MetadataImage,
    request: ExpireDelegationTokenRequest,
    settings: ControllerSettings,
    now_ms: int,
) -> ControllerResult[DelegationTokenExpiryResponse]:
    token = _token(image, request.hmac, settings)
    if isinstance(token, ApiError):
        return _refused(token)
    if _owner_mismatch(token, request.principal):
        return _refused(ApiError.of(Errors.DELEGATION_TOKEN_OWNER_MISMATCH))
    period_ms = request.expiry_time_period_ms
    if period_ms < 0:
        return ControllerResult(
            (RemoveDelegationTokenRecord(token_id=token.token_id),),
            DelegationTokenExpiryResponse(expiry_timestamp_ms=now_ms),
        )
    if is_expired(token, now_ms):
        return _refused(ApiError.of(Errors.DELEGATION_TOKEN_EXPIRED))
    expiry_ms = min(token.max_timestamp_ms, now_ms + period_ms)
    expired = attrs.evolve(token, expiry_timestamp_ms=expiry_ms)
    return ControllerResult(
        (expired.to_record(),), DelegationTokenExpiryResponse(expiry_timestamp_ms=expiry_ms)
    )


def sweep_expired_tokens(image: MetadataImage, now_ms: int) -> ControllerResult[int]:
    """Remove tokens past their expiry or max timestamp (at most ``MAX_TOKENS_PER_SWEEP``, in
    token-id order); the response is how many."""
    tokens = image.delegation_tokens.tokens
    expired = sorted(token_id for token_id, t in tokens.items() if is_expired(t, now_ms))
    records = tuple(
        RemoveDelegationTokenRecord(token_id=token_id)
        for token_id in expired[:MAX_TOKENS_PER_SWEEP]
    )
    return ControllerResult(records, len(records))


def handle(
    image: MetadataImage,
    request: DelegationTokenRequest,
    settings: ControllerSettings,
    rng: RandomSource,
    now_ms: int,
) -> ControllerResult[Any]:
    """Dispatch one of the three requests (``QuorumController.delegation_token``)."""
    match request:
        case CreateDelegationTokenRequest():
            return create_delegation_token(image, request, settings, rng, now_ms)
        case RenewDelegationTokenRequest():
            return renew_delegation_token(image, request, settings, now_ms)
        case ExpireDelegationTokenRequest():
            return expire_delegation_token(image, request, settings, now_ms)
