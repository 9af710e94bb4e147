"""Delegation tokens in the metadata image, and their delta (KIP-48, KIP-373).

Kafka's ``DelegationTokenImage``/``DelegationTokenDelta`` keep every live token's
``TokenInformation`` by token id: owner, requester (KIP-373), renewers, and the issue, expiry
and max timestamps. Replay rules:

- ``DelegationTokenRecord`` puts the token under its id (a renewal or an expiry rewrites it);
- ``RemoveDelegationTokenRecord`` of an id the image does not hold is a ``MetadataReplayError``
  (the controller removes only tokens it holds; Kafka's delta would silently keep nothing).

A token's HMAC (its password) is never in the log: every node derives it from the token id and
the shared ``delegation.token.secret.key`` (``token_hmac``, Kafka's
``DelegationTokenManager.createHmac`` with its default ``HmacSHA512``).

Pure: no I/O, no clock.
"""

from __future__ import annotations

import base64
import hashlib
import hmac
from typing import ClassVar

import attrs
from immutables import Map

from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism, credential_from_password
from pykraft.metadata.errors import MetadataReplayError
from pykraft.metadata.records import DelegationTokenRecord, RemoveDelegationTokenRecord

# Kafka's DelegationTokenCache makes each token's SCRAM credentials with the mechanism's
# minimum iteration count.
TOKEN_SCRAM_ITERATIONS = 4096


def token_scram_credential(
    token_id: str, secret_key: str, mechanism: ScramMechanism
) -> ScramCredential:
    """The SCRAM credential a client logs in with using the token: user name the token id,
    password the base64 of its HMAC (Kafka's ``DelegationTokenCache.updateCache``, which keeps
    one per mechanism). The salt is derived from the token id, so every broker derives the
    same credential without storing one."""
    password = base64.b64encode(token_hmac(token_id, secret_key)).decode("ascii")
    salt = hashlib.sha256(b"pykraft delegation token salt:" + token_id.encode()).digest()[:16]
    return credential_from_password(mechanism, password, salt, TOKEN_SCRAM_ITERATIONS)


def token_hmac(token_id: str, secret_key: str) -> bytes:
    """The token's HMAC: HMAC-SHA512 of the token id keyed by the secret (both UTF-8), as
    Kafka's ``DelegationTokenManager.createHmac``."""
    return hmac.new(secret_key.encode(), token_id.encode(), hashlib.sha512).digest()


@attrs.frozen(kw_only=True)
class TokenInformation:
    """Kafka's ``TokenInformation``: principals are strings such as ``User:alice``."""

    token_id: str
    owner: str
    requester: str
    renewers: tuple[str, ...]
    issue_timestamp_ms: int
    expiry_timestamp_ms: int
    max_timestamp_ms: int

    @classmethod
    def from_record(cls, record: DelegationTokenRecord) -> TokenInformation:
        return cls(
            token_id=record.token_id,
            owner=record.owner,
            requester=record.requester,
            renewers=record.renewers,
            issue_timestamp_ms=record.issue_timestamp,
            expiry_timestamp_ms=record.expiration_timestamp,
            max_timestamp_ms=record.max_timestamp,
        )

    def to_record(self) -> DelegationTokenRecord:
        return DelegationTokenRecord(
            owner=self.owner,
            requester=self.requester,
            renewers=self.renewers,
            issue_timestamp=self.issue_timestamp_ms,
            max_timestamp=self.max_timestamp_ms,
            expiration_timestamp=self.expiry_timestamp_ms,
            token_id=self.token_id,
        )

    def owner_or_renewer(self, principal: str) -> bool:
        """Kafka's ``TokenInformation.ownerOrRenewer`` (KIP-373 adds the requester too)."""
        return principal in (self.owner, self.requester) or principal in self.renewers


@attrs.frozen(kw_only=True)
class DelegationTokenImage:
    # token id -> its information.
    tokens: Map[str, TokenInformation] = attrs.field(factory=Map)

    EMPTY: ClassVar[DelegationTokenImage]

    def to_records(self) -> list[DelegationTokenRecord]:
        """The records that rebuild this image, in token-id order (for snapshots)."""
        return [self.tokens[token_id].to_record() for token_id in sorted(self.tokens)]


DelegationTokenImage.EMPTY = DelegationTokenImage()


class DelegationTokenDelta:
    def __init__(self, image: DelegationTokenImage) -> None:
        self.image = image
        # token id -> the new information, or None when the token was removed.
        self.changes: dict[str, TokenInformation | None] = {}

    def token(self, token_id: str) -> TokenInformation | None:
        if token_id in self.changes:
            return self.changes[token_id]
        return self.image.tokens.get(token_id)

    def replay(self, record: DelegationTokenRecord | RemoveDelegationTokenRecord) -> None:
        if isinstance(record, RemoveDelegationTokenRecord):
            if self.token(record.token_id) is None:
                raise MetadataReplayError(
                    record, f"no delegation token with id {record.token_id!r}"
                )
            self.changes[record.token_id] = None
            return
        self.changes[record.token_id] = TokenInformation.from_record(record)

    def apply(self) -> DelegationTokenImage:
        if not self.changes:
            return self.image
        tokens = self.image.tokens.mutate()
        for token_id, token in self.changes.items():
            if token is not None:
                tokens[token_id] = token
            elif token_id in tokens:
                del tokens[token_id]
        return DelegationTokenImage(tokens=tokens.finish())
