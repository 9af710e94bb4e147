"""Delegation token requests of the controller (KIP-48, KIP-373): types.

The requests are the pure controller's inputs for Kafka's CreateDelegationToken,
RenewDelegationToken and ExpireDelegationToken, which a broker forwards to the controller as
Kafka's ``KafkaApis.handle*DelegationTokenRequest`` do. Principals are strings in Kafka's
``KafkaPrincipal.toString`` form (``User:alice``); ``requester`` / ``principal`` is the
authenticated principal of the connection the broker received the request on.
DescribeDelegationToken reads the committed image and needs no controller request.
"""

from __future__ import annotations

import attrs

from pykraft.metadata.api.errors import SUCCESS, ApiError

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
