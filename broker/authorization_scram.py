"""SCRAM logins against the metadata image's KIP-554 credentials.

Kafka's brokers check a SCRAM proof against the ``UserScramCredentialRecord``s their metadata
publisher put in the ``CredentialCache`` (``ScramPublisher``); here the listeners' SASL servers
(``broker.sasl_mechanisms.ScramServer``) ask ``ImageScramCredentials``, which reads the
broker's current image each time, so a credential altered through AlterUserScramCredentials
works (or stops working) from the first image that carries the change. Only the salt, the
stored and server keys and the iteration count are there — never a password.

Delegation tokens (KIP-48): a SCRAM login with the ``tokenauth=true`` extension names a token
id as its user and the base64 of the token's HMAC as its password; ``token_credential``
derives that credential from the image's token and ``delegation.token.secret.key``.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.metadata.auth.principal import KafkaPrincipal, PrincipalError
from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism
from pykraft.metadata.delegation_tokens import token_scram_credential
from pykraft.metadata.image import MetadataImage


class ImageScramCredentials:
    """``broker.sasl_mechanisms.ScramCredentialSource`` over the latest metadata image."""

    def __init__(
        self, image: Callable[[], MetadataImage], delegation_token_secret_key: str | None = None
    ) -> None:
        self._image = image
        self._secret_key = delegation_token_secret_key or None

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        kind = ScramMechanism.from_mechanism_name(mechanism)
        if kind is ScramMechanism.UNKNOWN:
            return None
        return self._image().scram.credential(user, kind)

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        """KIP-48: a token of the image logs in as its owner (Kafka's
        ``DelegationTokenCache.credential`` and ``ScramSaslServer``'s owner lookup), until the
        controller's expiry sweep removes it, as Kafka's cache holds it until then."""
        kind = ScramMechanism.from_mechanism_name(mechanism)
        if self._secret_key is None or kind is ScramMechanism.UNKNOWN:
            return None
        token = self._image().delegation_tokens.tokens.get(token_id)
        if token is None:
            return None
        try:
            owner = KafkaPrincipal.parse(token.owner)
        except PrincipalError:
            return None
        return token_scram_credential(token_id, self._secret_key, kind), owner
