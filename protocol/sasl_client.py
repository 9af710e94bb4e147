"""The client side of SASL/PLAIN and SASL/SCRAM-SHA-256/512 for broker-to-broker connections:
challenges in, tokens out, no I/O (Kafka's ``PlainSaslClient`` / ``ScramSaslClient``).

The broker authenticates to another broker's inter-broker listener with its own credentials
(``sasl.mechanism.inter.broker.protocol`` and the JAAS ``username``/``password`` of that
listener). The SCRAM client nonce is a parameter (the caller draws it); ``scramp`` runs the
exchange and verifies the server's signature, so a server that does not know the password
cannot pass as the leader.
"""

from __future__ import annotations

import attrs
import scramp

PLAIN = "PLAIN"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")


class SaslClientError(Exception):
    """The server's answer does not verify (a SCRAM server signature, a malformed message)."""


@attrs.frozen
class SaslClientCredentials:
    mechanism: str
    username: str
    password: str = attrs.field(repr=False)


class SaslClient:
    """``next_token(challenge)`` until ``complete``: the first call passes None."""

    def __init__(self, credentials: SaslClientCredentials, nonce: str) -> None:
        mechanism = credentials.mechanism
        assert mechanism == PLAIN or mechanism in SCRAM_MECHANISMS, mechanism
        self._credentials = credentials
        self._scram = (
            scramp.ScramClient(
                [mechanism], credentials.username, credentials.password, c_nonce=nonce
            )
            if mechanism in SCRAM_MECHANISMS
            else None
        )
        self._round = 0
        self.complete = False

    def next_token(self, challenge: bytes | None) -> bytes | None:
        """The token to send after ``challenge``; None once the exchange is complete."""
        self._round += 1
        try:
            return self._next_token(challenge)
        except (UnicodeDecodeError, scramp.ScramException) as error:
            raise SaslClientError(f"{self._credentials.mechanism}: {error}") from None

    def _next_token(self, challenge: bytes | None) -> bytes | None:
        if self._scram is None:  # PLAIN: one token, an empty answer
            if self._round == 1:
                return f"\0{self._credentials.username}\0{self._credentials.password}".encode()
            self.complete = True
            return None
        if self._round == 1:
            first: str = self._scram.get_client_first()
            return first.encode()
        assert challenge is not None
        if self._round == 2:
            self._scram.set_server_first(challenge.decode())
            final: str = self._scram.get_client_final()
            return final.encode()
        self._scram.set_server_final(challenge.decode())
        self.complete = True
        return None
