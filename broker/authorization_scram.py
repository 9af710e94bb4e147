"""SCRAM logins against the metadata image's KIP-554 credentials.

Kafka's brokers check a SCRAM proof against the ``UserScramCredentialRecord``s their metadata
publisher put in the ``CredentialCache`` (``ScramPublisher``); here the listeners' SASL servers
(``broker.sasl_mechanisms.ScramServer``) ask ``ImageScramCredentials``, which reads the
broker's current image each time, so a credential altered through AlterUserScramCredentials
works (or stops working) from the first image that carries the change. Only the salt, the
stored and server keys and the iteration count are there — never a password.
"""

from __future__ import annotations

from collections.abc import Callable

from pykraft.metadata.auth.scram import ScramCredential, ScramMechanism
from pykraft.metadata.image import MetadataImage


class ImageScramCredentials:
    """``broker.sasl_mechanisms.ScramCredentialSource`` over the latest metadata image."""

    def __init__(self, image: Callable[[], MetadataImage]) -> None:
        self._image = image

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        kind = ScramMechanism.from_mechanism_name(mechanism)
        if kind is ScramMechanism.UNKNOWN:
            return None
        return self._image().scram.credential(user, kind)
