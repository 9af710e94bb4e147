"""The server side of SASL/PLAIN and SASL/SCRAM-SHA-256/512: tokens in, tokens out, no I/O.

Kafka's ``PlainSaslServer`` and ``ScramSaslServer``, with the same failures:

* PLAIN (RFC 4616): one token ``[authzid] NUL authcid NUL passwd``. The users are those of
  ``PlainLoginModule``'s JAAS options ``user_<name>="<password>"`` (``broker.sasl_config``);
  passwords are kept only as SHA-256 digests and compared in constant time
  (``hmac.compare_digest``). A wrong password or unknown user fails with Kafka's
  ``SaslAuthenticationException("Authentication failed: Invalid username or password")``.
* SCRAM (RFC 5802, KIP-84): two rounds through ``scramp``'s ``ScramServer``; credentials are
  KIP-554's ``(salt, stored_key, server_key, iterations)`` — never a password — looked up with a
  ``ScramCredentialSource`` (the broker feeds it from the metadata image's
  ``UserScramCredentialRecord``s; tests use ``StaticScramCredentials``). Every SCRAM failure is a
  ``SaslException`` in Kafka, so the client only learns "invalid credentials".

``SaslAuthenticationError`` carries a message the client may see; ``SaslError``'s message is
only logged (it may say whether a user exists), and the client gets Kafka's generic one.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import Protocol

import attrs
import scramp

from pykraft.metadata.auth.principal import KafkaPrincipal, user
from pykraft.metadata.auth.scram import ScramCredential

PLAIN = "PLAIN"
SCRAM_SHA_256 = "SCRAM-SHA-256"
SCRAM_SHA_512 = "SCRAM-SHA-512"
SCRAM_MECHANISMS = (SCRAM_SHA_256, SCRAM_SHA_512)
SUPPORTED_MECHANISMS = (PLAIN, *SCRAM_MECHANISMS)
# ScramMechanism.minIterations: 4096 for both SHA-256 and SHA-512 (Kafka's ScramMechanism).
SCRAM_MIN_ITERATIONS = 4096


class SaslError(Exception):
    """A failed exchange whose detail stays in the broker's log (Kafka's ``SaslException``)."""


class SaslAuthenticationError(SaslError):
    """A failed exchange whose message goes to the client (``SaslAuthenticationException``)."""


class ScramCredentialSource(Protocol):
    """``(user, mechanism) -> credential | None``; the broker's image will implement it."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        """A delegation token's credential and its owner (KIP-48), or None."""
        ...


class StaticScramCredentials:
    """A fixed set of credentials (tests, and brokers until the metadata image carries them)."""

    def __init__(self, credentials: Mapping[tuple[str, str], ScramCredential]) -> None:
        self._credentials = dict(credentials)

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None:
        return self._credentials.get((user, mechanism))

    def token_credential(
        self, token_id: str, mechanism: str
    ) -> tuple[ScramCredential, KafkaPrincipal] | None:
        return None


class SaslServer(Protocol):
    """One mechanism's server for one connection (Kafka's ``javax.security.sasl.SaslServer``)."""

    @property
    def complete(self) -> bool: ...

    @property
    def authorization_id(self) -> str: ...

    @property
    def principal(self) -> KafkaPrincipal:
        """Who the exchange proved: ``User:<authorization id>``, or a token's owner."""
        ...

    def evaluate_response(self, token: bytes) -> bytes:
        """The next challenge; raises ``SaslError``/``SaslAuthenticationError``."""
        ...


@attrs.frozen
class PlainUsers:
    """``user_<name>="<password>"`` of a JAAS config, kept as SHA-256 digests."""

    digests: Mapping[str, bytes] = attrs.field(repr=False)

    @classmethod
    def from_passwords(cls, passwords: Mapping[str, str]) -> PlainUsers:
        return cls({name: _digest(password) for name, password in passwords.items()})


def _digest(password: str) -> bytes:
    return hashlib.sha256(password.encode()).digest()


# Compared against when the user is unknown, so both paths do the same work.
_NO_USER_DIGEST = _digest("")


class _CompletingServer:
    """What every mechanism's server shares: done once, with the user it proved."""

    def __init__(self) -> None:
        self._authorization_id = ""
        self._complete = False

    @property
    def complete(self) -> bool:
        return self._complete

    @property
    def authorization_id(self) -> str:
        assert self._complete, "no authorization id before the exchange completes"
        return self._authorization_id

    @property
    def principal(self) -> KafkaPrincipal:
        return user(self.authorization_id)

    def _become_complete(self, authorization_id: str) -> None:
        assert not self._complete, "a SASL exchange completes once"
        self._authorization_id = authorization_id
        self._complete = True


