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
import hmac
from typing import Protocol

import attrs

from pykraft.metadata.auth.scram import (
    ScramCredential,
    ScramMechanism,
    credential_from_salted_password,
    salted_password,
)

# Bounds (STYLE.md §7): a Basic header longer than this is refused before decoding.
MAX_BASIC_HEADER_CHARS = 1024
# SCRAM mechanisms tried, strongest first.
MECHANISMS = (ScramMechanism.SCRAM_SHA_512, ScramMechanism.SCRAM_SHA_256)


class ScramCredentials(Protocol):
    """Where credentials come from: the metadata image's ``ScramImage``."""

    def credential(self, user: str, mechanism: ScramMechanism) -> ScramCredential | None: ...


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


def verify(credentials: ScramCredentials, basic: BasicCredentials) -> bool:
    """Does ``basic.password`` give the StoredKey of the user's credential of any mechanism?"""
    for mechanism in MECHANISMS:
        stored = credentials.credential(basic.user, mechanism)
        if stored is None:
            continue
        salted = salted_password(mechanism, basic.password, stored.salt, stored.iterations)
        candidate = credential_from_salted_password(
            mechanism, stored.salt, salted, stored.iterations
        )
        if hmac.compare_digest(candidate.stored_key, stored.stored_key):
            return True
    return False
