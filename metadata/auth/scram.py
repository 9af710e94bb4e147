"""SCRAM credentials (KIP-554): what the metadata log keeps, and how it is made.

RFC 5802 lets a server verify a SCRAM exchange with four values per user and mechanism: the
salt, the iteration count, ``StoredKey = H(HMAC(SaltedPassword, "Client Key"))`` and
``ServerKey = HMAC(SaltedPassword, "Server Key")``. Those are all the log ever holds
(``UserScramCredentialRecord``); neither the password nor the salted password is stored,
logged or sent to a controller in clear.

Kafka's clients send AlterUserScramCredentials with the *salted* password (KIP-554: "the
client ... sends the salted password"), so the controller derives the keys with
``credential_from_salted_password`` (Kafka's ``ScramControlManager`` does the same through
``ScramFormatter``). Tools and tests that start from a password use ``salted_password`` or
``credential_from_password`` (scramp's ``make_auth_info``); the salt comes from the caller, so
everything here stays pure.

Mechanism codes and iteration bounds are Kafka's ``ScramMechanism`` (1 SCRAM-SHA-256, 2
SCRAM-SHA-512; at least 4096 iterations) and the 16384 maximum of Kafka's
AlterUserScramCredentials checks.
"""

from __future__ import annotations

import enum
import hashlib
import hmac

import attrs
import scramp

from pykraft.metadata.records import UserScramCredentialRecord

# Kafka's ScramMechanism.minIterations() and the AlterUserScramCredentials maximum.
MIN_ITERATIONS = 4096
MAX_ITERATIONS = 16384


class ScramMechanism(enum.IntEnum):
    """Kafka's ``org.apache.kafka.clients.admin.ScramMechanism`` type codes."""

    UNKNOWN = 0
    SCRAM_SHA_256 = 1
    SCRAM_SHA_512 = 2

    @property
    def mechanism_name(self) -> str:
        """The SASL name: ``SCRAM-SHA-256``."""
        return self.name.replace("_", "-")

    @property
    def hash_name(self) -> str:
        return {ScramMechanism.SCRAM_SHA_256: "sha256", ScramMechanism.SCRAM_SHA_512: "sha512"}[
            self
        ]

    @classmethod
    def from_mechanism_name(cls, name: str) -> ScramMechanism:
        """``SCRAM-SHA-512`` -> SCRAM_SHA_512; UNKNOWN for any other name (Kafka's
        ``ScramMechanism.fromMechanismName``)."""
        for mechanism in (cls.SCRAM_SHA_256, cls.SCRAM_SHA_512):
            if mechanism.mechanism_name == name:
                return mechanism
        return cls.UNKNOWN


@attrs.frozen
class ScramCredential:
    """Kafka's ``ScramCredential``; the keys never appear in a repr."""

    salt: bytes = attrs.field(repr=False)
    stored_key: bytes = attrs.field(repr=False)
    server_key: bytes = attrs.field(repr=False)
    iterations: int

    def to_record(self, user: str, mechanism: ScramMechanism) -> UserScramCredentialRecord:
        return UserScramCredentialRecord(
            name=user,
            mechanism=mechanism.value,
            salt=self.salt,
            stored_key=self.stored_key,
            server_key=self.server_key,
            iterations=self.iterations,
        )

    @classmethod
    def from_record(cls, record: UserScramCredentialRecord) -> ScramCredential:
        return cls(record.salt, record.stored_key, record.server_key, record.iterations)


def salted_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> bytes:
    """RFC 5802 ``Hi(Normalize(password), salt, i)`` — PBKDF2 — what a Kafka client sends in
    an AlterUserScramCredentials upsertion (Kafka's ``ScramFormatter.saltedPassword``)."""
    return hashlib.pbkdf2_hmac(mechanism.hash_name, password.encode("utf-8"), salt, iterations)


def credential_from_salted_password(
    mechanism: ScramMechanism, salt: bytes, salted: bytes, iterations: int
) -> ScramCredential:
    """StoredKey and ServerKey from the salted password (RFC 5802 §3)."""
    client_key = hmac.digest(salted, b"Client Key", mechanism.hash_name)
    stored_key = hashlib.new(mechanism.hash_name, client_key).digest()
    server_key = hmac.digest(salted, b"Server Key", mechanism.hash_name)
    return ScramCredential(salt, stored_key, server_key, iterations)


def credential_from_password(
    mechanism: ScramMechanism, password: str, salt: bytes, iterations: int
) -> ScramCredential:
    """The credential for ``password`` (scramp's ``make_auth_info``, which SASLprep's the
    password as RFC 5802 asks; the same bytes as ``salted_password`` for ASCII passwords)."""
    made_salt, stored_key, server_key, made_iterations = scramp.ScramMechanism(
        mechanism.mechanism_name
    ).make_auth_info(password, iteration_count=iterations, salt=salt)
    return ScramCredential(made_salt, stored_key, server_key, made_iterations)