class PlainServer(_CompletingServer):
    def __init__(self, users: PlainUsers) -> None:
        super().__init__()
        self._users = users

    def evaluate_response(self, token: bytes) -> bytes:
        # PlainSaslServer.evaluateResponse: "[authzid] UTF8NUL authcid UTF8NUL passwd".
        try:
            text = token.decode("utf-8")
        except UnicodeDecodeError:
            raise SaslError("Invalid SASL/PLAIN response: not UTF-8") from None
        parts = text.split("\0")
        if len(parts) != 3:
            raise SaslError(f"Invalid SASL/PLAIN response: expected 3 tokens, got {len(parts)}")
        authorization_id, username, password = parts
        if not username:
            raise SaslAuthenticationError("Authentication failed: username not specified")
        if not password:
            raise SaslAuthenticationError("Authentication failed: password not specified")
        expected = self._users.digests.get(username)
        matches = hmac.compare_digest(_digest(password), expected or _NO_USER_DIGEST)
        if expected is None or not matches:
            raise SaslAuthenticationError("Authentication failed: Invalid username or password")
        if authorization_id and authorization_id != username:
            raise SaslAuthenticationError(
                "Authentication failed: Client requested an authorization id that is different "
                "from username"
            )
        self._become_complete(username)
        return b""


class ScramServer(_CompletingServer):
    """Two rounds: client-first -> server-first, client-final -> server-final."""

    def __init__(self, mechanism: str, credentials: ScramCredentialSource, nonce: str) -> None:
        super().__init__()
        assert mechanism in SCRAM_MECHANISMS
        self._mechanism = mechanism
        self._credentials = credentials
        self._username = ""
        self._server = scramp.ScramMechanism(mechanism).make_server(self._lookup, s_nonce=nonce)
        self._rounds = 0
        # scramp wraps what the lookup raises; the lookup's own reason is kept for the log.
        self._lookup_failure: SaslError | None = None
        # KIP-48: the client-first message asked for token authentication (``tokenauth=true``);
        # then the token's owner, once its credential is found.
        self._token_auth = False
        self._token_owner: KafkaPrincipal | None = None

    @property
    def principal(self) -> KafkaPrincipal:
        if self._token_owner is not None:
            return attrs.evolve(self._token_owner, token_authenticated=True)
        return user(self.authorization_id)

    def _lookup(self, sasl_name: str) -> tuple[bytes, bytes, bytes, int]:
        # ScramFormatter.username: "=2C" is ",", "=3D" is "=" (RFC 5802 saslname).
        username = sasl_name.replace("=2C", ",").replace("=3D", "=")
        credential = self._credential(username)
        if credential is None:
            self._lookup_failure = SaslError(
                f"Authentication failed: Invalid user credentials ({username!r})"
            )
            raise self._lookup_failure
        if credential.iterations < SCRAM_MIN_ITERATIONS:
            self._lookup_failure = SaslError(
                f"Iterations {credential.iterations} is less than the minimum"
            )
            raise self._lookup_failure
        self._username = username
        return (
            credential.salt,
            credential.stored_key,
            credential.server_key,
            credential.iterations,
        )

    def _credential(self, username: str) -> ScramCredential | None:
        if not self._token_auth:
            return self._credentials.scram_credential(username, self._mechanism)
        # ScramSaslServer: with tokenauth the user name is the token id (DelegationTokenCache).
        found = self._credentials.token_credential(username, self._mechanism)
        if found is None:
            return None
        credential, self._token_owner = found
        return credential

    def _client_first(self, message: str) -> str:
        """``message`` without its extensions (scramp refuses them), remembering ``tokenauth``
        (Kafka's ``ScramExtensions``: ``key=value`` attributes after the nonce)."""
        header, _, bare = message.partition(",")
        authzid, _, bare = bare.partition(",")
        kept: list[str] = []
        extensions: dict[str, str] = {}
        for attribute in bare.split(","):
            name, _, value = attribute.partition("=")
            if name in ("n", "r", "m") or not kept or len(name) == 1:
                kept.append(attribute)
            else:
                extensions[name] = value
        self._token_auth = extensions.get("tokenauth", "").lower() == "true"
        return f"{header},{authzid},{','.join(kept)}"

    def _accept_nonce_as_kafka_does(self, client_final: str) -> None:
        """Kafka's ``ScramSaslServer`` only checks that the client-final nonce *ends with* the
        server-first nonce (``clientFinalMessage.nonce().endsWith(...)``); librdkafka 2.0
        (Debian's kcat) sends ``r=<client nonce><client nonce><server nonce>``. scramp wants
        equality, so a nonce Kafka accepts is handed to scramp as the expected one; the proof
        is still checked over the client-final message exactly as sent."""
        expected = str(self._server.nonce)
        for attribute in client_final.split(","):
            if attribute.startswith("r="):
                sent = attribute[2:]
                if sent != expected and sent.endswith(expected):
                    self._server.nonce = type(self._server.nonce)(sent)
                return

    def evaluate_response(self, token: bytes) -> bytes:
        if self._complete:
            raise SaslError("SCRAM exchange already complete")
        try:
            message = token.decode("utf-8")
            self._rounds += 1
            if self._rounds == 1:
                self._server.set_client_first(self._client_first(message))
                # The proof covers the client-first message as sent, extensions included.
                self._server.client_first_bare = message.split(",", 2)[2]
                server_first: str = self._server.get_server_first()
                return server_first.encode()
            self._accept_nonce_as_kafka_does(message)
            self._server.set_client_final(message)
            server_final: str = self._server.get_server_final()
        except SaslError:
            raise
        except (UnicodeDecodeError, scramp.ScramException) as error:
            if self._lookup_failure is not None:
                raise self._lookup_failure from None
            raise SaslError(f"SCRAM exchange failed: {error}") from None
        self._become_complete(self._username)
        return server_final.encode()
