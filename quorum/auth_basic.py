"""Operators without a client certificate: HTTP Basic over TLS, checked against SCRAM credentials.

Why: an operator's tool (``pykraft topics``, curl) should not need a certificate per person,
and the cluster already holds a password check for every user — the SCRAM credentials of the
metadata image (KIP-554 ``UserScramCredentialRecord``: salt, iterations, StoredKey, ServerKey).
So ``Authorization: Basic`` is accepted on a TLS listener only (the password crosses TLS, never
plaintext) and verified as a SCRAM server verifies a client proof, without a SCRAM exchange:
SaltedPassword = Hi(password, salt, iterations) (PBKDF2-HMAC), ClientKey = HMAC(SaltedPassword,
"Client Key"), and H(ClientKey) must equal the stored StoredKey (RFC 5802 §3), compared in
constant time. The password is never stored, logged or put in an error message; nothing derived
from it outlives the check.

Pure: the header text and the credentials in, a user name or None out. Computing Hi costs
milliseconds (4096+ iterations); the shell runs it off the event loop and bounds how many run
at once (``quorum/auth_http.py``).
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
from typing import Protocol

import attrs

# Bounds (STYLE.md §7): a Basic header longer than this is refused before decoding.
MAX_BASIC_HEADER_CHARS = 1024
# SCRAM mechanisms tried, strongest first (Kafka's ScramMechanism names and their hashes).
MECHANISMS: tuple[tuple[str, str], ...] = (("SCRAM-SHA-512", "sha512"), ("SCRAM-SHA-256", "sha256"))


@attrs.frozen
class ScramCredential:
    """One user's stored SCRAM credential for one mechanism (never the password)."""

    salt: bytes = attrs.field(repr=False)
    iterations: int
    stored_key: bytes = attrs.field(repr=False)


class ScramCredentials(Protocol):
    """Where credentials come from (the metadata image's SCRAM credentials)."""

    def scram_credential(self, user: str, mechanism: str) -> ScramCredential | None: ...


@attrs.frozen
class BasicCredentials:
    user: str
    password: str = attrs.field(repr=False)


def parse_basic(header: str | None) -> BasicCredentials | None:
    """``Basic base64(user:password)`` -> the pair; None for no header, another scheme, or a
    malformed value (the caller answers 401 without echoing it)."""
    if header is None or len(header) > MAX_BASIC_HEADER_CHARS:
        return None
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "basic":
        return None
    try:
        decoded = base64.b64decode(value.strip(), validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError):
        return None
    user, colon, password = decoded.partition(":")
    if not colon or not user or not password:
        return None
    return BasicCredentials(user, password)


def stored_key_of(password: str, salt: bytes, iterations: int, hash_name: str) -> bytes:
    """RFC 5802: StoredKey = H(HMAC(Hi(password, salt, i), "Client Key"))."""
    salted = hashlib.pbkdf2_hmac(hash_name, password.encode("utf-8"), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", hash_name).digest()
    return hashlib.new(hash_name, client_key).digest()


def verify(credentials: ScramCredentials, basic: BasicCredentials) -> bool:
    """Does ``basic.password`` match the user's stored credential of any mechanism?"""
    for mechanism, hash_name in MECHANISMS:
        stored = credentials.scram_credential(basic.user, mechanism)
        if stored is None:
            continue
        candidate = stored_key_of(basic.password, stored.salt, stored.iterations, hash_name)
        if hmac.compare_digest(candidate, stored.stored_key):
            return True
    return False
